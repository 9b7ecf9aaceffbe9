"""The cubic toy regression of Killingberg (seed 004, section 5.1.3): every BNN method against long-run SGHMC.

What it does
------------
The data of Louizos & Welling (2017), Pawlowski et al. (2017) and the seed's
Figure 5.6: 20 points, x ~ U(-4, 4), y = x^3 + eps, eps ~ N(0, 3^2), drawn once
with ``numpy.random.RandomState(0)`` (:func:`cubic_toy_data`). Every inference
method of the registry (``bnn_methods`` in ``_common.py``: MeanFieldVI,
MCDropout, Vadam, SGHMC, DeepEnsemble, PBP and, once they exist, the methods
of issue 12) fits ``BayesianMLPRegressor`` with one hidden layer of 100 ReLU
units (the seed's App. A), the N(0, 1) prior of the seed, the noise fixed at
its true value ``noise_std=3.0`` (so the bands differ only by the epistemic
part) and ``--epochs`` epochs of full-batch training (20 rows < the batch
size, so one step per epoch; SGHMC's schedule fills the same number of
epochs, PBP runs its 40 passes). ``random_state=0`` everywhere.

The reference is the same network sampled by a long SGHMC run:
``SGHMC(n_chains=4, burn_in=50000, thinning=100, n_kept_samples=500)`` (2,000
kept networks, 100,000 epochs per chain), and the same run with
``random_state=1`` gives a noise floor: how far two reference runs are from
each other.

On a grid of 241 points over [-6, 6] each method's predictive mean and
standard deviation (epistemic from the weight draws, plus the fixed noise)
are compared with the reference's: the RMSE of the mean to the reference mean
and the ratio of the mean predictive std, and of the mean epistemic std, to
the reference's, inside [-4, 4] (where the data are) and outside it. A ratio
below 1 outside [-4, 4] is an over-confident method.

How to run
----------
::

    python examples/benchmarks/cubic_toy.py --threads 1             # full: about 5 min on one core
    python examples/benchmarks/cubic_toy.py --quick --threads 1     # smoke run: about 30 s
    python examples/benchmarks/cubic_toy.py --methods MeanFieldVI SGHMC --epochs 5000

Outputs
-------
``examples/benchmarks/results/bnn_methods/cubic_toy_<tag>.{json,md}`` (tag ``full``, or
``quick`` with ``--quick``, or ``--tag``): per method the settings, fit time,
the metrics above and the grid predictions; and the figure (one panel per
method: mean and 1, 2, 3 std bands, the reference's bands as dashed lines,
the data and x^3): ``doc/images/cubic_toy.png`` (``cubic_toy_quick.png``
beside the results with ``--quick``, or ``--figure``).
"""

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skbayes import BayesianMLPRegressor
from skbayes.inference import SGHMC

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    bnn_methods, environment, limit_threads, output_paths, print_written, registry_parser, run_saving,
    select_methods, write_atomic, results_dir,
)

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = (100,)
NOISE_STD = 3.0
GRID = np.linspace(-6.0, 6.0, 241)
INSIDE = np.abs(GRID) <= 4.0


def cubic_toy_data(n_samples=20, seed=0):
    """The cubic toy: ``x ~ U(-4, 4)``, ``y = x**3 + N(0, 3**2)``; returns X (n, 1) and y (n,)."""
    rng = np.random.RandomState(seed)
    x = rng.uniform(-4.0, 4.0, n_samples)
    return x[:, None], x**3 + NOISE_STD * rng.randn(n_samples)


def reference_method(quick=False):
    """The long-run SGHMC reference (short with ``quick``)."""
    if quick:
        return SGHMC(n_chains=4, burn_in=2000, thinning=20, n_kept_samples=50)
    return SGHMC(n_chains=4, burn_in=50000, thinning=100, n_kept_samples=500)


