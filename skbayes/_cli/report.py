"""Predicting a table and the evaluation report (metrics, their table, the figures)."""

from pathlib import Path

import numpy as np

from ._common import _pandas, _quote_list, _rows
from .pipeline import _check_missing


def _features_of(model, frame, source):
    """The feature columns of a table to predict, checked against the model."""
    pd = _pandas()
    missing = [c for c in model["features"] if c not in frame.columns]
    if missing:
        raise ValueError(f"{source}: lacks the column(s) {_quote_list(missing)} that the model was fitted on")
    X = frame[model["features"]]
    _check_missing(frame, model["features"], source)
    encoder = dict(model["pipeline"].named_steps["preprocess"].named_transformers_).get("categorical")
    for column in model["features"]:
        values = X[column]
        if column in model["categorical"]:
            known = encoder.categories_[model["categorical"].index(column)]
            unseen = ~values.isin(known)
            if unseen.any():
                new = list(dict.fromkeys(values[unseen]))
                raise ValueError(
                    f"{source}: column '{column}' has categories not seen in fit: {_quote_list(new, 3)} "
                    f"({_rows(values.index[unseen])})"
                )
        elif not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            bad = values[pd.to_numeric(values, errors="coerce").isna()]
            if bad.empty:  # true/false, or numbers stored as text
                raise ValueError(f"{source}: column '{column}' was numeric in fit but is of type {values.dtype} here")
            raise ValueError(
                f"{source}: column '{column}' was numeric in fit but holds {bad.iloc[0]!r} (row {bad.index[0]})"
            )
    return X


def predict_table(model, frame, *, coverage=0.95, id_column=None, source="TABLE"):
    """Predictions for every row of a table, as a DataFrame for CSV.

    Parameters
    ----------
    model : dict
        From :func:`fit_table` or :func:`load_model`.
    frame : pandas.DataFrame
        The table; it must hold the model's feature columns (others, the
        target included, are ignored).
    coverage : float, default=0.95
        Nominal coverage of the central interval, in (0, 1).
    id_column : str, default=None
        A column of the table copied to the first output column; None
        writes ``row``, each row's index in the table (0, 1, ... for a
        file).

    Returns
    -------
    predictions : pandas.DataFrame
        One row per input row. Regression: ``mean`` and ``std`` (the
        predictive mean and standard deviation, noise included, units of
        y; ``predict(X, return_std=True)``) and ``lower``, ``upper`` (the
        central ``coverage`` interval of ``predict_interval``, the
        predictive's quantiles where the estimator has them, else ``mean
        -/+ z std``), ``epistemic_std`` and ``aleatoric_std`` (the model
        and noise parts of ``std`` from ``predict_uncertainty``, units of
        y). Classification: ``prediction`` (the most probable
        class), ``proba_<class>`` for each class (``predict_proba``, rows
        sum to 1) and the uncertainty measures of ``predict_uncertainty``
        in nats: ``predictive_entropy`` (total), ``expected_entropy``
        (aleatoric), ``mutual_information`` (epistemic) and
        ``variation_ratio``.

    Raises
    ------
    ValueError
        If a feature column is missing or has missing values, a numeric
        feature holds text, a categorical feature holds a category not
        seen in fit, or ``id_column`` is not a column.
    """
    from ..metrics._scorer import _central_interval

    pd = _pandas()
    X = _features_of(model, frame, source)
    pipeline = model["pipeline"]
    if id_column is None:
        out = pd.DataFrame({"row": frame.index})
    elif id_column not in frame.columns:
        raise ValueError(f"{source}: no column '{id_column}' (--id)")
    else:
        out = pd.DataFrame({id_column: frame[id_column].to_numpy()})
    # X goes through the preprocessing once, and the estimator's predictive pass runs once: every
    # estimator of ESTIMATORS has predict_uncertainty, whose mean and std are predict(X, return_std=True)'s.
    estimator, Xt = pipeline[-1], pipeline[:-1].transform(X)
    parts = estimator.predict_uncertainty(Xt)
    if model["task"] == "regression":
        lower, upper = _central_interval(estimator, Xt, coverage)
        out["mean"], out["std"], out["lower"], out["upper"] = parts.mean, parts.std, lower, upper
        out["epistemic_std"], out["aleatoric_std"] = parts.epistemic_std, parts.aleatoric_std
        return out
    proba = estimator.predict_proba(Xt)
    out["prediction"] = estimator.classes_[proba.argmax(axis=1)]  # what predict returns, without a second pass
    for j, label in enumerate(model["classes"]):
        out[f"proba_{label}"] = proba[:, j]
    for name in ("predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio"):
        out[name] = parts[name]
    return out


