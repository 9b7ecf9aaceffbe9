"""skbayes.metrics displays: their arrays against the metrics and independent computations, their artists."""

import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402
from sklearn.base import BaseEstimator, RegressorMixin  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.linear_model import BayesianRidge, LinearRegression, LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

from skbayes import BayesianMLPClassifier, BayesianMLPRegressor  # noqa: E402
from skbayes.inference import MCDropout  # noqa: E402
from skbayes.metrics import (  # noqa: E402
    PredictionIntervalDisplay,
    RegressionCalibrationDisplay,
    ReliabilityDisplay,
    TrainingCurveDisplay,
    expected_calibration_error,
    miscalibration_area,
    regression_calibration_curve,
    reliability_diagram,
)

# Short fits that stop at max_iter are the point of these fast tests.
_short_fit = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _rows(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    return X, np.sin(2 * X[:, 0]) + 0.2 * rng.normal(size=n)


def _small_mlp(noise="auto", **loop):
    method = MCDropout(max_iter=4, learning_rate_init=0.01, n_mc_predict=10, **loop)
    return BayesianMLPRegressor((8,), inference=method, noise=noise, random_state=0)


class _UniformStub(RegressorMixin, BaseEstimator):
    """Test double whose predictive is Uniform(x0 - 1, x0 + 1), x0 the first feature.

    Its central interval of coverage c is x0 -/+ c. Its predict(X,
    return_std=True) is N(x0, 100^2), whose intervals hold everything: a
    display that used it instead of predict_interval would see coverage 1.
    """

    def fit(self, X, y):
        self.fitted_ = True
        return self

    def predict(self, X, return_std=False):
        mean = np.asarray(X)[:, 0]
        return (mean, np.full_like(mean, 100.0)) if return_std else mean

    def predict_interval(self, X, coverage=0.95):
        mean = np.asarray(X)[:, 0]
        return mean - coverage, mean + coverage


# ------------------------------------------------------ RegressionCalibrationDisplay
def test_regression_calibration_hand_computed_central_coverage():
    # N(0, 1) predictions. The central intervals of the levels 1/8, 3/8, 5/8, 7/8
    # are 0 -/+ 0.157, 0.489, 0.887, 1.534; of y = 0.1, -0.5, 1.0, -1.5, 2.5 they
    # hold {0.1}, {0.1}, {0.1, -0.5} and {0.1, -0.5, 1.0, -1.5}.
    y_true = np.array([0.1, -0.5, 1.0, -1.5, 2.5])
    display = RegressionCalibrationDisplay.from_predictions(
        y_true, np.zeros(5), y_std=np.ones(5), n_levels=4, name="N(0, 1)"
    )
    np.testing.assert_allclose(display.expected, [0.125, 0.375, 0.625, 0.875])
    np.testing.assert_allclose(display.observed, [0.2, 0.2, 0.4, 0.8])
    np.testing.assert_allclose(display.line_.get_xdata(), display.expected)
    np.testing.assert_allclose(display.line_.get_ydata(), display.observed)
    assert display.miscalibration_area == miscalibration_area(y_true, np.zeros(5), y_std=1.0, method="central")
    assert "miscalibration area = " in display.line_.get_label()
    np.testing.assert_allclose(display.ref_line_.get_xydata(), [[0, 0], [1, 1]])


@pytest.mark.parametrize("method", ["central", "quantile"])
def test_regression_calibration_from_predictions_matches_the_metric(method):
    rng = np.random.default_rng(1)
    mu, sigma = rng.normal(size=(2, 3)), rng.uniform(0.5, 2.0, size=(2, 3))
    y = mu + 1.5 * sigma * rng.normal(size=(2, 3))  # multi-output entries are pooled
    display = RegressionCalibrationDisplay.from_predictions(y, mu, y_std=sigma, n_levels=7, method=method)
    expected, observed = regression_calibration_curve(y, mu, y_std=sigma, n_levels=7, method=method)
    np.testing.assert_array_equal(display.expected, expected)
    np.testing.assert_array_equal(display.observed, observed)
    assert display.method == method


def test_regression_calibration_uses_the_estimators_own_intervals_through_a_pipeline():
    rng = np.random.default_rng(2)
    X = rng.normal(2.0, 3.0, size=(30, 2))
    y = rng.normal(size=30)
    model = make_pipeline(StandardScaler(), _UniformStub()).fit(X, y)
    centre = StandardScaler().fit(X).transform(X)[:, 0]  # what the stub sees
    display = RegressionCalibrationDisplay.from_estimator(model, X, y, n_levels=6)
    levels = (np.arange(6) + 0.5) / 6
    brute = [np.mean(np.abs(y - centre) <= p) for p in levels]
    np.testing.assert_allclose(display.observed, brute)
    assert display.estimator_name == "_UniformStub"
    np.testing.assert_allclose(display.miscalibration_area, np.mean(np.abs(np.array(brute) - levels)))
    # quantile levels: the p-quantile of Uniform(c - 1, c + 1) is c - 1 + 2p
    display = RegressionCalibrationDisplay.from_estimator(model, X, y, n_levels=6, method="quantile")
    np.testing.assert_allclose(display.observed, [np.mean(y <= centre - 1 + 2 * p) for p in levels])
    with pytest.raises(ValueError, match="even n_levels"):
        RegressionCalibrationDisplay.from_estimator(model, X, y, n_levels=5, method="quantile")


@_short_fit
def test_regression_calibration_gaussian_paths_agree():
    X, y = _rows()
    # BayesianRidge has no predict_interval: the Gaussian of predict(X, return_std=True)
    ridge = make_pipeline(StandardScaler(), BayesianRidge()).fit(X, y)
    display = RegressionCalibrationDisplay.from_estimator(ridge, X, y, n_levels=5)
    mean, std = ridge.predict(X, return_std=True)
    np.testing.assert_array_equal(
        display.observed, regression_calibration_curve(y, mean, y_std=std, n_levels=5, method="central")[1]
    )
    assert display.estimator_name == "BayesianRidge"
    # a homoscedastic MLP's predict_interval is the same Gaussian's: both paths give one curve
    mlp = _small_mlp(noise="homoscedastic").fit(X, y)
    mean, std = mlp.predict(X, return_std=True)
    display = RegressionCalibrationDisplay.from_estimator(mlp, X, y, n_levels=5)
    np.testing.assert_allclose(
        display.observed, regression_calibration_curve(y, mean, y_std=std, n_levels=5, method="central")[1]
    )


def test_regression_calibration_respects_ax_and_draws_the_diagonal_once():
    fig, ax = plt.subplots()
    y = np.linspace(-1, 1, 9)
    first = RegressionCalibrationDisplay.from_predictions(y, 0 * y, y_std=1.0, ax=ax, name="a")
    second = RegressionCalibrationDisplay.from_predictions(y, 0 * y, y_std=0.1, ax=ax, name="b", show_area=False)
    assert first.ax_ is ax and second.ax_ is ax and second.figure_ is fig
    assert first.ref_line_ is not None and second.ref_line_ is None
    assert second.line_.get_label() == "b"
    assert len(ax.get_lines()) == 3


def test_regression_calibration_errors():
    X, y = _rows(20)
    with pytest.raises(ValueError, match="regressor"):
        RegressionCalibrationDisplay.from_estimator(LogisticRegression().fit(X, y > 0), X, y)
    with pytest.raises(NotFittedError):
        RegressionCalibrationDisplay.from_estimator(BayesianRidge(), X, y)
    with pytest.raises(ValueError, match="return_std"):
        RegressionCalibrationDisplay.from_estimator(LinearRegression().fit(X, y), X, y)
    with pytest.raises(ValueError, match="same shape"):
        RegressionCalibrationDisplay.from_predictions(y, y[:-1], y_std=1.0)
    with pytest.raises(ValueError, match="same shape"):
        RegressionCalibrationDisplay.from_estimator(_UniformStub().fit(X, y), X, y[:-1])
    with pytest.raises(ValueError, match="method"):
        RegressionCalibrationDisplay.from_estimator(_UniformStub().fit(X, y), X, y, method="pit")


def test_missing_matplotlib_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # "import matplotlib.pyplot" now fails
    with pytest.raises(ImportError, match=r'pip install "skbayes\[plot\]"'):
        RegressionCalibrationDisplay.from_predictions([0.0, 1.0], [0.0, 0.0], y_std=1.0)
    with pytest.raises(ImportError, match="TrainingCurveDisplay.plot requires matplotlib"):
        TrainingCurveDisplay.from_predictions([1.0, 0.5])


# ------------------------------------------------------------ PredictionIntervalDisplay
def _band_edges(band, x):
    """Lowest and highest vertex of a fill_between polygon at each x."""
    vertices = band.get_paths()[0].vertices
    at = [vertices[np.isclose(vertices[:, 0], xi), 1] for xi in x]
    return np.array([v.min() for v in at]), np.array([v.max() for v in at])


def test_prediction_interval_bands_against_scipy():
    rng = np.random.default_rng(3)
    x = rng.permutation(np.linspace(0, 1, 8))
    y_pred, y_true = np.sin(3 * x), np.sin(3 * x) + 0.1 * rng.normal(size=8)
    epistemic, aleatoric = rng.uniform(0.05, 0.3, size=8), rng.uniform(0.05, 0.3, size=8)
    display = PredictionIntervalDisplay.from_predictions(
        y_true, y_pred, epistemic_std=epistemic, aleatoric_std=aleatoric, x=x, coverage=0.9
    )
    order = np.argsort(x)
    np.testing.assert_array_equal(display.order, order)
    np.testing.assert_array_equal(display.x, x[order])
    assert display.z == pytest.approx(stats.norm.ppf(0.95))
    total = np.sqrt(epistemic**2 + aleatoric**2)[order]
    lower, upper = stats.norm.interval(0.9, loc=y_pred[order], scale=total)
    np.testing.assert_allclose(display.lower, lower)
    np.testing.assert_allclose(display.upper, upper)
    lower, upper = stats.norm.interval(0.9, loc=y_pred[order], scale=epistemic[order])
    np.testing.assert_allclose(display.epistemic_lower, lower)
    np.testing.assert_allclose(display.epistemic_upper, upper)
    # the artists carry those arrays
    np.testing.assert_allclose(display.line_.get_xdata(), x[order])
    np.testing.assert_allclose(display.line_.get_ydata(), y_pred[order])
    np.testing.assert_allclose(display.scatter_.get_offsets(), np.column_stack([x, y_true])[order])
    np.testing.assert_allclose(np.column_stack(_band_edges(display.band_, display.x)),
                               np.column_stack([display.lower, display.upper]))
    np.testing.assert_allclose(np.column_stack(_band_edges(display.epistemic_band_, display.x)),
                               np.column_stack([display.epistemic_lower, display.epistemic_upper]))
    assert display.ax_.get_xlabel() == "x"


def test_prediction_interval_sorted_by_prediction_with_total_std_only():
    fig, ax = plt.subplots()
    y_pred = np.array([3.0, 1.0, 2.0])
    display = PredictionIntervalDisplay.from_predictions([2.5, 1.5, 2.0], y_pred, y_std=[0.3, 0.1, 0.2], ax=ax)
    assert display.ax_ is ax and display.figure_ is fig
    np.testing.assert_array_equal(display.x, [0.0, 1.0, 2.0])
    np.testing.assert_array_equal(display.y_pred, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(display.y_true, [1.5, 2.0, 2.5])
    np.testing.assert_allclose(display.upper, [1.0, 2.0, 3.0] + stats.norm.ppf(0.975) * np.array([0.1, 0.2, 0.3]))
    assert display.epistemic_band_ is None and display.epistemic_lower is None
    assert display.ax_.get_xlabel() == "rank of the prediction"


@_short_fit
def test_prediction_interval_from_estimator_uses_predict_uncertainty_through_a_pipeline():
    X, y = _rows()
    model = make_pipeline(StandardScaler(), _small_mlp()).fit(X, y)
    display = PredictionIntervalDisplay.from_estimator(model, X, y, feature=1)
    u = model[-1].predict_uncertainty(model[0].transform(X))
    order = np.argsort(X[:, 1])
    np.testing.assert_array_equal(display.x, X[order, 1])  # the raw feature, not the scaled one
    np.testing.assert_allclose(display.y_pred, u.mean[order])
    np.testing.assert_allclose(display.y_std, u.std[order], rtol=1e-6)
    np.testing.assert_allclose(display.epistemic_upper, (u.mean + display.z * u.epistemic_std)[order])
    assert display.ax_.get_xlabel() == "feature 1"
    # without predict_uncertainty: predict(X, return_std=True), total band only
    ridge = BayesianRidge().fit(X, y)
    display = PredictionIntervalDisplay.from_estimator(ridge, X, y, coverage=0.5)
    mean, std = ridge.predict(X, return_std=True)
    order = np.argsort(mean, kind="stable")
    np.testing.assert_allclose(display.lower, stats.norm.interval(0.5, loc=mean, scale=std)[0][order])
    assert display.epistemic_band_ is None


def test_prediction_interval_errors():
    y = np.arange(4.0)
    with pytest.raises(ValueError, match="both epistemic_std and aleatoric_std"):
        PredictionIntervalDisplay.from_predictions(y, y, epistemic_std=1.0)
    with pytest.raises(ValueError, match="not both"):
        PredictionIntervalDisplay.from_predictions(y, y, y_std=1.0, aleatoric_std=1.0)
    with pytest.raises(ValueError, match="one output"):
        PredictionIntervalDisplay.from_predictions(np.ones((4, 2)), np.ones((4, 2)), y_std=1.0)
    with pytest.raises(ValueError, match="non-negative"):
        PredictionIntervalDisplay.from_predictions(y, y, y_std=[1.0, -1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="same shape"):
        PredictionIntervalDisplay.from_predictions(y, y[:3], y_std=1.0)
    with pytest.raises(ValueError, match="one entry per row"):
        PredictionIntervalDisplay.from_predictions(y, y, y_std=1.0, x=y[:3])
    with pytest.raises(ValueError, match="coverage"):
        PredictionIntervalDisplay.from_predictions(y, y, y_std=1.0, coverage=1.5)
    X, target = _rows(20)
    with pytest.raises(ValueError, match="regressor"):
        PredictionIntervalDisplay.from_estimator(LogisticRegression().fit(X, target > 0), X, target)
    with pytest.raises(NotFittedError):
        PredictionIntervalDisplay.from_estimator(make_pipeline(StandardScaler(), BayesianRidge()), X, target)


# ----------------------------------------------------------------- ReliabilityDisplay
def _brute_force_bins(y_index, proba, values, edges):
    """Per-bin mean confidence, accuracy and mean of values, by looping over the bins."""
    confidence = proba.max(axis=1)
    correct = proba.argmax(axis=1) == y_index
    rows = []
    for b in range(len(edges) - 1):
        inside = (confidence > edges[b]) & (confidence <= edges[b + 1])
        if b == 0:
            inside |= confidence == edges[0]
        if inside.any():
            rows.append([confidence[inside].mean(), correct[inside].mean(), values[inside].mean()])
        else:
            rows.append([np.nan] * 3)
    return np.array(rows)


def test_reliability_bins_against_brute_force():
    rng = np.random.default_rng(4)
    proba = rng.dirichlet([0.5, 0.5, 0.5], size=300)
    y = np.array([rng.choice(3, p=p) for p in proba])
    spread = rng.uniform(size=300)
    display = ReliabilityDisplay.from_predictions(y, proba, uncertainty={"spread": spread}, n_bins=8, name="d")
    brute = _brute_force_bins(y, proba, spread, np.linspace(0, 1, 9))
    np.testing.assert_allclose(np.column_stack([display.confidence, display.accuracy, display.uncertainty["spread"]]),
                               brute, equal_nan=True)
    diagram = reliability_diagram(y, proba, n_bins=8)
    np.testing.assert_array_equal(display.count, diagram.count)
    assert display.ece == expected_calibration_error(y, proba, n_bins=8)
    filled = display.count > 0
    np.testing.assert_allclose(display.line_.get_xdata(), brute[filled, 0])
    np.testing.assert_allclose(display.line_.get_ydata(), brute[filled, 1])
    np.testing.assert_allclose(display.uncertainty_lines_["spread"].get_ydata(), brute[filled, 2])
    assert f"ECE = {display.ece:.3f}" in display.line_.get_label()
    assert display.uncertainty_ax_ is not display.ax_


@_short_fit
def test_reliability_from_estimator_measures():
    X, y = _rows(60)
    labels = np.where(y > 0.3, "high", np.where(y < -0.3, "low", "mid"))
    classifier = BayesianMLPClassifier((8,), inference=MCDropout(max_iter=4, n_mc_predict=10), random_state=0)
    model = make_pipeline(StandardScaler(), classifier).fit(X, labels)
    fig, ax = plt.subplots()
    display = ReliabilityDisplay.from_estimator(model, X, labels, n_bins=5, ax=ax)
    assert display.ax_ is ax and display.estimator_name == "BayesianMLPClassifier"
    u = model[-1].predict_uncertainty(model[0].transform(X))
    assert list(display.uncertainty) == ["predictive_entropy", "mutual_information"]
    index = np.searchsorted(model.classes_, labels)
    edges = np.linspace(0, 1, 6)
    for key in display.uncertainty:
        brute = _brute_force_bins(index, u.proba, u[key], edges)
        np.testing.assert_allclose(display.uncertainty[key], brute[:, 2], rtol=1e-6, equal_nan=True)
    np.testing.assert_allclose(display.accuracy, brute[:, 1], equal_nan=True)
    # a classifier without predict_uncertainty: the entropy of predict_proba only
    logistic = LogisticRegression().fit(X, labels)
    display = ReliabilityDisplay.from_estimator(logistic, X, labels, n_bins=5)
    proba = logistic.predict_proba(X)
    brute = _brute_force_bins(index, proba, stats.entropy(proba, axis=1), edges)
    np.testing.assert_allclose(display.uncertainty["predictive_entropy"], brute[:, 2], equal_nan=True)
    assert list(display.uncertainty) == ["predictive_entropy"]
    with pytest.raises(ValueError, match="mutual_information"):
        ReliabilityDisplay.from_estimator(logistic, X, labels, measures=["mutual_information"])
    display = ReliabilityDisplay.from_estimator(logistic, X, labels, measures=())
    assert display.uncertainty_ax_ is None and display.uncertainty_lines_ == {}


def test_reliability_errors():
    X, y = _rows(20)
    with pytest.raises(ValueError, match="classifier"):
        ReliabilityDisplay.from_estimator(BayesianRidge().fit(X, y), X, y)
    with pytest.raises(NotFittedError):
        ReliabilityDisplay.from_estimator(LogisticRegression(), X, y > 0)
    with pytest.raises(ValueError, match=r"shape \(n_samples,\)"):
        ReliabilityDisplay.from_predictions([0, 1], [0.2, 0.7], uncertainty={"h": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match="sum to 1"):
        ReliabilityDisplay.from_predictions([0, 1], [[0.2, 0.7], [0.5, 0.5]])


# --------------------------------------------------------------- TrainingCurveDisplay
@_short_fit
def test_training_curve_from_estimator_through_a_pipeline():
    X, y = _rows()
    model = make_pipeline(StandardScaler(), _small_mlp(early_stopping=True, validation_fraction=0.25)).fit(X, y)
    mlp = model[-1]
    display = TrainingCurveDisplay.from_estimator(model)
    np.testing.assert_array_equal(display.loss_curve, mlp.loss_curve_)
    np.testing.assert_array_equal(display.validation_scores, mlp.validation_scores_)
    np.testing.assert_array_equal(display.epochs, np.arange(1, mlp.n_iter_ + 1))
    np.testing.assert_array_equal(display.line_.get_xdata(), display.epochs)
    np.testing.assert_array_equal(display.line_.get_ydata(), mlp.loss_curve_)
    np.testing.assert_array_equal(display.validation_line_.get_ydata(), mlp.validation_scores_)
    assert display.validation_ax_ is not display.ax_
    assert display.ax_.get_legend() is not None and len(display.ax_.get_legend().get_texts()) == 2
    fig, ax = plt.subplots()
    display = TrainingCurveDisplay.from_estimator(mlp, ax=ax, secondary_axis=False)
    assert display.ax_ is ax and display.validation_ax_ is ax and display.figure_ is fig
    no_validation = _small_mlp().fit(X, y)
    display = TrainingCurveDisplay.from_estimator(no_validation)
    assert display.validation_scores is None and display.validation_line_ is None


def test_training_curve_from_predictions_aligns_validation_with_the_last_epochs():
    display = TrainingCurveDisplay.from_predictions([5.0, 4.0, 3.0, 2.5], validation_scores=[-1.0, -0.5], name="m")
    np.testing.assert_array_equal(display.validation_epochs, [3, 4])
    np.testing.assert_array_equal(display.validation_line_.get_xdata(), [3, 4])
    assert display.line_.get_label() == "m: training loss"


def test_training_curve_errors():
    X, y = _rows(20)
    with pytest.raises(ValueError, match="loss_curve_"):
        TrainingCurveDisplay.from_estimator(LinearRegression().fit(X, y))
    with pytest.raises(NotFittedError):
        TrainingCurveDisplay.from_estimator(make_pipeline(StandardScaler(), _small_mlp()))
    with pytest.raises(ValueError, match="more validation scores"):
        TrainingCurveDisplay.from_predictions([1.0], validation_scores=[1.0, 2.0])
    with pytest.raises(ValueError, match="1-D"):
        TrainingCurveDisplay.from_predictions([[1.0, 2.0]])
