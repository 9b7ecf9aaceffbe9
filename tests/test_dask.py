"""skbayes on a Dask cluster (doc/cluster.md).

One ``distributed.LocalCluster`` of two single-threaded worker processes,
started once for the module on 127.0.0.1 with no dashboard, serves every
test; each result computed on it is compared with the same computation made
in this process without Dask:

* ``GridSearchCV`` through joblib's Dask backend, scored by uncertainty-aware
  scorers, gives the sequential run's ``cv_results_`` bit for bit (both sides
  use one torch thread, so the floating-point reductions are the same);
* ``dask_ml.wrappers.Incremental`` streaming ``partial_fit`` over the chunks of
  a ``dask.array`` fits the same model as ``partial_fit`` called on the same
  numpy chunks in a loop;
* blockwise prediction of a dask array (``ParallelPostFit`` and
  ``map_blocks``/``blockwise`` for the methods it does not wrap) agrees with
  the in-memory prediction of the whole array to rounding.
"""

import os
import time
import warnings

import numpy as np
import pytest
import torch
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.model_selection import GridSearchCV

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
dask_ml_wrappers = pytest.importorskip("dask_ml.wrappers")
joblib = pytest.importorskip("joblib")

from skbayes import (  # noqa: E402
    VAE,
    BayesianGaussianMixture,
    BayesianMLPClassifier,
    BayesianMLPRegressor,
    SparseGPRegressor,
)
from skbayes.inference import MeanFieldVI  # noqa: E402
from skbayes.metrics import get_scorer  # noqa: E402
from skbayes.inference import SparseVariational

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

# device="cpu" throughout: conftest's device="auto" -> CPU patch does not reach the worker processes.