# Rows of evaluate's table: key -> description ({coverage} is filled in).
_METRICS = {
    "regression": {
        "log_likelihood": "test log-likelihood, mean log p(y | x) per row (nats)",
        "rmse": "root mean squared error of the mean (units of y)",
        "coverage": "fraction of y inside the central {coverage} interval",
        "interval_width": "mean width of the central {coverage} interval (units of y)",
        "calibration_error": "RMS gap of observed to nominal coverage, central intervals of N(mean, std^2), 20 levels",
    },
    "classification": {
        "log_likelihood": "test log-likelihood, mean log p(y | x) per row (nats) = -log loss",
        "accuracy": "fraction of rows whose most probable class is y",
        "calibration_error": "expected calibration error of the top-label probability, 15 bins",
        "mean_predictive_entropy": "mean predictive entropy (nats)",
        "mean_mutual_information": "mean mutual information, the epistemic part (nats)",
    },
}


def _target_of(model, frame, source):
    target = model["target"]
    if target not in frame.columns:
        raise ValueError(f"{source}: no target column '{target}' to evaluate against")
    _check_missing(frame, [target], source)
    y = frame[target]
    if model["task"] == "classification":
        unseen = ~y.isin(model["classes"])
        if unseen.any():
            new = list(dict.fromkeys(y[unseen]))
            raise ValueError(f"{source}: the target holds classes not seen in fit: {_quote_list(new, 3)}")
        return y.to_numpy()
    pd = _pandas()
    if not pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y):
        raise ValueError(f"{source}: the target '{target}' is not numeric")
    return y.to_numpy(dtype=float)


def evaluate_table(model, frame, *, coverage=0.95, source="TABLE"):
    """Scores of a fitted model on a held-out table.

    Parameters
    ----------
    model : dict
        From :func:`fit_table` or :func:`load_model`.
    frame : pandas.DataFrame
        The held-out table, with the target column and the feature columns.
    coverage : float, default=0.95
        Nominal coverage of the central interval (regression).

    Returns
    -------
    metrics : dict of str to float
        Regression: ``log_likelihood`` (the mean over rows of the
        estimator's ``log_predictive_density``, nats per row), ``rmse``,
        ``coverage`` (:func:`~skbayes.metrics.interval_coverage` of the
        ``lower``/``upper`` columns of :func:`predict_table`),
        ``interval_width`` (:func:`~skbayes.metrics.mean_interval_width`)
        and ``calibration_error``
        (:func:`~skbayes.metrics.regression_calibration_error` of the
        central intervals of N(mean, std^2), as in the calibration figure). Classification: ``log_likelihood`` (minus
        :func:`sklearn.metrics.log_loss`), ``accuracy``,
        ``calibration_error``
        (:func:`~skbayes.metrics.expected_calibration_error`) and the
        means of ``predictive_entropy`` and ``mutual_information``.
    predictions : pandas.DataFrame
        :func:`predict_table` of the table.
    y : ndarray of shape (n_rows,)
        The target column.

    Raises
    ------
    ValueError
        As :func:`predict_table`, and if the target column is missing,
        has missing values, is not numeric (regression) or holds classes
        not seen in fit.
    """
    from ..metrics import regression_calibration_error
    from ..metrics._scorer import _mean_log_predictive_density

    y = _target_of(model, frame, source)
    predictions = predict_table(model, frame, coverage=coverage, source=source)
    if model["task"] == "regression":
        mean, std = predictions["mean"].to_numpy(), predictions["std"].to_numpy()
        X = frame[model["features"]]
        metrics = regression_scores(y, _mean_log_predictive_density(model["pipeline"], X, y), mean,
                                    predictions["lower"].to_numpy(), predictions["upper"].to_numpy())
        metrics["calibration_error"] = regression_calibration_error(y, mean, y_std=std, method="central")
    else:
        classes = model["classes"]
        proba = predictions[[f"proba_{c}" for c in classes]].to_numpy()
        metrics = classification_scores(y, proba, predictions["prediction"].to_numpy(), classes)
        for name in ("predictive_entropy", "mutual_information"):
            if name in predictions:
                metrics[f"mean_{name}"] = float(predictions[name].mean())
    return metrics, predictions, y


def regression_scores(y, log_likelihood, mean, lower, upper):
    """evaluate's scores of a regressor's predictions: the ones its baselines have too.

    Parameters
    ----------
    y, mean, lower, upper : ndarray of shape (n_rows,)
        Targets, predictive means and the central interval's bounds (units of y).
    log_likelihood : float
        The mean log predictive density of y (nats per row).

    Returns
    -------
    metrics : dict of str to float
        ``log_likelihood``, ``rmse``, ``coverage``
        (:func:`~skbayes.metrics.interval_coverage`) and ``interval_width``
        (:func:`~skbayes.metrics.mean_interval_width`).
    """
    from ..metrics import interval_coverage, mean_interval_width

    return {
        "log_likelihood": float(log_likelihood),
        "rmse": float(np.sqrt(np.mean((y - mean) ** 2))),
        "coverage": interval_coverage(y, lower, upper),
        "interval_width": mean_interval_width(lower, upper),
    }


