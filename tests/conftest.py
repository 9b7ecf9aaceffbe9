import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_home():
    """Folder holding ``uci/`` and ``mnist/``: $SKBAYES_DATA_HOME or ../shared/data."""
    path = Path(os.environ.get("SKBAYES_DATA_HOME", Path(__file__).resolve().parents[2] / "shared" / "data"))
    if not (path / "uci").is_dir():
        pytest.fail(f"benchmark data not found at {path}; set SKBAYES_DATA_HOME to the folder holding uci/")
    return path