def fit_on_grid(inference, kwargs, X, y, random_state=0, hidden=HIDDEN):
    """Fit ``BayesianMLPRegressor`` and predict on :data:`GRID`.

    Returns a dict with the fit time in seconds, the epochs run and the grid's
    ``mean``, ``std`` and ``epistemic_std`` (arrays of shape (241,)).
    """
    model = BayesianMLPRegressor(hidden, inference=inference, noise="homoscedastic", noise_std=NOISE_STD,
                                 random_state=random_state, **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        start = time.perf_counter()
        model.fit(X, y)
        fit_time = time.perf_counter() - start
    out = model.predict_uncertainty(GRID[:, None])
    rhat = model.inference_diagnostics_.get("rhat")
    return {"fit_time_s": fit_time, "epochs": int(model.n_iter_),
            "rhat": None if rhat is None or not np.isfinite(rhat) else float(rhat),
            "mean": out.mean, "std": out.std, "epistemic_std": out.epistemic_std}


def _rounded(values):
    """Grid predictions for the JSON file, to 4 decimals (units of y, which reach 216)."""
    return np.round(values.astype(float), 4).tolist()


def compare(pred, ref):
    """RMSE of the mean to the reference mean and std ratios, inside and outside [-4, 4]."""
    row = {}
    for region, mask in (("inside", INSIDE), ("outside", ~INSIDE)):
        row[f"rmse_mean_{region}"] = float(np.sqrt(np.mean((pred["mean"][mask] - ref["mean"][mask]) ** 2)))
        row[f"std_ratio_{region}"] = float(pred["std"][mask].mean() / ref["std"][mask].mean())
        row[f"epistemic_std_ratio_{region}"] = float(
            pred["epistemic_std"][mask].mean() / ref["epistemic_std"][mask].mean())
    return row


def plot(results, X, y, ref, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    n_cols = min(3, len(names))
    n_rows = -(-len(names) // n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(4.2 * n_cols, 3.4 * n_rows), sharex=True, sharey=True,
                             squeeze=False)
    for ax, name in zip(axes.flat, names):
        pred = results[name]
        for k in (3, 2, 1):
            ax.fill_between(GRID, pred["mean"] - k * pred["std"], pred["mean"] + k * pred["std"],
                            color="tab:orange", alpha=0.18, lw=0)
            for sign in (-1, 1):
                ax.plot(GRID, ref["mean"] + sign * k * ref["std"], color="k", lw=0.6, ls="--")
        ax.plot(GRID, ref["mean"], color="k", lw=0.8, ls="--", label="SGHMC reference (mean, 1-3 std)")
        ax.plot(GRID, pred["mean"], color="tab:orange", lw=1.5, label="method mean, 1-3 std")
        ax.plot(GRID, GRID**3, color="tab:blue", lw=1, label="$x^3$")
        ax.scatter(X[:, 0], y, s=10, color="tab:blue", zorder=3)
        ax.axvspan(-6, -4, color="0.9", zorder=0)
        ax.axvspan(4, 6, color="0.9", zorder=0)
        ax.set_title(name, fontsize=10)
        ax.set_ylim(-250, 250)
        ax.set_xlim(-6, 6)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(report):
    s = report["settings"]
    lines = [
        f"Cubic toy ({s['n_samples']} points, x ~ U(-4, 4), y = x^3 + N(0, 3^2), seed {s['data_seed']}), "
        f"{s['hidden_layer_sizes']} ReLU units, noise fixed at 3, {s['epochs']} epochs "
        f"(SGHMC: the same number of epochs; PBP: {min(s['epochs'], 40)} passes). Reference: "
        f"{s['reference']}, fit in {report['reference']['fit_time_s']:.0f} s. "
        "RMSE of the predictive mean to the reference mean; ratio of the mean predictive (and epistemic) "
        "std to the reference's, on 241 grid points over [-6, 6], inside |x| <= 4 and outside.",
        "",
        "| method | fit s | RMSE to ref. mean, in | RMSE, out | std ratio, in | std ratio, out "
        "| epistemic std ratio, in | epistemic, out |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, r in report["methods"].items():
        lines.append(
            f"| {name} | {r['fit_time_s']:.1f} | {r['rmse_mean_inside']:.2f} | {r['rmse_mean_outside']:.2f} "
            f"| {r['std_ratio_inside']:.2f} | {r['std_ratio_outside']:.2f} "
            f"| {r['epistemic_std_ratio_inside']:.2f} | {r['epistemic_std_ratio_outside']:.2f} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    parser = registry_parser(__doc__, "Smoke run: 300 epochs, a 5,000-epoch reference, small ensembles.",
                         results_dir("bnn_methods"))
    parser.add_argument("--epochs", type=int, default=None, help="Epochs per method (default: 3000, quick: 300).")
    parser.add_argument("--figure", default=None,
                        help="Figure path (default: doc/images/cubic_toy.png; with --quick, "
                             "cubic_toy_quick.png in the output folder).")
    args = parser.parse_args(argv)
    args.epochs = args.epochs or (300 if args.quick else 3000)
    args.tag = args.tag or ("quick" if args.quick else "full")
    if args.figure is None:
        args.figure = (Path(args.output_dir) / "cubic_toy_quick.png") if args.quick else ROOT / "doc/images/cubic_toy.png"
    return args


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    methods = select_methods(bnn_methods(args.epochs, quick=args.quick), args.methods)
    X, y = cubic_toy_data()
    ref_method = reference_method(args.quick)
    json_path, md_path = output_paths(args, "cubic_toy")
    report = {
        "settings": {"n_samples": len(y), "data_seed": 0, "hidden_layer_sizes": list(HIDDEN), "noise_std": NOISE_STD,
                     "epochs": args.epochs, "quick": args.quick, "grid": [-6.0, 6.0, len(GRID)],
                     "reference": repr(ref_method)},
        "environment": environment(), "complete": False, "methods": {},
    }
    preds = {}

    def save():
        write_atomic(json_path, json.dumps(report, indent=1))

    def body():
        print(f"reference {ref_method!r} ...", flush=True)
        ref = fit_on_grid(ref_method, {}, X, y, random_state=0)
        floor = fit_on_grid(ref_method, {}, X, y, random_state=1)
        report["reference"] = {k: (_rounded(v) if isinstance(v, np.ndarray) else v) for k, v in ref.items()}
        report["reference_noise_floor"] = {"random_state": 1, "fit_time_s": floor["fit_time_s"], **compare(floor, ref)}
        print(f"  {ref['fit_time_s']:.1f} s, R-hat {ref['rhat']}; second seed vs first: "
              f"{report['reference_noise_floor']}", flush=True)
        preds["SGHMC reference, random_state=1"] = floor
        for name, (method, kwargs) in methods.items():
            pred = fit_on_grid(method, kwargs, X, y)
            preds[name] = pred
            row = {"inference": repr(method), "estimator_kwargs": kwargs, "fit_time_s": pred["fit_time_s"],
                   "epochs_run": pred["epochs"], "rhat": pred["rhat"], **compare(pred, ref),
                   "grid_mean": _rounded(pred["mean"]), "grid_std": _rounded(pred["std"]),
                   "grid_epistemic_std": _rounded(pred["epistemic_std"])}
            report["methods"][name] = row
            print(f"  {name:<22} {pred['fit_time_s']:6.1f} s  std ratio in {row['std_ratio_inside']:.2f} "
                  f"out {row['std_ratio_outside']:.2f}", flush=True)
            save()
        plot(preds, X, y, ref, Path(args.figure))
        report["figure"] = str(args.figure)

    def finish():
        if report["methods"] and "reference" in report:
            floor = report["reference_noise_floor"]
            rows = {"SGHMC reference, random_state=1": floor, **report["methods"]}
            write_atomic(md_path, markdown({**report, "methods": rows}))

    run_saving(report, body, save, finish)
    print_written(json_path, md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
