"""Time and accuracy of the default Bayesian MLPs and VAE as the number of rows grows.

What it does
------------
For each ``--rows`` N and each of ``--models`` it draws N training rows and
10,000 test rows (seed 0), fits the estimator with every parameter at its
default except ``random_state=0``, and records the wall-clock fit time, the
epochs and optimiser steps run, and test metrics next to those of the true
data-generating process:

``regressor``
    ``BayesianMLPRegressor()`` on X ~ N(0, I) of shape (N, 8) and
    y = sum_j sin(x_j) + 0.1 noise (the data of
    ``sparse_gp_defaults_scaling.py``): test RMSE and mean test
    log-likelihood against the true function with the true noise (about 0.1
    and 0.884 nats).
``classifier``
    ``BayesianMLPClassifier()`` on the same X and y = 1[f(X) + 0.3 noise > 0]:
    test accuracy and log loss against the Bayes classifier
    p(y = 1 | x) = Phi(f(x) / 0.3).
``vae``
    ``VAE()`` on X = tanh(Z W) + 0.1 noise of shape (N, 20), Z ~ N(0, I_2),
    W ~ N(0, 1) of shape (2, 20): the mean test ELBO (``score``, nats per
    row), against the log density of the noise at the true Z
    (20 x 0.884 = 17.68 nats per row on average), a reference, not a bound.

The load average is recorded before and after every fit, with the number of
torch threads (``--threads``, default 1). Run it alone on the machine.

How to run
----------
::

    OMP_NUM_THREADS=1 python examples/benchmarks/defaults_scaling.py --rows 100000 1000000 \\
        --models regressor classifier --out defaults_scaling_mlp

``--out NAME`` writes ``examples/benchmarks/results/defaults/NAME.json`` and ``.md``
(default: print only).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import log_loss

from skbayes import VAE, BayesianMLPClassifier, BayesianMLPRegressor

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, environment_sentence, limit_threads, loadavg, named_results, run_saving  # noqa: E402
from sparse_gp_defaults_scaling import NOISE, CountSteps, synthetic  # noqa: E402

CLASS_NOISE = 0.3
VAE_FEATURES, VAE_LATENT = 20, 2
MODELS = ("regressor", "classifier", "vae")


def vae_data(n, rng, W):
    """X = tanh(Z W) + 0.1 noise, Z ~ N(0, I_2): the rows (n, 20)."""
    Z = rng.standard_normal((n, VAE_LATENT))
    return np.tanh(Z @ W) + NOISE * rng.standard_normal((n, VAE_FEATURES))


def _timed(model, *data):
    counter = CountSteps()
    model.set_params(callbacks=[counter])
    load_before = loadavg()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(*data)
    return {
        "fit_time_s": round(time.perf_counter() - start, 2), "epochs": int(model.n_iter_), "steps": counter.steps,
        "n_convergence_warnings": sum(issubclass(w.category, ConvergenceWarning) for w in caught),
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


def fit_one(model_name, n, test_rows):
    rng = np.random.default_rng(0)
    if model_name == "vae":
        W = rng.standard_normal((VAE_LATENT, VAE_FEATURES))
        X, X_test = vae_data(n, rng, W), vae_data(test_rows, rng, W)
        model = VAE(random_state=0)
        out = _timed(model, X)
        metrics = {"test_elbo": model.score(X_test),
                   "reference_elbo": float(VAE_FEATURES * (norm.logpdf(0, 0, NOISE) - 0.5))}
        return {"model": "VAE()", "rows": n, "n_features": VAE_FEATURES, **out, **metrics}
    X, f, y = synthetic(n, rng)
    X_test, f_test, y_test = synthetic(test_rows, rng)
    if model_name == "regressor":
        model = BayesianMLPRegressor(random_state=0)
        out = _timed(model, X, y)
        mean = model.predict(X_test)
        metrics = {
            "test_rmse": float(np.sqrt(np.mean((mean - y_test) ** 2))),
            "test_ll": float(model.log_predictive_density(X_test, y_test).mean()),
            "oracle_rmse": float(np.sqrt(np.mean((f_test - y_test) ** 2))),
            "oracle_ll": float(norm.logpdf(y_test, f_test, NOISE).mean()),
        }
        return {"model": "BayesianMLPRegressor()", "rows": n, "n_features": X.shape[1], **out, **metrics}
    labels = (f + CLASS_NOISE * rng.standard_normal(n) > 0).astype(int)
    labels_test = (f_test + CLASS_NOISE * rng.standard_normal(test_rows) > 0).astype(int)
    model = BayesianMLPClassifier(random_state=0)
    out = _timed(model, X, labels)
    proba = model.predict_proba(X_test)
    bayes = norm.cdf(f_test / CLASS_NOISE)
    metrics = {
        "test_accuracy": float(np.mean(proba.argmax(1) == labels_test)),
        "test_log_loss": float(log_loss(labels_test, proba[:, 1])),
        "oracle_accuracy": float(np.mean((bayes > 0.5) == labels_test)),
        "oracle_log_loss": float(log_loss(labels_test, bayes)),
    }
    return {"model": "BayesianMLPClassifier()", "rows": n, "n_features": X.shape[1], **out, **metrics}


def _quality(r):
    if "test_ll" in r:
        return (f"RMSE {r['test_rmse']:.4f} ({r['oracle_rmse']:.4f}), "
                f"LL {r['test_ll']:.3f} ({r['oracle_ll']:.3f})")
    if "test_accuracy" in r:
        return (f"accuracy {r['test_accuracy']:.4f} ({r['oracle_accuracy']:.4f}), "
                f"log loss {r['test_log_loss']:.4f} ({r['oracle_log_loss']:.4f})")
    return f"ELBO {r['test_elbo']:.2f} (noise density at the true Z {r['reference_elbo']:.2f})"


def markdown(report):
    lines = [
        "| model | rows x features | fit time (s) | epochs | steps | test metrics (true process) "
        "| load average before / after |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["fits"]:
        lines.append(
            f"| `{r['model']}` | {r['rows']:,} x {r['n_features']} | {r['fit_time_s']:.1f} | {r['epochs']} "
            f"| {r['steps']} | {_quality(r)} | {r['loadavg_before'][0]} / {r['loadavg_after'][0]} |"
        )
    lines += [
        "",
        "Every estimator at its defaults with random_state=0; 10,000 fresh test rows. Regressor: "
        "y = sum_j sin(x_j) + 0.1 noise, X ~ N(0, I_8); classifier: y = 1[f(x) + 0.3 noise > 0], Bayes "
        "classifier Phi(f / 0.3); VAE: X = tanh(Z W) + 0.1 noise, 20 features, 2 latent dimensions. Fit time "
        "is wall clock.",
        environment_sentence(report),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000], help="Training rows N (default: 100000).")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--test-rows", type=int, default=10_000, help="Test rows (default: 10000).")
    parser.add_argument("--threads", type=int, default=1, help="Torch and BLAS threads (default: 1).")
    parser.add_argument("--out", default=None, help="Write results/defaults/NAME.json and NAME.md.")
    args = parser.parse_args(argv)
    limit_threads(args.threads)
    report = {"settings": vars(args), "environment": environment(), "fits": [], "complete": False}

    def body():
        for n in args.rows:
            for model_name in args.models:
                print(f"fitting {model_name} on {n} rows ...", flush=True)
                report["fits"].append(fit_one(model_name, n, args.test_rows))
                print(json.dumps(report["fits"][-1]), flush=True)
                save()

    save, finish = named_results(report, markdown, args.out, "defaults")
    run_saving(report, body, save, finish)
    return 0


if __name__ == "__main__":
    sys.exit(main())
