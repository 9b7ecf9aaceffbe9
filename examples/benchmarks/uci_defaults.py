"""The default BayesianMLPRegressor against the tools a tabular user already has, on the UCI splits.

What it does
------------
For each UCI regression dataset in the data folder and each of its fixed
90/10 train/test splits (the protocol of Hernandez-Lobato & Adams 2015), it
fits the models named by ``--models``, each behind a ``StandardScaler`` fitted
on the training split:

``skbayes``
    ``BayesianMLPRegressor()`` with its defaults (or with ``--params``, for
    the measurements that chose the defaults), ``random_state=split``.
``ngboost``
    NGBoost's ``NGBRegressor()`` with its defaults (normal distribution, 500
    depth-3 trees, learning rate 0.01; Duan et al. 2020), ``random_state=split``.
``ngboost_paper``
    NGBoost under its paper's UCI protocol (``NGBoostPaperProtocol``, the
    baseline ``skbayes evaluate`` prints: up to 2,000 iterations at rate 0.01,
    the number chosen on a 20% validation split with early stopping after 50,
    then refitted on all the training rows), its Normal predictive;
    ``random_state=split``.
``mlp``
    scikit-learn's ``MLPRegressor(max_iter=MLP_MAX_ITER, random_state=split)``
    (otherwise its defaults: one hidden layer of 100 ReLU units, Adam;
    ``--mlp-max-iter``, default 2000, so that it converges where its
    default of 200 epochs stops short) fitted on a random 90% of the training
    rows; sigma is the root mean square of its residuals on the other 10%
    (held in, never the test rows), the predictive is N(prediction, sigma^2).
``exact_gp``
    scikit-learn's ``GaussianProcessRegressor`` with the kernel
    ``ConstantKernel * RBF(one length scale per feature) + WhiteKernel``,
    ``normalize_y=True``, hyperparameters by maximum marginal likelihood
    (L-BFGS from one start). On a dataset with more than ``--gp-max-rows``
    training rows (kin8nm and larger) it is fitted on a random subset of that
    many training rows, and ``skbayes_subset`` (the skbayes model of the run
    on the same rows) is fitted beside it, so that the comparison is like for
    like; the larger sets (power, protein) are skipped for it by default
    (``--gp-datasets``).

Every model is scored in the original units of y on the test rows: the mean
test log-likelihood (nats per point; for skbayes its own predictive density,
``log_predictive_density``, the Monte-Carlo mixture; for NGBoost its
``pred_dist(X).logpdf``), RMSE of the predictive mean, the coverage of the
central 90% and 95% intervals (skbayes: ``predict_interval``; NGBoost: its
distribution's quantiles; the MLP and GP: their Gaussians), and the fit time
(wall clock; one fit at a time in the process). Aggregates are mean ±
standard error over the splits (``np.std(ddof=0) / sqrt(n_splits)``).
The number of ConvergenceWarnings each fit raised is recorded.

Run one process per core with ``--threads 1`` for stable timings (torch and
BLAS otherwise take every core); the results files of several processes are
merged by ``uci_defaults_table.py``.

How to run
----------
::

    python examples/benchmarks/uci_defaults.py \\
        --models ngboost mlp exact_gp --threads 1 --tag baselines
    python examples/benchmarks/uci_defaults.py --models skbayes --threads 1 --tag default
    python examples/benchmarks/uci_defaults.py --models skbayes --datasets energy --splits 3 \\
        --params inference="SGHMC(burn_in=200)" noise="'heteroscedastic'" --tag explore

Options: ``--datasets`` (default: all present), ``--splits N`` (the first N), ``--first-split K`` (skip the splits
before K), ``--no-subset``,
``--models`` (``skbayes ngboost ngboost_paper mlp exact_gp``; default: all),
``--params NAME=VALUE`` (estimator parameters of the skbayes model, values
evaluated as Python expressions with ``skbayes.inference`` in scope),
``--gp-max-rows`` (default 2000), ``--mlp-max-iter`` (default 2000), ``--gp-datasets`` (default: every dataset
with at most 10000 rows), ``--threads``, ``--data-home``, ``--tag``,
``--output-dir``.

Time to quality: ``--models skbayes ngboost mlp --mlp-max-iter 400 --threads 1 --no-subset`` fits the
three side by side on every split (one fit at a time, so the fit times compare); when skbayes and
NGBoost both ran, the markdown adds the paired test-LL difference and the ratio of their fit times
per dataset. Run it alone on the machine (the load average of every fit is recorded)::

    OMP_NUM_THREADS=1 python examples/benchmarks/uci_defaults.py --models skbayes ngboost mlp \
        --mlp-max-iter 400 --threads 1 --no-subset --datasets boston concrete energy wine --splits 5 \
        --tag time_to_quality_small

What it prints
--------------
One line per fit and the paths of ``uci_defaults_<tag>.json`` (per-split
numbers, aggregates, settings, environment with the load average at start
and end, command line) and ``uci_defaults_<tag>.md`` (the table of this run,
and the time-to-quality table when skbayes and NGBoost both ran).
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import norm
from sklearn.exceptions import ConvergenceWarning
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    aggregate_splits,
    environment_lines,
    limit_threads,
    loadavg,
    mean_se,
    output_paths,
    print_written,
    run_saving,
    start_uci_report,
    uci_splits,
    write_atomic, results_dir,
)

import skbayes.inference  # noqa: E402
from skbayes import BayesianMLPRegressor  # noqa: E402
from skbayes.datasets import UCI_DATASETS  # noqa: E402

MODELS = ("skbayes", "ngboost", "ngboost_paper", "mlp", "exact_gp")
KEYS = ("test_ll", "rmse", "coverage_90", "coverage_95", "fit_time_s", "n_convergence_warnings")
GP_MAX_DATASET_ROWS = 10000


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help="UCI names or aliases (default: all present).")
    parser.add_argument("--splits", type=int, default=None, help="The first N fixed splits (default: all).")
    parser.add_argument("--first-split", type=int, default=0,
                        help="Skip the splits before this one (default: 0), to share a dataset between processes.")
    parser.add_argument("--no-subset", action="store_true",
                        help="Do not fit skbayes on the exact GP's subset of rows (skbayes_subset).")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--params", nargs="+", default=[], metavar="NAME=VALUE",
                        help="Parameters of the skbayes model (Python expressions, skbayes.inference in scope).")
    parser.add_argument("--gp-max-rows", type=int, default=2000,
                        help="The exact GP fits at most this many training rows (default: 2000).")
    parser.add_argument("--gp-datasets", nargs="+", default=None,
                        help=f"Datasets the exact GP runs on (default: those with at most {GP_MAX_DATASET_ROWS} rows).")
    parser.add_argument("--mlp-max-iter", type=int, default=2000, help="max_iter of the MLPRegressor (default: 2000).")
    parser.add_argument("--threads", type=int, default=None, help="torch and BLAS threads (default: all).")
    parser.add_argument("--data-home", default=None)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--output-dir", default=str(results_dir("defaults")))
    args = parser.parse_args(argv)
    namespace = vars(skbayes.inference)
    params = {}
    for item in args.params:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--params takes NAME=VALUE pairs; got {item!r}")
        params[name] = eval(value, dict(namespace))  # noqa: S307 - a command-line expression of the user
    args.skbayes_params = params
    return args


def _scores(y_test, mean, log_density, interval, fit_time, caught):
    """The per-split numbers of one model: ``interval(coverage) -> (lower, upper)``."""
    out = {"test_ll": float(np.mean(log_density)), "rmse": float(np.sqrt(np.mean((mean - y_test) ** 2)))}
    for level in (90, 95):
        lower, upper = interval(level / 100)
        out[f"coverage_{level}"] = float(np.mean((y_test >= lower) & (y_test <= upper)))
    out["fit_time_s"] = fit_time
    out["n_convergence_warnings"] = sum(issubclass(w.category, ConvergenceWarning) for w in caught)
    return out


def _timed_fit(model, X, y):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        return time.perf_counter() - start, caught


def fit_skbayes(params, X_train, y_train, X_test, y_test, seed):
    model = make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=seed, **params))
    fit_time, caught = _timed_fit(model, X_train, y_train)
    Xt, bnn = model[:-1].transform(X_test), model[-1]
    mean = bnn.predict(Xt)
    out = _scores(y_test, mean, bnn.log_predictive_density(Xt, y_test),
                  lambda c: bnn.predict_interval(Xt, coverage=c), fit_time, caught)
    out["n_iter"] = int(bnn.n_iter_)
    return out


def fit_ngboost(X_train, y_train, X_test, y_test, seed):
    from ngboost import NGBRegressor

    model = make_pipeline(StandardScaler(), NGBRegressor(random_state=seed, verbose=False))
    fit_time, caught = _timed_fit(model, X_train, y_train)
    dist = model[-1].pred_dist(model[:-1].transform(X_test))
    return _scores(y_test, dist.loc, dist.logpdf(y_test),
                   lambda c: (dist.ppf(0.5 - c / 2), dist.ppf(0.5 + c / 2)), fit_time, caught)


def fit_ngboost_paper(X_train, y_train, X_test, y_test, seed):
    from skbayes._cli.baselines import NGBoostPaperProtocol

    model = make_pipeline(StandardScaler(), NGBoostPaperProtocol(random_state=seed))
    fit_time, caught = _timed_fit(model, X_train, y_train)
    mean, std = model.predict(X_test, return_std=True)
    out = _gaussian_scores(y_test, mean, std, fit_time, caught)
    out["n_estimators"] = int(model[-1].n_estimators_)
    return out


def _gaussian_scores(y_test, mean, std, fit_time, caught):
    def interval(c):
        z = norm.ppf(0.5 + c / 2)
        return mean - z * std, mean + z * std

    return _scores(y_test, mean, norm.logpdf(y_test, mean, std), interval, fit_time, caught)


def fit_mlp(X_train, y_train, X_test, y_test, seed, max_iter=2000):
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPRegressor

    X_fit, X_held, y_fit, y_held = train_test_split(X_train, y_train, test_size=0.1, random_state=seed)
    model = make_pipeline(StandardScaler(), MLPRegressor(max_iter=max_iter, random_state=seed))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X_fit, y_fit)
        sigma = float(np.sqrt(np.mean((model.predict(X_held) - y_held) ** 2)))
        fit_time = time.perf_counter() - start
    mean = model.predict(X_test)
    return _gaussian_scores(y_test, mean, np.full_like(mean, sigma), fit_time, caught)


def gp_rows(n_train, max_rows, seed):
    """Indices of the training rows the exact GP fits: all, or a seeded random subset of ``max_rows``."""
    if n_train <= max_rows:
        return np.arange(n_train)
    return np.sort(np.random.RandomState(seed).choice(n_train, max_rows, replace=False))


def fit_exact_gp(X_train, y_train, X_test, y_test, seed):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    kernel = ConstantKernel(1.0) * RBF(np.ones(X_train.shape[1])) + WhiteKernel(0.1)
    model = make_pipeline(StandardScaler(), GaussianProcessRegressor(kernel, normalize_y=True, random_state=seed))
    fit_time, caught = _timed_fit(model, X_train, y_train)
    mean, std = model.predict(X_test, return_std=True)
    out = _gaussian_scores(y_test, mean, std, fit_time, caught)
    out["kernel"] = str(model[-1].kernel_)
    return out


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    json_path, md_path = output_paths(args, "uci_defaults")
    report, save = start_uci_report(args, json_path, cpu_count=True,
                                    skbayes_params={k: repr(v) for k, v in args.skbayes_params.items()},
                                    skbayes_estimator=repr(BayesianMLPRegressor(**args.skbayes_params)))
    gp_datasets = args.gp_datasets
    names = args.datasets or list(UCI_DATASETS)
    def run():
        for name, split, X_train, X_test, y_train, y_test in uci_splits(names, args.splits or 10**6,
                                                                       args.data_home, report["skipped"]):
            n_rows = len(X_train) + len(X_test)
            use_gp = name in gp_datasets if gp_datasets else n_rows <= GP_MAX_DATASET_ROWS
            if split < args.first_split:
                continue
            rows = report["splits"].setdefault(name, {})
            subset = gp_rows(len(X_train), args.gp_max_rows, split)
            for model in args.models:
                runs = [(model, slice(None))]
                if model == "exact_gp":
                    runs = [("exact_gp", subset)] if use_gp else []
                elif model == "skbayes" and use_gp and len(subset) < len(X_train) and not args.no_subset:
                    runs.append(("skbayes_subset", subset))  # like for like with the exact GP
                for label, idx in runs:
                    Xf, yf = X_train[idx], y_train[idx]
                    if label.startswith("skbayes"):
                        res = fit_skbayes(args.skbayes_params, Xf, yf, X_test, y_test, split)
                    else:
                        fit = {"ngboost": fit_ngboost, "ngboost_paper": fit_ngboost_paper, "exact_gp": fit_exact_gp,
                               "mlp": lambda *a: fit_mlp(*a, max_iter=args.mlp_max_iter)}[label]
                        res = fit(Xf, yf, X_test, y_test, split)
                    res["n_train"] = len(yf)
                    rows.setdefault(label, []).append({"split": split, "loadavg": loadavg(), **res})
                    report["aggregates"].setdefault(name, {})[label] = _aggregate(rows[label])
                    print(f"  {name:<27} {label:<15} split {split:>2}: LL {res['test_ll']:8.4f}  "
                          f"RMSE {res['rmse']:8.4f}  cov95 {res['coverage_95']:.3f}  {res['fit_time_s']:7.2f} s"
                          f"{'  (' + str(res['n_convergence_warnings']) + ' ConvergenceWarning)' if res['n_convergence_warnings'] else ''}",
                          flush=True)
                    save()

    run_saving(report, run, save, lambda: write_atomic(md_path, markdown_table(report)))
    print_written(json_path, md_path)
    return 0


def _aggregate(rows):
    return aggregate_splits(rows, KEYS)


def markdown_table(report):
    lines = ["| dataset | model | splits | test LL | RMSE | 90% coverage | 95% coverage | fit time (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, per_model in report["aggregates"].items():
        for model, agg in per_model.items():
            lines.append(f"| {name} | {model} | {agg['n_splits']} | {mean_se(agg, 'test_ll')} | "
                         f"{mean_se(agg, 'rmse')} | {mean_se(agg, 'coverage_90')} | {mean_se(agg, 'coverage_95')} | "
                         f"{mean_se(agg, 'fit_time_s', 1)} |")
    lines += paired_lines(report)
    params = report["settings"].get("skbayes_params") or {}
    lines += ["", "skbayes: `" + report["settings"]["skbayes_estimator"] + "`"
              + (f" (parameters given: {params})" if params else " (the defaults)") + "."]
    return "\n".join(lines + environment_lines(report)) + "\n"


def paired_lines(report):
    """Time to quality: skbayes against NGBoost on the splits both ran (no lines unless both ran).

    Per dataset: the paired test-LL difference skbayes - NGBoost (mean ± standard error), whether
    it is at least 0 within one standard error, the ratio of the mean fit times skbayes / NGBoost
    (and MLPRegressor / NGBoost when the MLP ran) and whether skbayes was no slower.
    """
    lines = []
    for name, per_model in report["splits"].items():
        if "skbayes" not in per_model or "ngboost" not in per_model:
            continue
        ours = {r["split"]: r for r in per_model["skbayes"]}
        ngb = {r["split"]: r for r in per_model["ngboost"]}
        mlp = {r["split"]: r for r in per_model.get("mlp", [])}
        common = sorted(set(ours) & set(ngb))
        if not common:
            continue
        diff = np.array([ours[k]["test_ll"] - ngb[k]["test_ll"] for k in common])
        mean, se = diff.mean(), diff.std() / np.sqrt(len(diff))
        t_ours = np.mean([ours[k]["fit_time_s"] for k in common])
        t_ngb = np.mean([ngb[k]["fit_time_s"] for k in common])
        t_mlp = [mlp[k]["fit_time_s"] for k in common if k in mlp]
        mlp_ratio = f"{np.mean(t_mlp) / t_ngb:.2f}" if t_mlp else "—"
        lines.append(f"| {name} | {len(common)} | {mean:+.3f} ± {se:.3f} | {'yes' if mean + se >= 0 else '**no**'} "
                     f"| {t_ours:.2f} / {t_ngb:.2f} | {t_ours / t_ngb:.2f} | {'yes' if t_ours <= t_ngb else '**no**'} "
                     f"| {mlp_ratio} |")
    if not lines:
        return []
    return ["", "Time to quality, paired over the splits both ran (test LL in nats per point; fit times in s, "
            "means over the splits):", "",
            "| dataset | splits | skbayes - NGBoost test LL | at least NGBoost (within 1 SE) "
            "| fit time skbayes / NGBoost | ratio | skbayes no slower | MLP / NGBoost time |",
            "|---|---|---|---|---|---|---|---|", *lines]


if __name__ == "__main__":
    sys.exit(main())
