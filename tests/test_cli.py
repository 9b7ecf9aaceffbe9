"""The ``skbayes`` command: end to end in a subprocess, error cases in process.

The subprocess runs (``python -m skbayes``, each importing torch) are two:
predict on a small CSV from a model file, and the run without a file. The rest goes
through click's CliRunner in this process, on the same tiny tables, with
fits of a few epochs.
"""

import os
import subprocess
import sys
from pathlib import Path

import joblib
import numpy as np
import pytest
from scipy.stats import norm
from sklearn.linear_model import BayesianRidge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

pd = pytest.importorskip("pandas")
click_testing = pytest.importorskip("click.testing")

from skbayes import _cli  # noqa: E402
from skbayes.metrics import interval_coverage  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

ROOT = Path(__file__).resolve().parents[1]
FIT_OPTIONS = ["--target", "y", "--exclude", "id,label", "-e", "mlp", "--max-iter", "30"]


def run_skbayes(*args, cwd):
    """``python -m skbayes ARGS`` in a subprocess, with this checkout on the path."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    return subprocess.run(
        [sys.executable, "-m", "skbayes", *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=300,
    )


def invoke(*args):
    """The command in this process (CliRunner), stdout and stderr apart."""
    return click_testing.CliRunner().invoke(_cli.make_cli(), [str(a) for a in args])


def metric_values(output):
    """evaluate's table as {metric: value}."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["metric", "value"])
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].strip()), len(lines))
    return {line.split()[0]: float(line.split()[1]) for line in lines[start + 1:end]
            if line.strip() and not line.startswith("saved ")}


