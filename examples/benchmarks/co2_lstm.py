"""One-step-ahead forecasts of the Mauna Loa CO2 series by variational LSTMs, with predictive intervals.

What it does
------------
Data: the weekly Mauna Loa CO2 record of March 1958 to December 2001 bundled
with statsmodels (``statsmodels.api.datasets.co2``, no download; install it
with ``pip install 'skbayes[timeseries]'``). Weekly values are averaged into
526 monthly means (missing weeks skipped); the five months without any value
(June and October 1958, February to April 1964) are filled by linear
interpolation between their neighbours. The model works on the month-to-month
differences d_t = c_t - c_{t-1} (ppm), which remove the trend and leave a
stationary series with a strong annual cycle.

Protocol: the input of month t is the window of the T = 24 previous
differences (d_{t-24}, ..., d_{t-1}), fed to the network as a sequence of 24
steps of one value (``input_shape=(24, 1)``), standardised by the mean and
standard deviation of the training differences; the target is d_t (ppm; the
estimator standardises it on the training rows). Training targets: the months
before January 1990; test targets: the 144 months of 1990-2001, forecast one
step ahead from the observed history (the first windows reach back into the
training period, which is known at forecast time). The level forecast is
c_{t-1} + the predicted difference, with the difference's predictive standard
deviation: errors and intervals are the same for levels and differences.

Methods, all ``BayesianMLPRegressor(module=...)`` with one LSTM layer of
``--hidden`` units whose last output goes to a linear head, learned
homoscedastic noise, the same number of epochs (no early stopping), fitted
with ``random_state`` = 0, 1, ..., ``--seeds`` - 1:

* ``tied``: ``skbayes.nn.VariationalLSTM(gates="tied", masks="sequence")``,
  one dropout mask per sequence on the recurrent state h_{t-1}, shared by
  all four gates (Gal 2016, eq. 3.23), under ``MCDropout(placement="dense")``,
  which also drops the LSTM's output before the head.
* ``untied``: the same with one mask per gate (eq. 3.22).
* ``step masks``: tied gates with fresh masks at every time step: naive
  dropout in a recurrent network, not a draw of the weights.
* ``ensemble``: ``DeepEnsemble(n_estimators=5)`` of plain ``nn.LSTM``
  networks (each member its own initialisation and noise level).
* two baselines without a network: ``seasonal naive`` (d_t = d_{t-12}) and
  ``linear AR`` (least squares on the same T lags); both take the root mean
  square of their training residuals as the predictive std.

The input x_t is not dropped by default (``--input-dropout-rate 0``; the
recurrent connections and the output are, at ``--dropout-rate`` 0.1). With a
single input feature, a per-sequence mask on x_t blanks the whole window
with probability p, so that a fraction p of the weight draws forecast
without seeing the data; on the validation run below (300 epochs, seeds 0
and 1) an input rate of 0.1 gave RMSEs of 0.40 and 0.42 ppm and 95 %
intervals 2.3 ppm wide, against 0.33 and 0.32 ppm and 1.3 ppm with 0.
``MCDropout(placement="all")`` on an ``nn.LSTM`` drops x_t at the same rate
as h_{t-1}; ``VariationalLSTM(dropout_rate=..., recurrent_dropout_rate=...)``
sets them apart.

Nothing is tuned on the test months: the input rate and the number of
epochs were chosen on a validation run inside the training period
(``--test-start 1985-01 --last-month 1989-12``: train on targets before
1985, validate on the 60 months of 1985-1989; 300 epochs gave a lower NLL
than 150 for every network; recurrent rates of 0.05 and 0.2 gave NLLs
within 0.03 nats of 0.1's, which was kept).

Measured on the test months: RMSE (ppm), mean Gaussian negative log-likelihood
(``skbayes.metrics.gaussian_nll``, nats per month, ppm units), CRPS
(``crps_gaussian``, ppm), empirical coverage and mean width (ppm) of the
central 95 % and 50 % Gaussian intervals (``interval_coverage``,
``mean_interval_width``; mean -/+ z std, what ``predict_interval`` returns),
the mean epistemic std and the learned noise std, and the fit time; mean and
standard error over the seeds for the networks. The figure shows the tied
model's forecasts (first seed) and 95 % band against the observed levels,
and the forecast errors inside the band.

How to run
----------
::

    OMP_NUM_THREADS=1 python examples/benchmarks/co2_lstm.py --threads 1            # about 5 minutes on 2 CPU cores
    OMP_NUM_THREADS=1 python examples/benchmarks/co2_lstm.py --quick --threads 1    # smoke run, seconds
    python examples/benchmarks/co2_lstm.py --device cuda

Outputs ``examples/benchmarks/results/timeseries/co2_lstm.{json,md}`` (with ``--quick``:
``co2_lstm_quick.*``; ``--tag X``: ``co2_lstm_X.*``; another split, as
with ``--test-start``: ``co2_lstm_validation.*``) and the figure
``doc/images/co2_lstm.png`` (with a tag: ``co2_lstm_<tag>.png`` beside the
results).
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
from sklearn.linear_model import LinearRegression
from torch import nn

from skbayes import BayesianMLPRegressor
from skbayes.inference import DeepEnsemble, MCDropout
from skbayes.metrics import crps_gaussian, gaussian_nll, interval_coverage, mean_interval_width
from skbayes.nn import VariationalLSTM

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, limit_threads, run_saving, write_atomic, results_dir  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEST_START = "1990-01"
COVERAGES = (0.95, 0.5)
HISTORY_MONTHS = 36  # training months shown before the test period in the figure
NETWORKS = ("tied", "untied", "step masks", "ensemble")
METHODS = (*NETWORKS, "seasonal naive", "linear AR")


# ----------------------------------------------------------------------------- data


def load_monthly_co2():
    """Monthly mean CO2 levels (ppm), March 1958 to December 2001, as a pandas Series (month starts).

    Weekly values averaged per calendar month; the months without any weekly
    value are linearly interpolated. Returns ``(levels, filled)`` with
    ``filled`` the list of interpolated months (ISO dates).

    Raises
    ------
    SystemExit
        If statsmodels (which bundles the data set) is not installed.
    """
    try:
        import statsmodels.api as sm
    except ImportError:
        raise SystemExit(
            "co2_lstm.py needs statsmodels, which bundles the Mauna Loa CO2 data set: "
            "pip install 'skbayes[timeseries]' (or pip install 'statsmodels>=0.14')."
        ) from None
    weekly = sm.datasets.co2.load_pandas().data["co2"]
    monthly = weekly.resample("MS").mean()
    filled = [d.strftime("%Y-%m-%d") for d in monthly.index[monthly.isna()]]
    return monthly.interpolate(method="linear"), filled


def windows(diff, n_lags):
    """Inputs (d_{t-n_lags}, ..., d_{t-1}) and targets d_t for every t with a full window.

    Parameters
    ----------
    diff : ndarray of shape (n,)
    n_lags : int

    Returns
    -------
    X : ndarray of shape (n - n_lags, n_lags), oldest lag first
    y : ndarray of shape (n - n_lags,)
    positions : ndarray of shape (n - n_lags,)
        Index into ``diff`` of each target.
    """
    positions = np.arange(n_lags, len(diff))
    X = np.stack([diff[p - n_lags:p] for p in positions])
    return X, diff[positions], positions


def prepare(n_lags, test_start=TEST_START, last_month=None):
    """The training and test sets of the protocol (see the module docstring) and what the report needs.

    Targets before ``test_start`` (``"YYYY-MM"``) train, the others up to
    ``last_month`` (inclusive; None: the end of the record) are tested.
    """
    levels, filled = load_monthly_co2()
    if last_month is not None:
        levels = levels[levels.index < (np.datetime64(last_month, "M") + 1)]
    values = levels.to_numpy(dtype=float)
    diff = np.diff(values)  # diff[i] = level[i + 1] - level[i], dated levels.index[i + 1]
    dates = levels.index[1:]
    X, y, positions = windows(diff, n_lags)
    target_dates = dates[positions]
    train = target_dates < np.datetime64(test_start, "M")
    mean, std = diff[positions[train]].mean(), diff[positions[train]].std()  # training targets' moments
    Xs = (X - mean) / std
    return {
        "X_train": Xs[train], "y_train": y[train], "X_test": Xs[~train], "y_test": y[~train],
        "X_train_raw": X[train], "X_test_raw": X[~train],
        "prev_level_test": values[positions[~train]],  # level[t-1] for the target diff[t-1+1]
        "level_test": values[positions[~train] + 1],
        "dates_test": [d.strftime("%Y-%m") for d in target_dates[~train]],
        "levels": values, "level_dates": [d.strftime("%Y-%m") for d in levels.index],
        "filled": filled, "diff_mean": float(mean), "diff_std": float(std),
        "train_span": (target_dates[train][0].strftime("%Y-%m"), target_dates[train][-1].strftime("%Y-%m")),
    }


# ----------------------------------------------------------------------------- models


class LSTMRegressorModule(nn.Module):
    """One LSTM layer over the sequence and a linear head on its last output.

    Parameters
    ----------
    n_outputs : int
        Filled in by the estimator.
    hidden : int, default=32
    variational : bool, default=True
        :class:`skbayes.nn.VariationalLSTM` (with ``dropout_rate``, ``gates``,
        ``masks``, ``prior_scale``) if True, else :class:`torch.nn.LSTM`.
    """

    def __init__(self, n_outputs, hidden=32, variational=True, dropout_rate=0.1, recurrent_dropout_rate=None,
                 gates="tied", masks="sequence", prior_scale=1.0):
        super().__init__()
        if variational:
            self.lstm = VariationalLSTM(1, hidden, dropout_rate=dropout_rate,
                                        recurrent_dropout_rate=recurrent_dropout_rate, gates=gates, masks=masks,
                                        prior_scale=prior_scale)
        else:
            self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, n_outputs)

    def forward(self, x):  # x: (B, T, 1)
        out, _ = self.lstm(x)
        return self.head(out[:, -1])


def network(name, args, seed):
    """The estimator of method ``name`` (one of NETWORKS) with ``random_state=seed``."""
    common = dict(input_shape=(args.n_lags, 1), prior_scale=args.prior_scale, noise="homoscedastic",
                  batch_size=args.batch_size, random_state=seed, device=args.device, dtype="float32")
    # the training loop's settings are the inference method's: a fixed number of epochs
    loop = dict(max_iter=args.epochs, n_iter_no_change=10**9, learning_rate_init=args.lr)
    if name == "ensemble":
        return BayesianMLPRegressor(module=LSTMRegressorModule,
                                    module_params={"hidden": args.hidden, "variational": False},
                                    inference=DeepEnsemble(n_estimators=args.n_members, **loop), **common)
    gates, masks = {"tied": ("tied", "sequence"), "untied": ("untied", "sequence"),
                    "step masks": ("tied", "step")}[name]
    return BayesianMLPRegressor(
        module=LSTMRegressorModule,
        module_params={"hidden": args.hidden, "dropout_rate": args.input_dropout_rate,
                       "recurrent_dropout_rate": args.dropout_rate, "gates": gates, "masks": masks,
                       "prior_scale": args.prior_scale},
        inference=MCDropout(dropout_rate=args.dropout_rate, placement="dense", n_mc_predict=args.n_mc_predict, **loop),
        **common)


def baseline(name, data):
    """Predictive mean and std (ppm) of the test differences, and the fit time, of a baseline."""
    start = time.perf_counter()
    if name == "seasonal naive":  # d_t = d_{t-12}; the inputs hold d_{t-n_lags}..d_{t-1}, so d_{t-12} is column -12
        residuals = data["y_train"] - data["X_train_raw"][:, -12]
        mean = data["X_test_raw"][:, -12]
    else:  # AR(n_lags) by least squares on the raw lags
        model = LinearRegression().fit(data["X_train_raw"], data["y_train"])
        residuals = data["y_train"] - model.predict(data["X_train_raw"])
        mean = model.predict(data["X_test_raw"])
    std = np.full_like(mean, np.sqrt(np.mean(residuals**2)))
    return mean, std, time.perf_counter() - start


# ----------------------------------------------------------------------------- metrics


def gaussian_interval(mean, std, coverage):
    """Central interval mean -/+ z std of the Gaussian (what ``predict_interval`` returns)."""
    z = norm.ppf(0.5 + coverage / 2)
    return mean - z * std, mean + z * std


def scores(y, mean, std):
    row = {"rmse": float(np.sqrt(np.mean((y - mean) ** 2))), "nll": gaussian_nll(y, mean, y_std=std),
           "crps": crps_gaussian(y, mean, y_std=std), "mean_std": float(np.mean(std))}
    for c in COVERAGES:
        lower, upper = gaussian_interval(mean, std, c)
        row[f"coverage_{round(100 * c)}"] = interval_coverage(y, lower, upper)
        row[f"width_{round(100 * c)}"] = mean_interval_width(lower, upper)
    return row


# ----------------------------------------------------------------------------- report


KEYS = ("rmse", "nll", "crps", "coverage_95", "width_95", "coverage_50", "width_50", "epistemic_std", "noise_std",
        "fit_time_s")


def aggregate(runs):
    """Mean and standard error (``np.std(ddof=0) / sqrt(n)``) over runs of every key of KEYS (None if absent)."""
    out = {}
    for key in KEYS:
        values = [r[key] for r in runs if r.get(key) is not None]
        out[key] = None if not values else {"mean": float(np.mean(values)),
                                           "se": float(np.std(values) / np.sqrt(len(values)))}
    return out


def markdown(report):
    s = report["settings"]
    lines = [
        f"Mauna Loa CO2 (statsmodels), monthly means {s['first_month']} to {s['last_month']} "
        f"({len(s['interpolated_months'])} empty months interpolated), one-step-ahead forecasts of the monthly "
        f"difference from the previous {s['n_lags']} differences; training targets {s['train_span'][0]} to "
        f"{s['train_span'][1]} ({s['n_train']} windows), test {s['test_span'][0]} to {s['test_span'][1]} "
        f"({s['n_test']} months). LSTM of {s['hidden']} units, {s['epochs']} epochs, batch {s['batch_size']}, "
        f"dropout rate {s['dropout_rate']} (recurrent and output; input {s['input_dropout_rate']}), "
        f"{s['n_mc_predict']} MC draws, ensemble of {s['n_members']}, {s['dtype']} on {s['device']}; networks: "
        f"mean ± standard error over {len(s['seeds'])} seed(s) (random_state {s['seeds']}). RMSE, CRPS, widths "
        "and stds in ppm (the same for levels and differences); NLL in nats per month; intervals: central "
        "Gaussian, mean -/+ z std; epistemic std and noise std: their means over the test months.",
        "",
        "| method | RMSE | NLL | CRPS | 95 % coverage | 95 % width | 50 % coverage | 50 % width "
        "| epistemic std | noise std | fit s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    digits = {"fit_time_s": 1}

    def cell(agg, key, n_runs):
        if agg[key] is None:
            return "—"
        d = digits.get(key, 3)
        return f"{agg[key]['mean']:.{d}f}" + (f" ± {agg[key]['se']:.{d}f}" if n_runs > 1 else "")

    for name, r in report["methods"].items():
        cells = " | ".join(cell(r["aggregate"], key, len(r["runs"])) for key in KEYS)
        lines.append(f"| {name} | {cells} |")
    env = report["environment"]
    lines += [
        "",
        f"Command: `{' '.join(['python', *env['command'][1:]])}`; machine: {env['platform']}, "
        f"{env['cpu_count']} CPUs, {env['torch_num_threads']} torch thread(s), device {s['device']}; "
        f"torch {env['torch']}, skbayes {env['skbayes']}, git {str(env['git_commit'])[:7]}; "
        f"started {env['started']}, finished {env.get('finished')}; load average {env['loadavg_start']} at start, "
        f"{env.get('loadavg_end')} at end; complete: {report['complete']}.",
    ]
    return "\n".join(lines) + "\n"


def figure(report, path, method="tied"):
    """The test-period forecasts of ``method`` with 95 % bands against the observed levels, and its errors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    pred = report["predictions"]
    r = pred[method]
    dates = np.array(pred["dates"], dtype="datetime64[M]")
    truth, prev = np.asarray(pred["level"]), np.asarray(pred["prev_level"])
    mean, std = prev + np.asarray(r["mean"]), np.asarray(r["std"])
    lower, upper = gaussian_interval(mean, std, 0.95)
    history = np.array(pred["history_dates"], dtype="datetime64[M]")[-HISTORY_MONTHS:]
    history_levels = np.asarray(pred["history"])[-HISTORY_MONTHS:]

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    ax1.plot(np.append(history, dates[:1]), np.append(history_levels, truth[:1]), color="0.6", lw=1,
             label="observed (training period)")
    ax1.fill_between(dates, lower, upper, color="tab:orange", alpha=0.35, lw=0, label="95 % interval")
    ax1.plot(dates, mean, color="tab:orange", lw=1, label=f"forecast ({method})")
    ax1.plot(dates, truth, "k.", ms=3, label="observed (test)")
    ax1.set_ylabel("CO2 (ppm)")
    ax1.legend(loc="upper left", fontsize=8)
    row = report["methods"][method]["runs"][0]
    ax1.set_title(f"Mauna Loa CO2, one month ahead, variational LSTM ({method}, random_state={row['seed']}): "
                  f"RMSE {row['rmse']:.2f} ppm, 95 % coverage {row['coverage_95']:.2f}", fontsize=10)

    err = truth - mean
    ax2.fill_between(dates, -1.96 * std, 1.96 * std, color="tab:orange", alpha=0.35, lw=0, label="95 % interval")
    ax2.axhline(0, color="0.4", lw=0.8)
    ax2.plot(dates, err, "k.", ms=3, label="observed - forecast")
    ax2.set_ylabel("error (ppm)")
    ax2.legend(loc="upper left", fontsize=8)
    ax2.xaxis.set_major_locator(mdates.YearLocator(1 if len(dates) + HISTORY_MONTHS < 120 else 2))
    ax2.xaxis.set_major_formatter(mdates.DateFormatter("%Y"))
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------- main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="Smoke run: 8 hidden units, 3 epochs, 10 draws, 2 ensemble members.")
    parser.add_argument("--methods", nargs="+", default=None, metavar="NAME",
                        help=f"Methods to run (default: all of {list(METHODS)}).")
    parser.add_argument("--hidden", type=int, default=None, help="LSTM units (default 32; quick 8).")
    parser.add_argument("--epochs", type=int, default=None, help="Epochs of every network (default 300; quick 3).")
    parser.add_argument("--n-mc-predict", type=int, default=None,
                        help="Dropout draws per prediction (default 100; quick 10).")
    parser.add_argument("--n-members", type=int, default=None, help="Deep ensemble members (default 5; quick 2).")
    parser.add_argument("--n-lags", type=int, default=24, help="Window length T (default 24).")
    parser.add_argument("--dropout-rate", type=float, default=0.1,
                        help="Dropout rate of the LSTM's recurrent connections and output (default %(default)s).")
    parser.add_argument("--input-dropout-rate", type=float, default=0.0,
                        help="Dropout rate of the LSTM's input x_t (default %(default)s).")
    parser.add_argument("--prior-scale", type=float, default=1.0, help="Prior std of the weights (weight decay).")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate.")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--test-start", default=TEST_START,
                        help="First test month, YYYY-MM (default %(default)s); earlier targets train.")
    parser.add_argument("--last-month", default=None,
                        help="Last month used, YYYY-MM (default: the end of the record, 2001-12). A validation run "
                             "inside the training period: --test-start 1985-01 --last-month 1989-12.")
    parser.add_argument("--seeds", type=int, default=None,
                        help="Fit every network with random_state 0, ..., N-1 (default 3; quick 1).")
    parser.add_argument("--device", default="cpu", help="Torch device (default: cpu).")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads(N).")
    parser.add_argument("--output-dir", default=str(results_dir("timeseries")))
    parser.add_argument("--tag", default=None,
                        help="Results files co2_lstm_<tag>.* (default: co2_lstm, or co2_lstm_quick).")
    parser.add_argument("--figure", default=None,
                        help="Figure path (default: doc/images/co2_lstm.png; with --quick or --tag, beside the "
                             "results files, co2_lstm_<tag>.png).")
    args = parser.parse_args(argv)
    args.hidden = args.hidden or (8 if args.quick else 32)
    args.epochs = args.epochs or (3 if args.quick else 300)
    args.seeds = args.seeds or (1 if args.quick else 3)
    args.n_mc_predict = args.n_mc_predict or (10 if args.quick else 100)
    args.n_members = args.n_members or (2 if args.quick else 5)
    if args.tag is None and args.quick:
        args.tag = "quick"
    elif args.tag is None and (args.test_start != TEST_START or args.last_month is not None):
        args.tag = "validation"  # another split: never the files of the documented run
    name = "co2_lstm" + (f"_{args.tag}" if args.tag else "")
    out = Path(args.output_dir)
    args.json_path, args.md_path = out / f"{name}.json", out / f"{name}.md"
    if args.figure is None:
        args.figure = out / f"{name}.png" if args.tag else ROOT / "doc" / "images" / "co2_lstm.png"
    args.figure = Path(args.figure)
    if args.methods:
        unknown = set(args.methods) - set(METHODS)
        if unknown:
            parser.error(f"unknown method(s) {sorted(unknown)}; choose from {list(METHODS)}")
    args.methods = [m for m in METHODS if not args.methods or m in args.methods]
    return args


