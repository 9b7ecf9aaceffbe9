import os

import numpy as np
import pytest

# Test modules whose tests are independent of each other and many (scikit-learn's estimator checks):
# under pytest-xdist they spread over all workers; every other module runs on one worker, so that its
# module- and session-scoped fixtures (fitted models, the documentation build) are computed once.
_SPREAD_MODULES = {"test_common.py", "test_quality_at_defaults.py"}


def pytest_configure(config):
    """Under pytest-xdist, each worker gets its share of the cores (1 thread with 2 workers on 2).

    Its torch, and through ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` the processes its tests start (the
    documentation build, the command line): more busy OpenMP threads than cores slow training many-fold.
    """
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers:
        import torch

        share = max(1, (os.cpu_count() or 1) // int(workers))
        torch.set_num_threads(share)
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(share)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Group each test module on one xdist worker (``--dist loadgroup``), except :data:`_SPREAD_MODULES`."""
    for item in items:
        if item.path.name not in _SPREAD_MODULES and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.path.stem))


# The 1-D sine data of the regressors' behaviour tests (tests/gaussian_process/test_sparse_gp.py,
# tests/neural_network/test_bayesian_mlp.py); they import ``sine`` and ``SINE_NOISE`` from here.
SINE_NOISE = 0.2


def sine(n, seed, low=-3.0, high=3.0, noise=SINE_NOISE):
    """``X, y``: ``n`` rows of x ~ U(low, high) in one column, y = sin(2x) + noise * N(0, 1).

    Drawn from ``np.random.RandomState(seed)``: the inputs first, then the noise.
    """
    rng = np.random.RandomState(seed)
    X = rng.uniform(low, high, size=(n, 1))
    return X, np.sin(2 * X[:, 0]) + noise * rng.randn(n)


@pytest.fixture(scope="module")
def sine_data():
    """``(X, y), (X_test, y_test)``: 500 training rows (seed 0) and 2,000 test rows (seed 1) of :func:`sine`."""
    return sine(500, 0), sine(2000, 1)


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
