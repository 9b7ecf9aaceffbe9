"""
=================================================
A sparse Gaussian process on 30,000 rows
=================================================

An exact Gaussian process costs O(n³) time and O(n²) memory: on 30,000
rows scikit-learn's :class:`~sklearn.gaussian_process.GaussianProcessRegressor`
would need a 7 GB kernel matrix. :class:`~skbayes.SparseGPRegressor`
summarises the data by M inducing points, learned with the kernel and the
noise on minibatches, at a cost per step of O(batch_size M² + M³) whatever
the number of rows. This example fits it with 8 and with 24 inducing points.
"""

# %%
# Data: a wiggly function, noise level 0.3, and a gap in the inputs
# -----------------------------------------------------------------------
import time
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skbayes import SparseGPRegressor
from skbayes.inference import SparseVariational
from skbayes.metrics import TrainingCurveDisplay, interval_coverage


def f(x):
    return np.sin(2 * x) + 0.3 * np.cos(5 * x)


rng = np.random.RandomState(0)
x = rng.uniform(-5, 5, 40_000)
x = x[np.abs(x - 1.5) > 1.2][:32_000]  # no data in (0.3, 2.7)
X, y = x[:, None], f(x) + 0.3 * rng.randn(x.size)
X_train, y_train, X_test, y_test = X[:30_000], y[:30_000], X[30_000:], y[30_000:]

# %%
# Fit with a short budget
# -----------------------
# Minibatches of 1,024 rows, 30 passes over the data (about 900 optimiser
# steps), natural-gradient updates of the distribution of the inducing
# values. The default budget is 4,000 steps; this one is cut short on
# purpose, so the ConvergenceWarning it would raise is silenced.
models = {}
for m in (8, 24):
    gp = SparseGPRegressor(
        n_inducing=m, batch_size=1024, random_state=0,
        inference=SparseVariational(optimizer="ngd", learning_rate_init=0.03, max_iter=30),
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(X_train, y_train)
    lower, upper = gp.predict_interval(X_test, coverage=0.95)
    print(f"M={m}: fit in {time.perf_counter() - start:.1f} s, noise std {gp.noise_std_:.3f} "
          f"(true 0.3), test log-likelihood {gp.log_predictive_density(X_test, y_test).mean():.3f}, "
          f"95% coverage {interval_coverage(y_test, lower, upper):.3f}")
    models[m] = gp

# %%
# Inducing points and predictive bands
# ------------------------------------
# The inducing inputs (triangles) move to where the function needs them.
# In the gap the band widens: there the posterior falls back towards the
# prior. With 8 points none is left for the data beyond x = 4, where the
# model falls back to the prior as well: the inducing points, not the rows,
# are what the sparse model remembers.
grid = np.linspace(-5.5, 5.5, 500)[:, None]
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharey=True)
for ax, (m, gp) in zip(axes, models.items()):
    mean, std = gp.predict(grid, return_std=True)
    ax.scatter(X_train[::30, 0], y_train[::30], s=2, c="k", alpha=0.2, label="data (1 in 30)")
    ax.fill_between(grid[:, 0], mean - 1.96 * std, mean + 1.96 * std, alpha=0.3, label="95% band")
    ax.plot(grid[:, 0], mean, label="predictive mean")
    ax.plot(grid[:, 0], f(grid[:, 0]), "k--", lw=1, label="f(x)")
    z = gp.inducing_points_[:, 0]
    ax.plot(z, np.full_like(z, -2.4), "r^", label="inducing inputs")
    ax.set(title=f"M = {m} inducing points", xlabel="x", ylim=(-2.6, 2.2))
axes[0].legend(fontsize=7, loc="upper left", ncol=2)
fig.tight_layout()

# %%
# The training loss per epoch (the negative evidence lower bound per row)
# has levelled off by the last epochs, within ten with 24 points.
fig, ax = plt.subplots(figsize=(5, 3))
for color, (m, gp) in enumerate(models.items()):
    TrainingCurveDisplay.from_estimator(gp, name=f"M = {m}", ax=ax, line_kwargs={"color": f"C{color}"})
ax.set(ylabel="training loss (nats per row)")
fig.tight_layout()
plt.show()
