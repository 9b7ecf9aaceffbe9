"""
=====================================================================
Classifier uncertainty and out-of-distribution detection
=====================================================================

A Bayesian classifier averages the class probabilities of many plausible
networks. Where they agree, the prediction is confident; where they
disagree, the *mutual information* between the label and the weights (the
epistemic part of the uncertainty) is large. This example trains
:class:`~skbayes.BayesianMLPClassifier` on the digits 5-9 of scikit-learn's
8x8 digits and uses its uncertainty to tell held-out digits 5-9 from the
digits 0-4, which it has never seen.
"""

# %%
# Data: train on 5-9, hold the 0-4 out as out-of-distribution inputs
# -----------------------------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import RocCurveDisplay, roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skbayes import BayesianMLPClassifier
from skbayes.metrics import ReliabilityDisplay, expected_calibration_error

X, y = load_digits(return_X_y=True)
seen = y >= 5
X_train, X_test, y_train, y_test = train_test_split(
    X[seen], y[seen], test_size=0.3, stratify=y[seen], random_state=0
)
X_ood = X[~seen]

# %%
# Fit the default classifier: a deep ensemble of five networks
# --------------------------------------------------------------
pipe = make_pipeline(StandardScaler(), BayesianMLPClassifier(random_state=0))
pipe.fit(X_train, y_train)
proba = pipe.predict_proba(X_test)
print(f"accuracy on held-out 5-9: {pipe.score(X_test, y_test):.3f}, "
      f"ECE: {expected_calibration_error(y_test, proba):.4f}")

# %%
# ``predict_uncertainty`` splits the predictive entropy (total uncertainty)
# into the expected entropy (aleatoric) and the mutual information
# (epistemic); ``score_ood`` returns the latter.
model, scaler = pipe[-1], pipe[:-1]
u_in = model.predict_uncertainty(scaler.transform(X_test))
u_ood = model.predict_uncertainty(scaler.transform(X_ood))
is_ood = np.r_[np.zeros(len(X_test)), np.ones(len(X_ood))]

fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
for ax, key in zip(axes[:2], ["predictive_entropy", "mutual_information"]):
    bins = np.linspace(0, max(u_in[key].max(), u_ood[key].max()), 30)
    ax.hist(u_in[key], bins=bins, alpha=0.6, density=True, label="held-out 5-9")
    ax.hist(u_ood[key], bins=bins, alpha=0.6, density=True, label="unseen 0-4")
    ax.set(xlabel=f"{key.replace('_', ' ')} (nats)", yscale="log")
    ax.legend()
    score = np.r_[u_in[key], u_ood[key]]
    print(f"OOD ROC-AUC of the {key.replace('_', ' ')}: {roc_auc_score(is_ood, score):.3f}")
    RocCurveDisplay.from_predictions(is_ood, score, name=key.replace("_", " "), ax=axes[2])
axes[2].set_title("detecting unseen digits")
fig.tight_layout()

# %%
# The least and the most uncertain unseen digits
# -------------------------------------------------
# Some 0-4 look much like a 5-9 to the model and get a confident wrong
# label; others get a high mutual information.
order = np.argsort(u_ood.mutual_information)
fig, axes = plt.subplots(2, 6, figsize=(8, 3.2))
for ax, i in zip(axes.ravel(), np.r_[order[:6], order[-6:]]):
    ax.imshow(X_ood[i].reshape(8, 8), cmap="gray_r")
    ax.set_title(f"p({model.classes_[u_ood.proba[i].argmax()]})={u_ood.proba[i].max():.2f}\n"
                 f"MI={u_ood.mutual_information[i]:.2f}", fontsize=7)
    ax.axis("off")
fig.tight_layout()

# %%
# Reliability on the in-distribution test rows
# ---------------------------------------------
# Accuracy against the confidence of the predicted class in ten bins of
# equal width (the empty ones left out; points above the diagonal are
# underconfident), with the mean entropy and mutual information of each bin
# on the right axis: the entropy falls as the confidence rises. Almost all
# test digits are classified with a confidence above 0.9; the other bins
# hold a handful each, so their accuracies are noisy.
fig, ax = plt.subplots(figsize=(6, 4))
display = ReliabilityDisplay.from_estimator(pipe, X_test, y_test, n_bins=10, ax=ax)
print("predictions per bin:", display.count)
fig.tight_layout()
plt.show()
