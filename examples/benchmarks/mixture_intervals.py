"""How far the intervals moved when they became the quantiles of the predictive mixture.

Until this change ``BayesianMLPRegressor.predict_interval`` (and
``predict_quantiles``) with ``noise="homoscedastic"``, and those of the
sampled ``SparseGPRegressor``, returned the quantiles of the Gaussian with the
predictive mixture's mean and standard deviation; now they are the exact
quantiles of the mixture (1/T) sum_t N(m_t(x), s_t^2) itself (over weight
draws, members or kept samples), as for the MLP's other noise models. This
script fits the behaviour reference's small fixed-seed configurations with
homoscedastic noise and the sampled sparse GPs
(tests/behaviour_reference.py: 64 rows, 6 epochs or a short SGHMC schedule),
computes both at the 95% level on the training rows and writes, per
configuration, the largest and the median shift of an interval end in units
of the predictive standard deviation and the largest relative change of the
width, to ``results/mixture/mixture_intervals.json``.

    python examples/benchmarks/mixture_intervals.py
"""

import json
import sys
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from behaviour_reference import data, make_estimator  # noqa: E402

from skbayes.base import PredictiveRegressorMixin  # noqa: E402

CONFIGS = ["reg_mfvi", "reg_mc_dropout", "reg_pbp", "reg_vadam", "reg_sghmc", "reg_ensemble", "reg_mfvi_fixed_noise",
           "nnreg_mfvi", "nnreg_ensemble", "sgp_sghmc", "sgp_sghmc_dpp_prior"]
OUT = Path(__file__).parent / "results" / "mixture" / "mixture_intervals.json"


def main():
    rows = {}
    X, y = data("reg")
    for name in CONFIGS:
        model, _ = make_estimator(name)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model.fit(X, y)
        lower, upper = model.predict_interval(X, coverage=0.95)
        # the earlier rule: the Gaussian of the predictive mean and standard deviation
        old_lower, old_upper = PredictiveRegressorMixin._predictive_quantiles(model, X, np.array([0.025, 0.975])).T
        std = model.predict(X, return_std=True)[1]
        shift = np.maximum(np.abs(lower - old_lower), np.abs(upper - old_upper)) / std
        width = (upper - lower) / (old_upper - old_lower) - 1
        rows[name] = {"max_shift_in_std": float(shift.max()), "median_shift_in_std": float(np.median(shift)),
                      "max_abs_relative_width_change": float(np.abs(width).max())}
        print(f"{name:22s} shift/std max {shift.max():.4f} median {np.median(shift):.4f}  "
              f"|width change| max {np.abs(width).max():.4f}")
    OUT.write_text(json.dumps({"coverage": 0.95, "n_rows": len(X), "configs": rows}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
