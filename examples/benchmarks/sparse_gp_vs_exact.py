"""``SparseGPRegressor`` with ``n_inducing >= n_train`` against scikit-learn's exact GP on small sets.

With as many inducing points as training rows (Z = X at the start) the sparse
GP can be exact GP regression, so its test log predictive density should
reach that of ``GaussianProcessRegressor`` with the same kernel: the ARD
``ConstantKernel * RBF(np.ones(d))`` of ``kernel="rbf"`` plus a
``WhiteKernel`` (the sparse GP's learned Gaussian noise), ``normalize_y=True``
(the sparse GP standardises y too), 2 optimiser restarts. Sets:

- ``diabetes``: scikit-learn's diabetes, a fixed 75/25 split, X standardised;
- ``linear``: 200 x 3, y = X w + 0.1 sin(3 x_1) + N(0, 0.1^2);
- ``gap``: 1-D, 100 rows of sin(2x) + N(0, 0.1^2) on [-3, -1] and [1, 3],
  tested on U(-3, 3) (the gap included);
- ``sines5d``: 277 x 5 (X ~ U(-1, 1)), y = sum_j sin(a_j x_j), a = 1..3,
  noise std 0.01: smooth, non-linear, nearly noise-free;
- ``noisy``: 200 x 2, y = sin(2 x_1) + x_2^2 / 2 + N(0, 0.5^2).

A set may be named ``name:n:seed`` for another size and seed of its
generator (e.g. ``noisy:100:2``); the default list has the five sets above and
five such variants. ``--medium`` adds the UCI energy set, split 0 (691
training rows, 8 features), with the sparse GP at its defaults entirely
(``n_inducing=256``, not n): a check that a medium set is no worse.

Recorded per set: the mean test log predictive density (nats per row) of
both, their difference, the fit times, ``n_iter_`` and the learned noise std.
``--optimizer`` picks the sparse GP's ``SparseVariational(optimizer=...)``
(default: the estimator's default, ``"auto"``: L-BFGS on the collapsed bound
for these full-batch sets).

    python examples/benchmarks/sparse_gp_vs_exact.py --threads 1 --medium --tag auto
    python examples/benchmarks/sparse_gp_vs_exact.py --threads 1 --medium --optimizer adam --tag adam

(results in ``examples/benchmarks/results/sparse_gp/sparse_gp_vs_exact_<tag>.json`` and ``.md``).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.datasets import load_diabetes
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import end_environment, environment, limit_threads, results_dir, save_json  # noqa: E402

from skbayes import SparseGPRegressor  # noqa: E402
from skbayes.inference import SparseVariational  # noqa: E402


def diabetes():
    X, y = load_diabetes(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def linear(n=200, n_test=200, seed=0):
    rng = np.random.RandomState(seed)
    w = np.array([1.0, -0.5, 0.25])
    X = rng.randn(n + n_test, 3)
    y = X @ w + 0.1 * np.sin(3 * X[:, 0]) + 0.1 * rng.randn(n + n_test)
    return X[:n], X[n:], y[:n], y[n:]


def gap(n=100, n_test=200, seed=0):
    rng = np.random.RandomState(seed)
    x = rng.uniform(1, 3, size=n) * rng.choice([-1.0, 1.0], size=n)
    x_test = rng.uniform(-3, 3, size=n_test)
    f = lambda t: np.sin(2 * t)  # noqa: E731
    return x[:, None], x_test[:, None], f(x) + 0.1 * rng.randn(n), f(x_test) + 0.1 * rng.randn(n_test)


def sines5d(n=277, n_test=200, noise=0.01, seed=0):
    rng = np.random.RandomState(seed)
    a = np.array([1.0, 1.5, 2.0, 2.5, 3.0])
    X = rng.uniform(-1, 1, size=(n + n_test, 5))
    y = np.sin(X * a).sum(1) + noise * rng.randn(n + n_test)
    return X[:n], X[n:], y[:n], y[n:]


def noisy(n=200, n_test=200, seed=0):
    rng = np.random.RandomState(seed)
    X = rng.uniform(-2, 2, size=(n + n_test, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.5 * rng.randn(n + n_test)
    return X[:n], X[n:], y[:n], y[n:]


def energy():
    """UCI energy (heating load), split 0 of the fixed splits, X standardised on the training rows."""
    from skbayes.datasets import fetch_uci, get_uci_split

    X_train, X_test, y_train, y_test = get_uci_split(fetch_uci("energy"), 0)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


SETS = {"diabetes": diabetes, "linear": linear, "gap": gap, "sines5d": sines5d, "noisy": noisy}
DEFAULT_SETS = [*SETS, "sines5d:150:1", "noisy:100:2", "noisy:100:1", "gap:60:0", "linear:100:1"]


def load_set(spec):
    """The split of a set named ``name`` or ``name:n:seed``."""
    name, *rest = spec.split(":")
    if not rest:
        return SETS[name]()
    n, seed = rest
    return SETS[name](n=int(n), seed=int(seed))


def exact_gp(X_train, y_train, restarts=2):
    """scikit-learn's exact GP with the sparse GP's default kernel (ARD RBF) plus a WhiteKernel."""
    kernel = C(1.0) * RBF(np.ones(X_train.shape[1])) + WhiteKernel(0.01)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings at the bounds
        return GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=restarts,
                                        random_state=0).fit(X_train, y_train)


def exact_lpd(model, X, y):
    mean, std = model.predict(X, return_std=True)
    return float(norm.logpdf(y, mean, std).mean())


def run_set(name, medium=False, **sparse_params):
    X_train, X_test, y_train, y_test = energy() if medium else load_set(name)
    start = time.perf_counter()
    exact = exact_gp(X_train, y_train)
    exact_time = time.perf_counter() - start
    start = time.perf_counter()
    if not medium:
        sparse_params = {"n_inducing": X_train.shape[0], **sparse_params}
    sparse = SparseGPRegressor(random_state=0, **sparse_params).fit(X_train, y_train)
    sparse_time = time.perf_counter() - start
    row = {
        "set": name, "n_inducing": sparse.n_inducing_, "n_train": X_train.shape[0], "n_test": X_test.shape[0], "n_features": X_train.shape[1],
        "exact_lpd": exact_lpd(exact, X_test, y_test),
        "sparse_lpd": float(sparse.log_predictive_density(X_test, y_test).mean()),
        "exact_fit_s": exact_time, "sparse_fit_s": sparse_time, "sparse_n_iter": sparse.n_iter_,
        "exact_noise_std": float(np.sqrt(exact.kernel_.k2.noise_level) * exact._y_train_std),
        "sparse_noise_std": sparse.noise_std_, "exact_kernel": str(exact.kernel_),
    }
    row["gap"] = row["sparse_lpd"] - row["exact_lpd"]
    return row


def markdown(rows):
    lines = ["| set | n | M | d | exact LPD | sparse LPD | sparse - exact | exact fit s | sparse fit s | n_iter_ "
             "| noise std exact / sparse |", "|" + "---|" * 11]
    for r in rows:
        lines.append(f"| {r['set']} | {r['n_train']} | {r['n_inducing']} | {r['n_features']} | {r['exact_lpd']:.3f} | "
                     f"{r['sparse_lpd']:.3f} | {r['gap']:+.3f} | {r['exact_fit_s']:.1f} | {r['sparse_fit_s']:.1f} | "
                     f"{r['sparse_n_iter']} | {r['exact_noise_std']:.3g} / {r['sparse_noise_std']:.3g} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=DEFAULT_SETS, help="names or name:n:seed")
    parser.add_argument("--medium", action="store_true", help="add UCI energy split 0 at the full defaults")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--optimizer", default=None, choices=["auto", "adam", "ngd"],
                        help="SparseVariational(optimizer=...) of the sparse GP (default: the estimator's default)")
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("sparse_gp")))
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    report = {"environment": environment(argv=argv), "rows": []}
    params = {} if args.optimizer is None else {"inference": SparseVariational(optimizer=args.optimizer)}
    runs = [(name, False) for name in args.sets] + ([("energy (defaults)", True)] if args.medium else [])
    for name, medium in runs:
        row = run_set(name, medium, **params)
        report["rows"].append(row)
        print(f"{name}: exact {row['exact_lpd']:.3f} sparse {row['sparse_lpd']:.3f} (gap {row['gap']:+.3f}), "
              f"fit {row['exact_fit_s']:.1f} s / {row['sparse_fit_s']:.1f} s, n_iter_ {row['sparse_n_iter']}",
              flush=True)
    end_environment(report["environment"])
    report["markdown"] = markdown(report["rows"])
    print(report["markdown"])
    if args.tag:
        path = Path(args.output_dir) / f"sparse_gp_vs_exact_{args.tag}"
        print("written", save_json(path.with_suffix(".json"), report))
        path.with_suffix(".md").write_text(f"# sparse_gp_vs_exact --tag {args.tag}\n\n{report['markdown']}\n")


if __name__ == "__main__":
    main()
