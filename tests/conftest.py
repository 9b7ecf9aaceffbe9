import pytest


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
