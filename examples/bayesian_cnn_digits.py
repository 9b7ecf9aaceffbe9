"""A Bayesian CNN around your own torch module, on scikit-learn's 8x8 digits (seconds on a CPU).

A plain torch network goes into ``BayesianMLPClassifier(module=...)``; the inference
method makes it Bayesian (MC dropout after the convolution and before the dense
layer, or a deep ensemble of copies). The script prints the test accuracy, the
log loss and the mean mutual information (epistemic uncertainty) on the test
digits and on the same digits shifted sideways by three pixels (inputs the
networks never saw), tunes the width of the network with ``GridSearchCV`` over
``module_params`` (``{"width": 16}`` or ``{"width": 64}``), and saves nothing.

Run: ``python examples/bayesian_cnn_digits.py``
"""

import numpy as np
from sklearn.datasets import load_digits
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import GridSearchCV, train_test_split
from torch import nn

from skbayes import BayesianMLPClassifier
from skbayes.inference import DeepEnsemble, MCDropout


class SmallCNN(nn.Module):
    """Conv 3x3 (8 channels), ReLU, 2x2 max-pooling, a dense layer of ``width`` units, the logits."""

    def __init__(self, n_outputs, width=64):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten())
        self.head = nn.Sequential(nn.Linear(8 * 4 * 4, width), nn.ReLU(), nn.Linear(width, n_outputs))

    def forward(self, x):
        return self.head(self.features(x))


def shifted(X, pixels=3):
    """The 8x8 digits moved ``pixels`` to the right (zeros enter from the left)."""
    images = X.reshape(-1, 8, 8)
    out = np.zeros_like(images)
    out[:, :, pixels:] = images[:, :, :-pixels]
    return out.reshape(len(X), -1)


def main():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    common = {"input_shape": (1, 8, 8), "prior_scale": 1.0, "batch_size": 64, "random_state": 0}
    # 30 epochs, no early stopping (the training loop's settings belong to the inference method)
    loop = {"max_iter": 30, "early_stopping": False, "n_iter_no_change": 50}
    models = {
        "MC dropout (Bayesian CNN)": MCDropout(dropout_rate=0.2, placement="all", **loop),
        "deep ensemble of 5": DeepEnsemble(n_estimators=5, **loop),
    }
    print(f"{'model':28s} {'accuracy':>8s} {'log loss':>8s} {'MI test':>8s} {'MI shifted':>10s}")
    for name, inference in models.items():
        clf = BayesianMLPClassifier(module=SmallCNN, inference=inference, **common).fit(X_train, y_train)
        proba = clf.predict_proba(X_test)
        mi_test = clf.predict_uncertainty(X_test).mutual_information.mean()
        mi_shifted = clf.predict_uncertainty(shifted(X_test)).mutual_information.mean()
        print(f"{name:28s} {accuracy_score(y_test, proba.argmax(1)):8.3f} {log_loss(y_test, proba):8.3f} "
              f"{mi_test:8.3f} {mi_shifted:10.3f}")

    search = GridSearchCV(
        BayesianMLPClassifier(module=SmallCNN, inference=MCDropout(dropout_rate=0.2, **loop), **common),
        {"module_params": [{"width": 16}, {"width": 64}]},
        scoring="neg_log_loss",
        cv=3,
    ).fit(X_train, y_train)
    print(f"GridSearchCV over module_params: best {search.best_params_}, CV log loss {-search.best_score_:.3f}")


if __name__ == "__main__":
    main()