def main(argv=None):
    args = parse_args(argv)
    limit_threads(args.threads)
    data = prepare(args.n_lags, args.test_start, args.last_month)
    args.json_path.parent.mkdir(parents=True, exist_ok=True)
    n_hist = sum(d < args.test_start for d in data["level_dates"])  # the plot's history stops at the test period
    report = {
        "settings": {
            "n_lags": args.n_lags, "hidden": args.hidden, "epochs": args.epochs, "batch_size": args.batch_size,
            "dropout_rate": args.dropout_rate,
            "input_dropout_rate": args.input_dropout_rate, "prior_scale": args.prior_scale, "learning_rate": args.lr,
            "n_mc_predict": args.n_mc_predict, "n_members": args.n_members, "seeds": list(range(args.seeds)),
            "device": args.device, "dtype": "float32", "quick": args.quick,
            "first_month": data["level_dates"][0], "last_month": data["level_dates"][-1],
            "interpolated_months": data["filled"], "train_span": list(data["train_span"]),
            "test_span": [data["dates_test"][0], data["dates_test"][-1]],
            "n_train": len(data["y_train"]), "n_test": len(data["y_test"]),
            "input_standardisation": {"mean": data["diff_mean"], "std": data["diff_std"]},
        },
        "environment": environment(), "complete": False, "methods": {},
        "predictions": {"dates": data["dates_test"], "level": data["level_test"].tolist(),
                        "prev_level": data["prev_level_test"].tolist(),
                        "history_dates": data["level_dates"][:n_hist], "history": data["levels"][:n_hist].tolist()},
    }
    s = report["settings"]
    print(f"{s['n_train']} training windows ({s['train_span'][0]} to {s['train_span'][1]}), {s['n_test']} test "
          f"months; torch threads {report['environment']['torch_num_threads']}, load average "
          f"{report['environment']['loadavg_start']}", flush=True)

    def save():
        write_atomic(args.json_path, json.dumps(report, indent=1))

    def record(name, run, mean, std):
        entry = report["methods"].setdefault(name, {"runs": []})
        entry["runs"].append(run)
        entry["aggregate"] = aggregate(entry["runs"])
        if len(entry["runs"]) == 1:  # the first seed's forecasts, for the figure
            report["predictions"][name] = {"mean": np.asarray(mean).tolist(), "std": np.asarray(std).tolist()}
        label = name if run.get("seed") is None else f"{name}, seed {run['seed']}"
        print(f"  {label:<22} RMSE {run['rmse']:.3f} ppm  "
              f"NLL {run['nll']:.3f}  95 % cov {run['coverage_95']:.3f} width {run['width_95']:.3f}  "
              f"50 % cov {run['coverage_50']:.3f}  fit {run['fit_time_s']:.1f} s", flush=True)
        save()

    def body():
        for name in args.methods:
            if name not in NETWORKS:
                mean, std, fit_time = baseline(name, data)
                record(name, {**scores(data["y_test"], mean, std), "fit_time_s": fit_time}, mean, std)
                continue
            for seed in range(args.seeds):
                model = network(name, args, seed)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ConvergenceWarning)
                    start = time.perf_counter()
                    model.fit(data["X_train"], data["y_train"])
                    fit_time = time.perf_counter() - start
                out = model.predict_uncertainty(data["X_test"])
                run = {"seed": seed, **scores(data["y_test"], out.mean, out.std), "fit_time_s": fit_time,
                       "epistemic_std": float(np.mean(out.epistemic_std)),
                       "noise_std": float(np.mean(out.aleatoric_std))}
                record(name, run, out.mean, out.std)

    def finish():
        if report["methods"]:
            write_atomic(args.md_path, markdown(report))
            if "tied" in report["methods"]:
                figure(report, args.figure)
                print(f"Wrote {args.figure}")

    run_saving(report, body, save, finish)
    if args.md_path.exists():
        print("\n" + args.md_path.read_text())
    print(f"Wrote {args.json_path}\nWrote {args.md_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
