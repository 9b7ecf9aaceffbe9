"""The SVI settings of BayesianGaussianMixture measured on several kinds of data: step rule, batch size, weight prior.

What it does
------------
Fits ``BayesianGaussianMixture(n_components=K, learning_method="online",
**variant, random_state=seed).fit(X_train)`` (SVI as a user runs it: the
estimator's own epochs and stopping rule) for each variant of the step-size
rule, the batch size and the weight prior, and records the held-out log
predictive density (``score``, nats per row, in the units of the
standardised data) and the fit time. The variants:

* ``lda``: Robbins-Monro rho_t = (t + 10)^-0.7, B = 128, Dirichlet-process
  weights (the estimator's defaults before this measurement, scikit-learn's
  ``LatentDirichletAllocation`` schedule);
* ``thesis``: rho_t = (t + 1)^-0.9, B = 512, Dirichlet-distribution weights
  (Bruno 2021, Fig. 2.4 and Tables 2.2-2.3: the best Robbins-Monro schedule,
  "512 is a suitable value");
* ``adaptive``: the adaptive rate of Ranganath et al. (2013) with tau_0 = B,
  B = 512, Dirichlet-distribution weights (the thesis's best rule);
* ``thesis_dp``, ``adaptive_dp``: the same two with Dirichlet-process weights;
* ``lda_b512``: the first with B = 512.

The data (each split once, fixed; standardised with the training rows'
mean and scale):

* ``pixels``: 30,000 / 10,000 dequantised RGB pixels of scikit-learn's two
  sample images (``gmm_svi.py``'s data), 3 features;
* ``protein``, ``power``, ``kin8nm``: the inputs of those UCI sets (split 0
  of their fixed splits), 9, 4 and 8 features;
* ``mnist_pca``: the 5,000 labelled MNIST images projected on their first 20
  principal components (fitted on the 4,000 training images of the fixed
  stratified split).

How to run
----------
::

    python examples/benchmarks/gmm_svi_defaults.py --seeds 3 --threads 1

Results go to ``examples/benchmarks/results/mixture/gmm_svi_defaults.json`` and ``.md``.
"""

import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment_lines, load_mnist, loadavg, rows_script, run_saving  # noqa: E402

from skbayes.mixture import BayesianGaussianMixture  # noqa: E402

VARIANTS = {
    "lda": {"learning_rate": "robbins_monro", "learning_decay": 0.7, "learning_offset": 10.0, "batch_size": 128,
            "weight_concentration_prior_type": "dirichlet_process"},
    "thesis": {"learning_rate": "robbins_monro", "learning_decay": 0.9, "learning_offset": 1.0, "batch_size": 512,
               "weight_concentration_prior_type": "dirichlet_distribution"},
    "adaptive": {"learning_rate": "adaptive", "batch_size": 512,
                 "weight_concentration_prior_type": "dirichlet_distribution"},
    "thesis_dp": {"learning_rate": "robbins_monro", "learning_decay": 0.9, "learning_offset": 1.0, "batch_size": 512,
                  "weight_concentration_prior_type": "dirichlet_process"},
    "adaptive_dp": {"learning_rate": "adaptive", "batch_size": 512,
                    "weight_concentration_prior_type": "dirichlet_process"},
    "lda_b512": {"learning_rate": "robbins_monro", "learning_decay": 0.7, "learning_offset": 10.0, "batch_size": 512,
                 "weight_concentration_prior_type": "dirichlet_process"},
}


def _standardise(X_train, X_test):
    mean, scale = X_train.mean(0), X_train.std(0)
    scale[scale == 0] = 1.0
    return (X_train - mean) / scale, (X_test - mean) / scale


def datasets(data_home=None):
    """(name, X_train, X_test), standardised."""
    from gmm_svi import split

    X_test, X_train, _ = split(30_000, 10_000)
    yield ("pixels", *_standardise(X_train, X_test))
    from skbayes.datasets import fetch_uci

    for name, uci in (("protein", "protein-tertiary-structure"), ("power", "power-plant"), ("kin8nm", "kin8nm")):
        data = fetch_uci(uci, data_home=data_home)
        train, test = data.train_indices[0], data.test_indices[0]
        X = np.asarray(data.data, dtype=np.float64)
        yield (name, *_standardise(X[train], X[test]))
    from sklearn.decomposition import PCA

    X_train, X_test, *_ = load_mnist(data_home)
    pca = PCA(20, random_state=0).fit(X_train)
    yield ("mnist_pca", *_standardise(pca.transform(X_train).astype(np.float64), pca.transform(X_test).astype(np.float64)))