# What the workers' torch reads at import (MKL_NUM_THREADS wins over OMP_NUM_THREADS when both are set).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def client():
    """A two-process LocalCluster with one torch thread per worker; closed, its processes gone, afterwards."""
    psutil = pytest.importorskip("psutil")
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None, env=ONE_THREAD
    )
    client = distributed.Client(cluster)
    pids = list(client.run(os.getpid).values())
    try:
        yield client
    finally:
        client.close()
        cluster.close()
        deadline = time.monotonic() + 10
        while any(psutil.pid_exists(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(psutil.pid_exists(pid) for pid in pids), "worker processes outlived the cluster"


@pytest.fixture
def one_torch_thread():
    """One torch thread in this process too, restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _torch_threads():
    return torch.get_num_threads()


def regression_data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] + 0.2 * rng.standard_normal(n)
    return X, y


def test_workers_run_tasks_with_one_torch_thread(client):
    # A task runs in the worker's executor thread: what torch uses there is what matters
    # (torch.set_num_threads through client.run would change the event loop's thread only).
    workers = list(client.scheduler_info()["workers"])
    assert len(workers) == 2
    threads = [client.submit(_torch_threads, workers=[w], pure=False).result() for w in workers]
    assert threads == [1, 1]


def test_grid_search_on_the_cluster_equals_the_sequential_run(client, one_torch_thread):
    X, y = regression_data()
    scoring = {"ll": get_scorer("log_predictive_density"), "interval": get_scorer("neg_interval_score")}

    def search():
        # Minibatches of 30 rows: the random_state seeds the shuffling and the inducing points of each fit.
        estimator = SparseGPRegressor(
            n_inducing=8, batch_size=30, random_state=0, device="cpu",
            inference=SparseVariational(max_iter=4),
        )
        grid = {"n_inducing": [4, 8], "inference__objective": ["vfe", "fitc"]}
        return GridSearchCV(estimator, grid, cv=2, scoring=scoring, refit="ll")

    with distributed.get_task_stream(client) as tasks, joblib.parallel_config(backend="dask"):
        on_cluster = search().fit(X, y)
    assert len(tasks.data) >= 8  # the 4 candidates x 2 folds ran on the workers
    sequential = search().fit(X, y)

    for key in ["ll", "interval"]:
        for split in ["split0", "split1", "mean"]:
            name = f"{split}_test_{key}"
            assert_array_equal(on_cluster.cv_results_[name], sequential.cv_results_[name], err_msg=name)
    assert np.unique(sequential.cv_results_["mean_test_ll"]).size == 4  # the candidates differ
    assert on_cluster.best_params_ == sequential.best_params_
    assert_array_equal(on_cluster.predict(X), sequential.predict(X))


STREAMING = {
    "SparseGPRegressor": (
        lambda: SparseGPRegressor(n_inducing=10, batch_size=50, random_state=0, device="cpu"),
        "predict",
        True,
    ),
    "BayesianGaussianMixture": (
        lambda: BayesianGaussianMixture(n_components=3, batch_size=50, random_state=0, device="cpu"),
        "predict_proba",
        False,
    ),
    "VAE": (
        lambda: VAE(n_components=2, hidden_layer_sizes=(16,), batch_size=50, random_state=0, device="cpu"),
        "transform",
        False,
    ),
}


@pytest.mark.parametrize("name", list(STREAMING))
def test_incremental_over_dask_chunks_equals_partial_fit_over_numpy_chunks(client, one_torch_thread, name):
    make, method, supervised = STREAMING[name]
    X, y = regression_data(n=300, seed=1)
    X_dask, y_dask = da.from_array(X, chunks=(100, 3)), da.from_array(y, chunks=100)

    # shuffle_blocks=False: the blocks in their order (with True, Incremental permutes them by its random_state).
    incremental = dask_ml_wrappers.Incremental(make(), shuffle_blocks=False)
    with distributed.get_task_stream(client) as tasks:
        incremental.fit(X_dask, y_dask) if supervised else incremental.fit(X_dask)
    assert sum(task["key"][0].startswith("fit-") for task in tasks.data) >= 3  # a partial_fit per chunk, on the workers

    reference = make()
    for start in range(0, 300, 100):
        rows = slice(start, start + 100)
        reference.partial_fit(X[rows], y[rows]) if supervised else reference.partial_fit(X[rows])

    fitted = incremental.estimator_
    assert fitted.n_iter_ == reference.n_iter_ > 0
    assert_array_equal(getattr(fitted, method)(X), getattr(reference, method)(X))
    # ...and a model of the first chunk alone differs: the later chunks did count.
    assert not np.array_equal(getattr(make().partial_fit(X[:100], y[:100]), method)(X), getattr(reference, method)(X))


def test_blockwise_prediction_equals_in_memory_prediction(client, one_torch_thread):
    X, y = regression_data(n=200)
    X_new, y_new = regression_data(n=6000, seed=2)
    X_dask, y_dask = da.from_array(X_new, chunks=(1500, 3)), da.from_array(y_new, chunks=1500)

    sparse_gp = SparseGPRegressor(
        n_inducing=10, random_state=0, device="cpu",
        inference=SparseVariational(max_iter=5),
    ).fit(X, y)
    # Monte-Carlo predictions: each call draws the same weights (seeded by the fitted estimator), shared by all rows.
    small = {"inference": MeanFieldVI(max_iter=5), "hidden_layer_sizes": (16,), "random_state": 0, "device": "cpu"}
    mlp = BayesianMLPRegressor(**small).fit(X, y)
    classifier = BayesianMLPClassifier(**small)
    classifier.fit(X, (y > 0).astype(int))

    for model in [sparse_gp, mlp]:
        wrapped = dask_ml_wrappers.ParallelPostFit(model)
        mean = wrapped.predict(X_dask)
        assert isinstance(mean, da.Array)
        std = X_dask.map_blocks(model.predict_std, drop_axis=1, dtype=float)
        both = X_dask.map_blocks(
            lambda block: np.stack(model.predict(block, return_std=True), axis=1),
            chunks=(X_dask.chunks[0], (2,)),
            dtype=float,
        )
        log_density = da.blockwise(
            model.log_predictive_density, "i", X_dask, "ij", y_dask, "i", concatenate=True, dtype=float
        )
        mean, std, both, log_density = client.compute([mean, std, both, log_density], sync=True)

        # Blocks of 1,500 rows and one of 6,000 take different BLAS kernels: equal to the last bits.
        in_memory_mean, in_memory_std = model.predict(X_new, return_std=True)
        assert_allclose(mean, in_memory_mean, rtol=1e-12, atol=1e-12)
        assert_allclose(std, in_memory_std, rtol=1e-12, atol=1e-12)
        assert_allclose(both, np.stack([in_memory_mean, in_memory_std], axis=1), rtol=1e-12, atol=1e-12)
        assert_allclose(log_density, model.log_predictive_density(X_new, y_new), rtol=1e-12, atol=1e-12)
        assert not np.array_equal(mean[:1500], mean[1500:3000])  # the blocks were not all the first one

    probabilities = dask_ml_wrappers.ParallelPostFit(classifier).predict_proba(X_dask).compute()
    assert probabilities.shape == (6000, 2)
    assert_allclose(probabilities, classifier.predict_proba(X_new), rtol=1e-12, atol=1e-15)


@pytest.mark.slow
def test_grid_search_on_ray_equals_the_sequential_run(one_torch_thread):
    """Ray's joblib backend as the alternative to Dask's (Ray is not in the ``dask`` extra)."""
    ray = pytest.importorskip("ray")
    from ray.util.joblib import register_ray

    X, y = regression_data()
    scoring = get_scorer("log_predictive_density")

    def search():
        estimator = SparseGPRegressor(
            n_inducing=8, batch_size=30, random_state=0, device="cpu",
            inference=SparseVariational(max_iter=4),
        )
        return GridSearchCV(estimator, {"n_inducing": [4, 8]}, cv=2, scoring=scoring)

    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": ONE_THREAD})
    try:
        register_ray()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with joblib.parallel_config(backend="ray", n_jobs=2):
                on_ray = search().fit(X, y)
    finally:
        ray.shutdown()
    sequential = search().fit(X, y)
    assert_array_equal(on_ray.cv_results_["mean_test_score"], sequential.cv_results_["mean_test_score"])
    assert_array_equal(on_ray.cv_results_["split1_test_score"], sequential.cv_results_["split1_test_score"])
