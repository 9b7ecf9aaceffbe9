"""The baselines ``skbayes evaluate`` prints beside the fitted model: the tools a tabular user already has."""

import time
import warnings
from numbers import Integral, Real

from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import train_test_split
from sklearn.utils.validation import check_is_fitted, validate_data

from .._param_validation import Interval, _fit_context
from ..ensemble._stacking import EXACT_GP_MAX_ROWS, exact_gaussian_process
from .report import classification_scores, regression_scores


class NGBoostPaperProtocol(RegressorMixin, BaseEstimator):
    """NGBoost's regressor under the protocol of its paper's UCI experiments.

    Duan et al. 2020 ("NGBoost: natural gradient boosting for probabilistic
    prediction", ICML, section 5.1): a Normal predictive, trees of depth 3,
    learning rate 0.01, up to 2,000 boosting iterations, the number of
    iterations chosen on a validation split of the training rows (here
    ``validation_fraction`` of them, stopping ``early_stopping_rounds``
    iterations after the best validation log score), then the model refitted
    on all the training rows with that number. This is NGBoost at its best
    on these sets; its defaults (500 iterations, no validation) are weaker.
    Needs ``ngboost`` (``pip install ngboost``).

    Parameters
    ----------
    n_estimators : int, default=2000
        Most boosting iterations.
    learning_rate : float, default=0.01
    validation_fraction : float, default=0.2
        Share of the training rows held out to choose the iterations.
    early_stopping_rounds : int, default=50
        Iterations without a better validation score before stopping.
    random_state : int or None, default=0

    Attributes
    ----------
    n_estimators_ : int
        The chosen number of boosting iterations.
    model_ : ngboost.NGBRegressor
        Fitted on all the rows with ``n_estimators_`` iterations.
    """

    _parameter_constraints = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
        "early_stopping_rounds": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_estimators=2000, learning_rate=0.01, validation_fraction=0.2, early_stopping_rounds=50,
                 random_state=0):
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.validation_fraction = validation_fraction
        self.early_stopping_rounds = early_stopping_rounds
        self.random_state = random_state

    def _ngboost(self, n_estimators):
        from ngboost import NGBRegressor

        return NGBRegressor(n_estimators=n_estimators, learning_rate=self.learning_rate,
                            random_state=self.random_state, verbose=False)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Choose the number of iterations on a validation split, then refit on all the rows.

        Raises
        ------
        ImportError
            If ngboost is not installed.
        """
        X, y = validate_data(self, X, y, y_numeric=True)
        X_fit, X_val, y_fit, y_val = train_test_split(X, y, test_size=self.validation_fraction,
                                                      random_state=self.random_state)
        probe = self._ngboost(self.n_estimators).fit(X_fit, y_fit, X_val=X_val, Y_val=y_val,
                                                     early_stopping_rounds=self.early_stopping_rounds)
        self.n_estimators_ = int(probe.best_val_loss_itr) + 1
        self.model_ = self._ngboost(self.n_estimators_).fit(X, y)
        return self

    def predict(self, X, return_std=False):
        """Mean of the Normal predictive, and optionally its standard deviation (units of y)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        params = self.model_.pred_dist(X).params
        return (params["loc"], params["scale"]) if return_std else params["loc"]


def _ngboost_installed():
    try:
        import ngboost  # noqa: F401
    except ImportError:
        return False
    return True


def baseline_estimators(task, n_rows, n_features, random_state=0):
    """The baselines of a task, as (name, unfitted estimator) pairs, and notes on those left out.

    Regression: scikit-learn's ``BayesianRidge``; its exact GP (C * ARD RBF
    + white noise, :func:`~skbayes.ensemble._stacking.exact_gaussian_process`)
    up to 2,000 rows; NGBoost under its paper's protocol
    (:class:`NGBoostPaperProtocol`) when ngboost is installed.
    Classification: scikit-learn's ``LogisticRegression()``.
    """
    from sklearn.linear_model import BayesianRidge, LogisticRegression

    if task == "classification":
        return [("LogisticRegression", LogisticRegression(max_iter=1000))], []
    baselines, notes = [("BayesianRidge", BayesianRidge())], []
    if n_rows <= EXACT_GP_MAX_ROWS:
        baselines.append(("exact GP", exact_gaussian_process(n_features, random_state)))
    else:
        notes.append(f"exact GP left out: more than {EXACT_GP_MAX_ROWS} training rows")
    if _ngboost_installed():
        baselines.append(("NGBoost", NGBoostPaperProtocol(random_state=random_state)))
    else:
        notes.append("NGBoost left out: not installed (pip install ngboost)")
    return baselines, notes


def baseline_metrics(model, estimator, train, test, y_test, coverage):
    """evaluate's metrics of ``estimator`` behind the model's own preprocessing, fitted on ``train``.

    Parameters
    ----------
    model : dict
        The fitted model of :func:`~skbayes._cli.pipeline.fit_table` (its
        preprocessing step, target and features are reused).
    estimator : estimator
        An unfitted baseline.
    train, test : pandas.DataFrame
        The training and the held-out table.
    y_test : ndarray
        The held-out target.
    coverage : float

    Returns
    -------
    metrics : dict of str to float
        The keys of :func:`~skbayes._cli.report.evaluate_table`'s metrics
        that the baseline has (regression: ``log_likelihood`` of its
        Gaussian or own predictive, ``rmse``, ``coverage``,
        ``interval_width``; classification: ``log_likelihood``,
        ``accuracy``, ``calibration_error``), and ``fit_seconds``.
    """
    from ..metrics._scorer import _central_interval, _mean_log_predictive_density

    pipeline = clone(model["pipeline"]).set_params(estimator=estimator)
    X_train, X_test = train[model["features"]], test[model["features"]]
    y_train = train[model["target"]].to_numpy()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a baseline's convergence notes are not the user's model's
        pipeline.fit(X_train, y_train.astype(float) if model["task"] == "regression" else y_train)
    seconds = time.perf_counter() - start
    if model["task"] == "regression":
        lower, upper = _central_interval(pipeline, X_test, coverage)
        metrics = regression_scores(y_test, _mean_log_predictive_density(pipeline, X_test, y_test),
                                    pipeline.predict(X_test), lower, upper)
    else:
        metrics = classification_scores(y_test, pipeline.predict_proba(X_test), pipeline.predict(X_test),
                                        list(pipeline.classes_))
    metrics["fit_seconds"] = seconds
    return metrics


def format_comparison(name, metrics, baselines, notes):
    """The comparison table: one row per model (the fitted one first), one column per metric.

    Parameters
    ----------
    name : str
        The fitted model's name.
    metrics : dict of str to float
        Its metrics (of :func:`~skbayes._cli.report.evaluate_table`).
    baselines : list of (str, dict)
        Each baseline's metrics (:func:`baseline_metrics`).
    notes : list of str
        Printed under the table.

    Returns
    -------
    table : str
    """
    columns = [key for key in metrics if key != "fit_seconds" and all(key in m for _, m in baselines)] + ["fit_seconds"]
    rows = [["model", *columns], [name, *(f"{metrics[k]:.4g}" if k in metrics else "" for k in columns)]]
    rows += [[label, *(f"{m[k]:.4g}" for k in columns)] for label, m in baselines]
    width = [max(len(r[i]) for r in rows) for i in range(len(columns) + 1)]
    lines = ["  ".join(f"{cell:<{width[0]}}" if i == 0 else f"{cell:>{width[i]}}" for i, cell in enumerate(r)).rstrip()
             for r in rows]
    return "\n".join(lines + [f"({note})" for note in notes])
