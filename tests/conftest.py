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


@pytest.fixture(autouse=True, scope="session")
def _auto_device_is_the_cpu():
    """``device="auto"`` means the CPU in the tests.

    Most tests compare a model's tensors with CPU computations (NumPy, closed
    forms in float64); on a machine with a GPU, ``"auto"`` would fit those
    models on CUDA in float32. Tests that need CUDA say ``device="cuda"``
    (``tests/test_cuda.py`` runs every estimator and inference method there)
    and are marked ``cuda``.
    """
    import torch

    from skbayes.base import TorchEstimatorMixin

    resolve = TorchEstimatorMixin._resolve_device

    def resolve_on_cpu(self):
        return torch.device("cpu") if self.device == "auto" else resolve(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(TorchEstimatorMixin, "_resolve_device", resolve_on_cpu)
        yield
