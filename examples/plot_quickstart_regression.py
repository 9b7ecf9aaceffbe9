"""
=======================================================
Quickstart: regression with predictive intervals
=======================================================

:class:`~skbayes.BayesianMLPRegressor` is a drop-in scikit-learn regressor
whose predictions come with a predictive distribution. This example fits it
in a :class:`~sklearn.pipeline.Pipeline` on a one-dimensional toy problem
whose training inputs leave a gap, and shows how the uncertainty splits into
an *aleatoric* part (observation noise, the same everywhere here) and an
*epistemic* part (what the model does not know), which grows in the gap and
away from the data.
"""

# %%
# Data: two clusters of inputs with a gap between them
# ------------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPRegressor
from skbayes.metrics import PredictionIntervalDisplay, RegressionCalibrationDisplay, interval_coverage

rng = np.random.RandomState(0)


def make_data(n, wide=False):
    if wide:  # anywhere in [-7, 7], the gap and beyond the data included
        x = rng.uniform(-7, 7, n)
    else:
        x = np.concatenate([rng.uniform(-4, -1, n // 2), rng.uniform(1.5, 4, n - n // 2)])
    return x[:, None], np.sin(x) + 0.2 * rng.randn(n)


X_train, y_train = make_data(200)
X_test, y_test = make_data(200)

# %%
# Fit: the defaults (SGHMC over the weights) in a pipeline
# ----------------------------------------------------------
# The prior sits on the weights, so standardise the inputs first.
# ``predict(X, return_std=True)`` is routed through the pipeline.
pipe = make_pipeline(StandardScaler(), BayesianMLPRegressor(random_state=0))
pipe.fit(X_train, y_train)
mean, std = pipe.predict(X_test, return_std=True)
print(f"test RMSE {np.sqrt(np.mean((mean - y_test) ** 2)):.3f}, mean predictive std {std.mean():.3f}")

# %%
# The estimator's other methods take the transformed inputs: central
# intervals of the Monte-Carlo predictive mixture, and the two parts of the
# predictive standard deviation.
model, scaler = pipe[-1], pipe[:-1]
lower, upper = model.predict_interval(scaler.transform(X_test), coverage=0.9)
print(f"coverage of the 90% interval on the test rows: {interval_coverage(y_test, lower, upper):.3f}")

X_grid = np.linspace(-7, 7, 400)[:, None]
unc = model.predict_uncertainty(scaler.transform(X_grid))

# %%
# Epistemic and aleatoric uncertainty
# -----------------------------------
# Left: rows drawn anywhere in [-7, 7], with the 90% band of the predictive
# distribution (light) and of its epistemic part alone (dark). Right: the
# two standard deviations along x. Between the clusters and beyond them the
# model's uncertainty about the function grows; the noise level does not.
X_wide, y_wide = make_data(300, wide=True)
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
PredictionIntervalDisplay.from_estimator(pipe, X_wide, y_wide, feature=0, coverage=0.9, ax=ax0,
                                         scatter_kwargs={"s": 4})
ax0.scatter(X_train[:, 0], y_train, s=4, c="C3", label="training rows")
ax0.set(xlabel="x", ylim=(-4, 4))
ax0.legend(fontsize=7, loc="lower left")
ax1.plot(X_grid[:, 0], unc.epistemic_std, label="epistemic std")
ax1.plot(X_grid[:, 0], unc.aleatoric_std, label="aleatoric std")
ax1.axvspan(-1, 1.5, color="grey", alpha=0.15, label="gap in the training rows")
ax1.set(xlabel="x", ylabel="standard deviation")
ax1.legend(fontsize=8)
fig.tight_layout()

# %%
# Calibration on the test rows
# ----------------------------
# For each nominal level p, the fraction of test targets inside the central
# interval of coverage p (``predict_interval``). A calibrated model follows
# the diagonal; below it, the intervals are too narrow.
fig, ax = plt.subplots(figsize=(5, 4.5))
RegressionCalibrationDisplay.from_estimator(pipe, X_test, y_test, name="BayesianMLPRegressor", ax=ax)
plt.show()
