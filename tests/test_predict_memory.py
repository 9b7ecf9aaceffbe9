"""Prediction memory is bounded by a constant, whatever the number of rows.

Every prediction method works through blocks of rows whose intermediate
values are sized by ``skbayes.base.PREDICT_BLOCK_BYTES`` (32 MiB), so the
memory a prediction holds beyond its inputs and outputs is bounded by
``PREDICT_MEMORY_BOUND`` (four blocks: 128 MiB) whatever the number of rows.
Measured here as the growth of the process's peak resident set size during
the call (Linux resets the peak when ``5`` is written to
``/proc/self/clear_refs``; glibc's mmap threshold is fixed at 1 MiB, so that
freed buffers leave the resident set rather than stay in the allocator's
cache), minus the outputs' bytes, at 10,000 rows and at
200,000 rows: a method that held an (n_rows, n_draws) array of float64 for
100 draws, or an (n_rows, 50) array per draw, would exceed the bound at
200,000 rows. ``examples/benchmarks/predict_memory.py`` prints the same
measurement for every estimator and method, with times at 10^6 rows.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from skbayes import (
    VAE,
    BayesianGaussianMixture,
    BayesianMLPClassifier,
    BayesianMLPRegressor,
    DeepGPRegressor,
    SparseGPClassifier,
    SparseGPRegressor,
)
from skbayes.base import PREDICT_MEMORY_BOUND
from skbayes.inference import SGHMC, SWAG, Laplace, MeanFieldVI, SampledSparseGP, SparseVariational

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("predict_memory", ROOT / "examples" / "benchmarks" / "predict_memory.py")
predict_memory = importlib.util.module_from_spec(spec)
spec.loader.exec_module(predict_memory)

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="peak RSS is reset through Linux's /proc"),
    pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
]
SLACK = 32 * 2**20  # the allocator's and Python's own bookkeeping


rng = np.random.RandomState(0)
X_FIT, Y_FIT = rng.randn(200, 8), rng.randn(200)
SMALL = (10,)
MODELS = {
    "mlp_mfvi": lambda: BayesianMLPRegressor(SMALL, inference=MeanFieldVI(max_iter=2), noise="heteroscedastic"),
    "mlp_sghmc": lambda: BayesianMLPRegressor(SMALL, inference=SGHMC(burn_in=2, thinning=1, n_kept_samples=25)),
    "mlp_classifier": lambda: BayesianMLPClassifier(SMALL, inference=MeanFieldVI(max_iter=2)),
    "mlp_laplace": lambda: BayesianMLPRegressor(SMALL, inference=Laplace(max_iter=2), noise="homoscedastic"),
    # the linearised network: a value and a tangent per layer and draw
    "mlp_laplace_all": lambda: BayesianMLPRegressor(SMALL, inference=Laplace(subset="all", max_iter=2),
                                                    noise="homoscedastic"),
    "mlp_swag": lambda: BayesianMLPRegressor(SMALL, inference=SWAG(n_models=2, max_iter=2, swa_epochs=3)),
    "sparse_gp": lambda: SparseGPRegressor(n_inducing=50, inference=SparseVariational(max_iter=2)),
    "sparse_gp_classifier": lambda: SparseGPClassifier(n_inducing=50, inference=SparseVariational(max_iter=2)),
    # 40 kept samples: (40, 200,000) means and variances would be 128 MB
    "bayesian_sparse_gp": lambda: SparseGPRegressor(
        n_inducing=50,
        inference=SampledSparseGP(SGHMC(burn_in=2, thinning=1)),
    ),
    # the default M = 100 and width (8 here): its blocks' intermediates grow with M * width per row and draw
    "deep_gp": lambda: DeepGPRegressor(n_mc_predict=10, inference=SparseVariational(max_iter=2)),
    "mixture": lambda: BayesianGaussianMixture(n_components=5, max_iter=2),
    "vae": lambda: VAE(hidden_layer_sizes=SMALL, max_iter=2),
}
# One method per model, the one holding the most per row (the benchmark measures every method).
CASES = {
    "mlp_mfvi": "predict_std",
    "mlp_sghmc": "log_predictive_density",
    "mlp_classifier": "predict_proba",
    "mlp_laplace": "predict_std",
    "mlp_laplace_all": "log_predictive_density",
    "mlp_swag": "log_predictive_density",
    "sparse_gp": "predict_std",
    "sparse_gp_classifier": "predict_proba",
    "bayesian_sparse_gp": "predict_std",
    "deep_gp": "predict_std",
    "mixture": "score_samples",
    "vae": "transform",
}


@pytest.fixture(scope="module")
def fitted():
    # freed large buffers go back to the OS, so that the peak RSS follows what a prediction holds
    predict_memory.fix_mmap_threshold()
    models = {}
    for name, make in MODELS.items():
        model = make().set_params(random_state=0)
        y = None if name in ("mixture", "vae") else (Y_FIT > 0) if "classifier" in name else Y_FIT
        models[name] = model.fit(X_FIT) if y is None else model.fit(X_FIT, y)
    return models


@pytest.mark.skipif(not predict_memory.CLEAR_REFS.exists(), reason="no /proc/self/clear_refs")
@pytest.mark.parametrize("name,method", CASES.items())
def test_prediction_memory_is_bounded_whatever_the_number_of_rows(fitted, name, method):
    model = fitted[name]
    predict_memory.prediction_call(model, method, X_FIT[:50])()  # first-call allocations are not the prediction's
    for n_rows in (10_000, 200_000):
        X = np.random.RandomState(1).randn(n_rows, 8)
        growth, _ = predict_memory.peak_growth(predict_memory.prediction_call(model, method, X))
        assert growth <= PREDICT_MEMORY_BOUND + SLACK, (
            f"{name}.{method} on {n_rows:,} rows held {growth / 2**20:.0f} MiB beyond its outputs "
            f"(bound {PREDICT_MEMORY_BOUND / 2**20:.0f} MiB)"
        )
