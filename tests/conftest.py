import os
from pathlib import Path

import pytest


def _candidate_data_homes():
    if os.environ.get("SKBAYES_DATA_HOME"):
        yield Path(os.environ["SKBAYES_DATA_HOME"])
        return
    # ../shared/data beside the checkout, or beside any folder above it.
    for parent in Path(__file__).resolve().parents[1:]:
        yield parent / "shared" / "data"


@pytest.fixture(scope="session")
def data_home():
    """Folder holding ``uci/`` and ``mnist/``: $SKBAYES_DATA_HOME or ../shared/data."""
    candidates = list(_candidate_data_homes())
    for path in candidates:
        if (path / "uci").is_dir():
            return path
    pytest.fail(
        "benchmark data not found (looked in: "
        + ", ".join(str(p) for p in candidates)
        + "); set SKBAYES_DATA_HOME to the folder holding uci/"
    )