def classification_scores(y, proba, prediction, classes):
    """evaluate's scores of a classifier's predictions: the ones its baselines have too.

    Parameters
    ----------
    y, prediction : ndarray of shape (n_rows,)
        True and predicted classes.
    proba : ndarray of shape (n_rows, n_classes)
        Class probabilities, columns in the order of ``classes``.
    classes : list

    Returns
    -------
    metrics : dict of str to float
        ``log_likelihood`` (minus :func:`sklearn.metrics.log_loss`),
        ``accuracy`` and ``calibration_error``
        (:func:`~skbayes.metrics.expected_calibration_error`).
    """
    from sklearn.metrics import accuracy_score, log_loss

    from ..metrics import expected_calibration_error

    return {
        "log_likelihood": -float(log_loss(y, proba, labels=classes)),
        "accuracy": float(accuracy_score(y, prediction)),
        "calibration_error": expected_calibration_error(y, proba, labels=classes),
    }


def format_metrics(metrics, task, coverage):
    """evaluate's table: one line per metric, ``name  value  description``.

    Parameters
    ----------
    metrics : dict of str to float
        From :func:`evaluate_table`.
    task : {"regression", "classification"}
    coverage : float
        The nominal coverage, for the descriptions.

    Returns
    -------
    table : str
        A header line and one line per metric, values with 6 significant
        digits.
    """
    percent = f"{100 * coverage:g}%"
    rows = [("metric", "value", "description")]
    for key, value in metrics.items():
        description = _METRICS[task].get(key, "").format(coverage=percent)
        rows.append((key, f"{value:.6g}", description))
    width = [max(len(r[i]) for r in rows) for i in range(2)]
    return "\n".join(f"{r[0]:<{width[0]}}  {r[1]:>{width[1]}}  {r[2]}".rstrip() for r in rows)


def save_figures(model, y, predictions, directory, *, coverage=0.95, name=None):
    """Save evaluate's calibration figures as PNG files.

    Regression: ``calibration.png``
    (:class:`~skbayes.metrics.RegressionCalibrationDisplay` of N(mean,
    std^2)) and ``prediction_intervals.png``
    (:class:`~skbayes.metrics.PredictionIntervalDisplay`, rows sorted by
    the mean, the epistemic band shaded apart from the total where the
    predictions have ``epistemic_std``). Classification: ``reliability.png``
    (:class:`~skbayes.metrics.ReliabilityDisplay` with the mean predictive
    entropy and mutual information per bin).

    Parameters
    ----------
    model : dict
        From :func:`fit_table` or :func:`load_model`.
    y : ndarray of shape (n_rows,)
        The observed targets.
    predictions : pandas.DataFrame
        :func:`predict_table` of the rows.
    directory : str or os.PathLike
        Created if missing.
    coverage : float, default=0.95
        The interval's nominal coverage.
    name : str, default=None
        Legend name; defaults to the estimator's class name.

    Returns
    -------
    paths : list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If matplotlib is not installed.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ValueError("--figures needs matplotlib (pip install 'skbayes[plot]')") from exc
    from ..metrics import PredictionIntervalDisplay, RegressionCalibrationDisplay, ReliabilityDisplay

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    name = name or type(model["pipeline"][-1]).__name__
    figures = {}
    if model["task"] == "regression":
        mean, std = predictions["mean"].to_numpy(), predictions["std"].to_numpy()
        figures["calibration.png"] = RegressionCalibrationDisplay.from_predictions(
            y, mean, y_std=std, name=name, ax=Figure().subplots()
        )
        if "epistemic_std" in predictions:
            bands = {"epistemic_std": predictions["epistemic_std"].to_numpy(),
                     "aleatoric_std": predictions["aleatoric_std"].to_numpy()}
        else:
            bands = {"y_std": std}
        figures["prediction_intervals.png"] = PredictionIntervalDisplay.from_predictions(
            y, mean, **bands, coverage=coverage, name=name, ax=Figure().subplots()
        )
    else:
        classes = model["classes"]
        proba = predictions[[f"proba_{c}" for c in classes]].to_numpy()
        uncertainty = {k: predictions[k].to_numpy() for k in ("predictive_entropy", "mutual_information")
                       if k in predictions}
        figures["reliability.png"] = ReliabilityDisplay.from_predictions(
            y, proba, uncertainty=uncertainty or None, labels=classes, name=name, ax=Figure().subplots()
        )
    paths = []
    for filename, display in figures.items():
        path = directory / filename
        display.figure_.savefig(path, dpi=120, bbox_inches="tight")
        paths.append(path)
    return paths