def comparison_rows(output):
    """evaluate's baseline table as {model: {metric: value}}."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["model"])
    header = lines[start].split()[1:]
    rows = {}
    for line in lines[start + 1:]:
        if not line.strip() or line.startswith(("(", "saved ")):
            break
        values = line.split()
        name = " ".join(values[:len(values) - len(header)])
        rows[name] = dict(zip(header, map(float, values[len(values) - len(header):]), strict=True))
    return rows


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    """A 40-row training and a 20-row test table: numbers, a text category, a numeric and a text target."""
    folder = tmp_path_factory.mktemp("tables")
    rng = np.random.default_rng(0)
    n = 60
    frame = pd.DataFrame({
        "id": [f"r{i}" for i in range(n)],
        "x1": rng.normal(size=n),
        "x2": rng.normal(size=n),
        "color": np.tile(["red", "blue", "green"], n // 3),
    })
    frame["y"] = 2 * frame.x1 + (frame.color == "red") + rng.normal(scale=0.3, size=n)
    frame["label"] = np.where(frame.x1 + frame.x2 > 0, "pos", "neg")
    frame.iloc[:40].to_csv(folder / "train.csv", index=False)
    frame.iloc[40:].to_csv(folder / "test.csv", index=False)
    return folder


@pytest.fixture(scope="module")
def regression_run(tables):
    """fit here, predict in a subprocess from the file: the model file and the predictions CSV."""
    fit = invoke("fit", tables / "train.csv", *FIT_OPTIONS, "-o", tables / "reg.joblib")
    assert fit.exit_code == 0, fit.output
    assert "saved" in fit.stdout and "regression of 'y' on 3 features, 40 rows" in fit.stdout
    predict = run_skbayes("predict", "test.csv", "-m", "reg.joblib", "-o", "pred.csv", cwd=tables)
    assert predict.returncode == 0, predict.stderr
    return tables / "reg.joblib", tables / "pred.csv"


def test_regression_round_trip(tables, regression_run):
    model_path, predictions_path = regression_run
    predictions = pd.read_csv(predictions_path)
    test = pd.read_csv(tables / "test.csv")
    assert list(predictions.columns) == ["row", "mean", "std", "lower", "upper", "epistemic_std", "aleatoric_std"]
    np.testing.assert_array_equal(predictions["row"], np.arange(20))

    # The saved pipeline, loaded here, predicts what the command wrote.
    model = joblib.load(model_path)
    pipeline = model["pipeline"]
    assert model["features"] == ["x1", "x2", "color"] and model["categorical"] == ["color"]
    assert model["target"] == "y" and model["task"] == "regression"
    X = test[["x1", "x2", "color"]]
    mean, std = pipeline.predict(X, return_std=True)
    np.testing.assert_allclose(predictions["mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(predictions["std"], std, rtol=1e-12)
    # Three categories one-hot encoded beside two standardised numbers.
    assert pipeline[:-1].transform(X).shape == (20, 5)
    lower, upper = pipeline[-1].predict_interval(pipeline[:-1].transform(X), coverage=0.95)
    np.testing.assert_allclose(predictions["lower"], lower, rtol=1e-12)
    np.testing.assert_allclose(predictions["upper"], upper, rtol=1e-12)
    parts = pipeline[-1].predict_uncertainty(pipeline[:-1].transform(X))
    np.testing.assert_allclose(predictions["epistemic_std"], parts.epistemic_std, rtol=1e-12)
    np.testing.assert_allclose(predictions["aleatoric_std"], parts.aleatoric_std, rtol=1e-12)

    # evaluate's table agrees with the metrics computed from the CSV.
    result = invoke("evaluate", tables / "test.csv", "-m", model_path)
    assert result.exit_code == 0, result.output
    printed = metric_values(result.stdout)
    y = test["y"].to_numpy()
    assert printed["coverage"] == pytest.approx(
        interval_coverage(y, predictions["lower"], predictions["upper"]), abs=1e-6)
    assert printed["rmse"] == pytest.approx(np.sqrt(np.mean((y - predictions["mean"]) ** 2)), rel=1e-5)
    assert printed["interval_width"] == pytest.approx(np.mean(predictions["upper"] - predictions["lower"]), rel=1e-5)
    log_density = pipeline[-1].log_predictive_density(pipeline[:-1].transform(X), y)
    assert printed["log_likelihood"] == pytest.approx(np.mean(log_density), rel=1e-5)


def test_classification_round_trip(tables, tmp_path):
    model_path, predictions_path = tmp_path / "clf.joblib", tmp_path / "pred.csv"
    options = ["--target", "label", "--exclude", "id,y", "--max-iter", "20"]
    fit = invoke("fit", tables / "train.csv", *options, "-o", model_path)
    assert fit.exit_code == 0, fit.output
    assert "classes of 'label'" in fit.stdout
    result = invoke("predict", tables / "test.csv", "-m", model_path, "-o", predictions_path, "--id", "id")
    assert result.exit_code == 0, result.output
    predictions = pd.read_csv(predictions_path)
    assert list(predictions.columns) == [
        "id", "prediction", "proba_neg", "proba_pos",
        "predictive_entropy", "expected_entropy", "mutual_information", "variation_ratio",
    ]
    proba = predictions[["proba_neg", "proba_pos"]].to_numpy()
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(predictions["prediction"], np.array(["neg", "pos"])[proba.argmax(axis=1)])
    np.testing.assert_allclose(predictions["predictive_entropy"], -(proba * np.log(proba)).sum(axis=1), rtol=1e-6)
    np.testing.assert_allclose(predictions["variation_ratio"], 1 - proba.max(axis=1), rtol=1e-6)
    assert (predictions["mutual_information"] >= 0).all()

    result = invoke("evaluate", tables / "test.csv", "-m", model_path, "--figures", tmp_path / "figures",
                    "--predictions", tmp_path / "evaluated.csv")
    assert result.exit_code == 0, result.output
    evaluated = pd.read_csv(tmp_path / "evaluated.csv")
    np.testing.assert_array_equal(evaluated["row"], np.arange(20))
    pd.testing.assert_frame_equal(evaluated.iloc[:, 1:], predictions.iloc[:, 1:])
    assert (tmp_path / "figures" / "reliability.png").read_bytes().startswith(b"\x89PNG")
    printed = metric_values(result.stdout)
    y = pd.read_csv(tables / "test.csv")["label"].to_numpy()
    true_proba = np.where(y == "pos", predictions["proba_pos"], predictions["proba_neg"])
    assert printed["log_likelihood"] == pytest.approx(np.mean(np.log(true_proba)), rel=1e-5)
    assert printed["accuracy"] == pytest.approx(np.mean(predictions["prediction"] == y), abs=1e-6)


def test_no_file_runs_on_a_scikit_learn_dataset(tmp_path):
    # the main job as README gives it: the default model (the stacking of three families) at its defaults
    result = run_skbayes("--threads", "1", "evaluate", "--figures", "figures", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("calibration.png", "prediction_intervals.png"):
        assert (tmp_path / "figures" / name).read_bytes().startswith(b"\x89PNG")
    assert "diabetes (test split), 111 rows" in result.stdout
    printed = metric_values(result.stdout)
    assert set(printed) == {"log_likelihood", "rmse", "coverage", "interval_width", "calibration_error"}
    assert 0 <= printed["coverage"] <= 1 and printed["rmse"] > 0
    # beside it, the baselines fitted on the same rows: BayesianRidge's scores as scikit-learn gives them
    compared = comparison_rows(result.stdout)
    assert list(compared)[:3] == ["PredictiveStackingRegressor", "BayesianRidge", "exact GP"]
    assert compared["PredictiveStackingRegressor"]["log_likelihood"] == pytest.approx(printed["log_likelihood"],
                                                                                       abs=1e-3)
    train, test = _cli.load_dataset("diabetes", "train"), _cli.load_dataset("diabetes", "test")
    X_train, X_test = train.drop(columns="target"), test.drop(columns="target")
    ridge = make_pipeline(StandardScaler(), BayesianRidge()).fit(X_train, train["target"])
    mean, std = ridge.predict(X_test, return_std=True)
    expected = norm.logpdf(test["target"], mean, std).mean()
    assert compared["BayesianRidge"]["log_likelihood"] == pytest.approx(expected, rel=1e-3)
    assert compared["BayesianRidge"]["rmse"] == pytest.approx(np.sqrt(np.mean((test["target"] - mean) ** 2)), rel=1e-3)
    # Warnings, if any, are one line each: no source lines or tracebacks.
    assert all(line.startswith("Warning: ") for line in result.stderr.splitlines())


def test_dataset_splits_are_complementary():
    train, test = _cli.load_dataset("wine", "train"), _cli.load_dataset("wine", "test")
    assert len(train) + len(test) == 178 and not set(train.index) & set(test.index)
    assert set(test["target"]) == {0, 1, 2}


@pytest.mark.parametrize("name, task", [("sparse-gp", "regression"), ("sparse-gp", "classification"),
                                        ("deep-gp", "regression")])
def test_max_iter_of_the_gps_sets_their_variational_fit(name, task):
    from skbayes._cli.pipeline import make_estimator
    from skbayes.inference import SampledSparseGP, SparseVariational

    model = make_estimator(name, task, max_iter=3)
    assert isinstance(model.inference, SparseVariational) and model.inference.max_iter == 3
    if name == "sparse-gp":  # a sampled fit: the epochs of its variational start
        sampled = make_estimator(name, task, max_iter=4, params=[("inference", "sghmc")])
        assert isinstance(sampled.inference, SampledSparseGP) and sampled.inference.start.max_iter == 4


@pytest.mark.parametrize("values, task", [
    ([151.0, 75.0, 141.0, 206.0, 135.0] * 5 + list(range(100, 120)), "regression"),  # whole numbers, many
    ([0, 1, 1, 0, 2], "classification"),
    ([0.5, 1.25, 3.0], "regression"),
    (["a", "b", "a"], "classification"),
    ([True, False, True], "classification"),
])
def test_detect_task(values, task):
    assert _cli.detect_task(pd.Series(values)) == task


def _write(folder, name, frame):
    path = folder / name
    frame.to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def bad_files(tables, tmp_path_factory):
    """Broken variants of the training and test tables, and a fitted model."""
    folder = tmp_path_factory.mktemp("bad")
    train, test = pd.read_csv(tables / "train.csv"), pd.read_csv(tables / "test.csv")
    (folder / "empty.csv").write_text("")
    (folder / "header.csv").write_text("x1,x2,y\n")
    nan_target = train.copy()
    nan_target.loc[3, "y"] = np.nan
    free_text = train.assign(note=[f"note {i % 20}" for i in range(len(train))])
    dirty = train.astype({"x1": object})
    dirty.loc[5, "x1"] = "oops"
    unseen = test.copy()
    unseen.loc[unseen.index[2], "color"] = "purple"
    text_in_numbers = test.astype({"x2": object})
    text_in_numbers.loc[test.index[1], "x2"] = "oops"
    bool_in_numbers = test.assign(x2=np.arange(len(test)) % 2 == 0)
    unseen_class = test.copy()
    unseen_class.loc[test.index[0], "label"] = "maybe"
    files = {
        "empty": folder / "empty.csv", "header": folder / "header.csv",
        "nan_target": _write(folder, "nan_target.csv", nan_target),
        "free_text": _write(folder, "free_text.csv", free_text),
        "dirty": _write(folder, "dirty.csv", dirty),
        "unseen": _write(folder, "unseen.csv", unseen),
        "missing_column": _write(folder, "missing_column.csv", test.drop(columns="x2")),
        "text_in_numbers": _write(folder, "text_in_numbers.csv", text_in_numbers),
        "bool_in_numbers": _write(folder, "bool_in_numbers.csv", bool_in_numbers),
        "unseen_class": _write(folder, "unseen_class.csv", unseen_class),
        "train": tables / "train.csv", "test": tables / "test.csv",
        "reg": folder / "reg.joblib", "clf": folder / "clf.joblib",
    }
    assert invoke("fit", files["train"], *FIT_OPTIONS[:6], "--max-iter", "2", "-o", files["reg"]).exit_code == 0
    clf_options = ["--target", "label", "--exclude", "id,y", "--max-iter", "2", "-o", files["clf"]]
    assert invoke("fit", files["train"], *clf_options).exit_code == 0
    return files


@pytest.mark.parametrize("args, message", [
    (["fit", "{folder}/nope.csv", "-t", "y"], "nope.csv: no such file"),
    (["fit", "{empty}", "-t", "y"], "the file is empty"),
    (["fit", "{header}", "-t", "y"], "has a header but no rows"),
    (["fit", "{train}", "-t", "nope"], "no column 'nope' (--target)"),
    (["fit", "{train}"], "--target COLUMN is required"),
    (["fit", "{nan_target}", "-t", "y", "--exclude", "id"], "column 'y' has 1 missing value (row 3)"),
    (["fit", "{free_text}", "-t", "y", "--exclude", "id,label", "--max-categories", "10"],
     "'note' is non-numeric with 20 distinct values, more than --max-categories=10"),
    (["fit", "{train}", "-t", "y"], "'id' is non-numeric with a different value in every row"),
    (["fit", "{dirty}", "-t", "y", "--exclude", "id"], "'x1' looks numeric but holds 1 non-numeric value such as 'oops' (row 5)"),
    (["fit", "{train}", "-t", "label", "--exclude", "id", "--task", "regression"], "'label' is not numeric"),
    (["fit", "{train}", "-t", "y", "--exclude", "id", "-p", "nope=1"], "unknown parameter 'nope'"),
    (["fit", "{train}", "-t", "y", "--exclude", "id", "-e", "mlp", "-p", "prior_scale=-1"], "'prior_scale' parameter"),
    (["fit", "{train}", "-t", "y", "--exclude", "id,label", "--max-iter", "3"],
     "--max-iter does not apply to PredictiveStackingRegressor"),
    (["fit", "{train}", "-t", "y", "--exclude", "id", "-e", "nope"], "unknown estimator 'nope'"),
    (["fit", "{train}", "-t", "label", "--exclude", "id", "-e", "deep-gp"], "deep-gp does only regression"),
    (["predict", "{unseen}", "-m", "{reg}"], "'color' has categories not seen in fit: 'purple' (row 2)"),
    (["predict", "{missing_column}", "-m", "{reg}"], "lacks the column(s) 'x2'"),
    (["predict", "{text_in_numbers}", "-m", "{reg}"], "'x2' was numeric in fit but holds 'oops' (row 1)"),
    (["predict", "{bool_in_numbers}", "-m", "{reg}"], "'x2' was numeric in fit but is of type bool here"),
    (["predict", "{test}", "-m", "{train}"], "cannot be loaded as a model"),
    (["predict", "{test}", "-m", "{folder}/nope.joblib"], "no such model file"),
    (["predict", "-m", "{reg}"], "give a TABLE"),
    (["evaluate", "{unseen_class}", "-m", "{clf}"], "classes not seen in fit: 'maybe'"),
    (["evaluate", "{test}", "-m", "{reg}", "--max-iter", "3"], "--max-iter is a fit option"),
])
def test_bad_input_gives_one_line_error(bad_files, args, message):
    names = {key: str(path) for key, path in bad_files.items()}
    result = invoke(*[a.format(folder=bad_files["train"].parent, **names) for a in args])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("Error: "), result.stderr
    assert message in result.stderr


def test_parquet_without_engine_is_one_line(tables, monkeypatch, tmp_path):
    def no_engine(*args, **kwargs):
        raise ImportError("Unable to find a usable engine; tried using: 'pyarrow', 'fastparquet'.")

    path = tmp_path / "train.parquet"
    path.write_bytes(b"PAR1")
    monkeypatch.setattr(pd, "read_parquet", no_engine)
    result = invoke("fit", path, "-t", "y")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "reading Parquet needs pyarrow" in result.stderr


def test_missing_decompressor_is_not_called_a_parquet_problem(monkeypatch, tmp_path):
    def no_codec(*args, **kwargs):
        raise ImportError("Missing optional dependency 'zstandard'.")

    path = tmp_path / "train.csv.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd")
    monkeypatch.setattr(pd, "read_csv", no_codec)
    result = invoke("fit", path, "-t", "y")
    assert result.exit_code == 1 and result.stderr.count("\n") == 1
    assert "cannot read the file: Missing optional dependency 'zstandard'" in result.stderr
    assert "Parquet" not in result.stderr


def test_parquet_table_is_read(tables, tmp_path):
    pytest.importorskip("pyarrow")
    frame = pd.read_csv(tables / "train.csv")
    frame.to_parquet(tmp_path / "train.parquet")
    pd.testing.assert_frame_equal(_cli.read_table(tmp_path / "train.parquet"), frame)


def test_missing_click_is_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "click", None)
    with pytest.raises(SystemExit) as exit_info:
        _cli.main(["--help"])
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err == "Error: the skbayes command needs click: pip install 'skbayes[cli]'\n"


def test_evaluate_compares_a_classifier_with_logistic_regression():
    from sklearn.linear_model import LogisticRegression

    result = invoke("evaluate", "--dataset", "iris", "--max-iter", "5")
    assert result.exit_code == 0, result.output
    compared = comparison_rows(result.output)
    assert list(compared) == ["BayesianMLPClassifier", "LogisticRegression"]
    train, test = _cli.load_dataset("iris", "train"), _cli.load_dataset("iris", "test")
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
    model.fit(train.drop(columns="target"), train["target"])
    accuracy = np.mean(model.predict(test.drop(columns="target")) == test["target"])
    assert compared["LogisticRegression"]["accuracy"] == pytest.approx(accuracy, abs=1e-3)


def test_no_baselines_prints_the_model_alone():
    result = invoke("evaluate", "--dataset", "iris", "--max-iter", "2", "--no-baselines")
    assert result.exit_code == 0, result.output
    assert "baselines" not in result.output


def test_baselines_see_the_encoded_columns_of_a_categorical_feature():
    # "sex" one-hot encoded: 11 columns reach the models, and the exact GP's kernel must have 11 length scales
    result = invoke("evaluate", "--dataset", "diabetes", "--categorical", "sex", "-e", "mlp")
    assert result.exit_code == 0, result.output
    assert "exact GP" in comparison_rows(result.output)