def markdown(report):
    rows = report["rows"]
    names = list(dict.fromkeys(r["set"] for r in rows))
    variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
    lines = [
        "# SVI settings of BayesianGaussianMixture on several kinds of data",
        "",
        "Command: `python examples/benchmarks/gmm_svi_defaults.py " + " ".join(report["argv"]) + "`. "
        f"`BayesianGaussianMixture(n_components={report['n_components']}, learning_method=\"online\", ...)` at its "
        "other defaults; held-out log predictive density (nats per row, standardised data), mean ± standard "
        "error over the seeds (`random_state`), and the mean fit time in seconds. Variants: `lda` rho_t = (t + "
        "10)^-0.7, B = 128, Dirichlet-process weights; `thesis` rho_t = (t + 1)^-0.9, B = 512, Dirichlet weights; "
        "`adaptive` Ranganath et al.'s rate with tau_0 = B, B = 512, Dirichlet weights; `_dp`: with "
        "Dirichlet-process weights; `lda_b512`: `lda` with B = 512. **Bold**: the best mean per set.",
        "",
        "| set | " + " | ".join(f"`{v}`" for v in variants) + " |",
        "|---|" + "---|" * len(variants),
    ]
    ranks = {v: [] for v in variants}
    for name in names:
        means = {}
        cells = []
        for v in variants:
            lpd = [r["heldout_lpd"] for r in rows if (r["set"], r["variant"]) == (name, v)]
            means[v] = np.mean(lpd) if lpd else -np.inf
        best = max(means, key=means.get)
        order = sorted(variants, key=lambda v: -means[v])
        for v in variants:
            lpd = [r["heldout_lpd"] for r in rows if (r["set"], r["variant"]) == (name, v)]
            secs = [r["fit_seconds"] for r in rows if (r["set"], r["variant"]) == (name, v)]
            if not lpd:
                cells.append("—")
                continue
            se = np.std(lpd, ddof=1) / np.sqrt(len(lpd)) if len(lpd) > 1 else float("nan")
            text = f"{np.mean(lpd):.4f} ± {se:.4f} ({np.mean(secs):.1f} s)"
            cells.append(f"**{text}**" if v == best else text)
            ranks[v].append(order.index(v) + 1)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", "Mean rank over the sets (1 = best):", "", "| " + " | ".join(f"`{v}`" for v in variants) + " |",
              "|" + "---|" * len(variants),
              "| " + " | ".join(f"{np.mean(ranks[v]):.2f}" if ranks[v] else "—" for v in variants) + " |",
              "", *environment_lines(report)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    def add_arguments(parser):
        parser.add_argument("--seeds", type=int, default=3)
        parser.add_argument("--n-components", type=int, default=20)
        parser.add_argument("--variants", nargs="+", default=list(VARIANTS))
        parser.add_argument("--data-home", default=None)

    args, report, save, finish = rows_script(argv, __doc__, markdown, "mixture", add_arguments)
    report["n_components"] = args.n_components

    def body():
        for name, X_train, X_test in datasets(args.data_home):
            for seed in range(args.seeds):
                for variant in args.variants:
                    model = BayesianGaussianMixture(n_components=args.n_components, learning_method="online",
                                                    random_state=seed, **VARIANTS[variant])
                    start = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model.fit(X_train)
                    seconds = time.perf_counter() - start
                    row = {"set": name, "seed": seed, "variant": variant, "heldout_lpd": float(model.score(X_test)),
                           "fit_seconds": seconds, "n_iter": int(model.n_iter_), "loadavg": loadavg()}
                    report["rows"].append(row)
                    print(f"{name} seed {seed} {variant}: {row['heldout_lpd']:.4f} ({seconds:.1f} s, "
                          f"{row['n_iter']} epochs)", flush=True)
                    save()

    run_saving(report, body, save, finish)


if __name__ == "__main__":
    main()
