"""The click wiring of the ``skbayes`` command and :func:`main`."""

import importlib.util
import sys
import warnings
from pathlib import Path

from ._common import _DEFAULT_DATASET, DATASETS, MAX_CATEGORIES, _estimator_names, _first_line

# The modules that do the work (pipeline, report, tables: scikit-learn, pandas, torch and the estimators)
# are imported by the commands that run, not with this module: ``skbayes --help`` and a usage error
# answer without importing torch.


def _split_names(values):
    """Column names from repeated and/or comma-separated option values."""
    return [name.strip() for value in values for name in value.split(",") if name.strip()]


def _run(function, *args, **kwargs):
    """function(...), a ValueError turned into click's one-line error."""
    import click

    try:
        return function(*args, **kwargs)
    except ValueError as exc:
        raise click.ClickException(_first_line(exc)) from None


def _with_options(options):
    """A decorator applying ``options`` (click decorators) in their order."""

    def decorate(function):
        for option in reversed(options):
            function = option(function)
        return function
    return decorate


def _fit_model(table, target, features, exclude, categorical, max_categories, task, estimator, max_iter,
               random_state, params, dataset):
    """Fit the pipeline of ``skbayes fit`` (and of ``evaluate`` without a model): ``(model, source, frame)``."""
    import click

    from .pipeline import fit_table, parse_param
    from .tables import load_dataset, read_table

    params = [_run(parse_param, p) for p in params]
    if table is None:
        if dataset is None:
            if task == "auto" and estimator.lower() in {n.lower() for n in _estimator_names()}:
                task = "classification" if estimator.lower().endswith("classifier") else "regression"
            dataset = _DEFAULT_DATASET["classification" if task == "classification" else "regression"]
        frame, source = _run(load_dataset, dataset, "train"), f"{dataset} (training split)"
        target = target or "target"
    else:
        if target is None:
            raise click.ClickException("--target COLUMN is required with a TABLE")
        frame, source = _run(read_table, table), str(table)
    model = _run(
        fit_table, frame, target, features=_split_names(features), exclude=_split_names(exclude),
        categorical=_split_names(categorical), task=task, estimator=estimator, max_iter=max_iter,
        random_state=random_state, params=params, max_categories=max_categories, source=source,
    )
    model["dataset"] = dataset if table is None else None
    return model, source, frame


def _describe(model, source):
    """One line on the fitted model: estimator, task, target, features, rows, fit time."""
    what = "classes" if model["task"] == "classification" else "regression"
    return (f"{type(model['pipeline'][-1]).__name__} ({what} of '{model['target']}' on "
            f"{len(model['features'])} features, {model['n_rows']} rows of {source}, "
            f"{model['fit_seconds']:.1f} s)")


def _held_out(model, table, dataset):
    """The table to predict or evaluate, ``(frame, source)``: TABLE, else the test split of the dataset."""
    import click

    from .tables import load_dataset, read_table

    if table is not None:
        return _run(read_table, table), str(table)
    dataset = dataset or model.get("dataset")
    if dataset is None:
        raise click.ClickException("give a TABLE (the model was not fitted on a built-in dataset)")
    return _run(load_dataset, dataset, "test"), f"{dataset} (test split)"


def _write_csv(predictions, output):
    """Write the predictions as CSV to ``output`` (``-``: standard output)."""
    import click

    if str(output) == "-":
        predictions.to_csv(sys.stdout, index=False)
    else:
        try:
            predictions.to_csv(output, index=False)
        except OSError as exc:
            raise click.ClickException(f"{output}: cannot write: {_first_line(exc)}") from None


def _options(click):
    """The argument and options shared by the commands: ``(table, dataset, coverage, fit options)``."""
    table_argument = click.argument("table", required=False, type=click.Path(dir_okay=True, path_type=Path))
    dataset_option = click.option(
        "--dataset", type=click.Choice(list(DATASETS)), default=None,
        help="Without TABLE: the scikit-learn dataset to use (default: diabetes for regression, "
             "breast_cancer for classification; evaluate and predict: the model's).",
    )
    coverage_option = click.option(
        "--coverage", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.95, show_default=True,
        help="Nominal coverage of the central prediction interval.",
    )
    fit_options = [
        click.option("--target", "-t", metavar="COLUMN", help="The target column (with a TABLE; required)."),
        click.option("--features", multiple=True, metavar="COLUMNS",
                     help="Feature columns, comma-separated or repeated (default: all but the target)."),
        click.option("--exclude", multiple=True, metavar="COLUMNS",
                     help="Columns to leave out of the features, comma-separated or repeated."),
        click.option("--categorical", multiple=True, metavar="COLUMNS",
                     help="Numeric columns to one-hot encode too (text, category and bool columns always are)."),
        click.option("--max-categories", type=click.IntRange(1), default=MAX_CATEGORIES, show_default=True,
                     help="Refuse a non-numeric column with more distinct values."),
        click.option("--task", type=click.Choice(["auto", "regression", "classification"]), default="auto",
                     show_default=True, help="auto: classes for text, bool, or at most 20 distinct integers."),
        click.option("--estimator", "-e", default="auto", show_default=True,
                     help="auto (regression: stacking; classes: mlp), stacking (regression: Bayesian linear "
                          "regression, an exact or sparse GP and the Bayesian MLP weighted by held-out log density), "
                          "mlp, sparse-gp or deep-gp (regressor or classifier by the task), or a class name: "
                          + ", ".join(_estimator_names()) + "."),
        click.option("--max-iter", type=click.IntRange(1), default=None,
                     help="Epochs (the estimator's max_iter, or its variational fit's for the GPs; default: its own)."),
        click.option("--random-state", type=int, default=0, show_default=True, help="Seed of the estimator."),
        click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE",
                     help="Any other estimator parameter, e.g. -p 'hidden_layer_sizes=(50, 50)'; repeatable."),
        dataset_option,
    ]
    return table_argument, dataset_option, coverage_option, fit_options


def make_cli():
    """Build the ``skbayes`` click command group.

    Returns
    -------
    cli : click.Group
        With the commands ``fit``, ``predict`` and ``evaluate``; invoke it
        with ``cli.main(args)`` or test it with
        :class:`click.testing.CliRunner`.

    Raises
    ------
    ImportError
        If click is not installed.
    """
    import click

    import skbayes

    table_argument, dataset_option, coverage_option, fit_options = _options(click)

    @click.group(context_settings={"help_option_names": ["-h", "--help"]})
    @click.version_option(skbayes.__version__, prog_name="skbayes")
    @click.option("--threads", type=click.IntRange(1), default=None,
                  help="CPU threads of torch (torch.set_num_threads; default: torch's own).")
    def cli(threads):
        """Fit, predict and evaluate skbayes estimators on a CSV or Parquet table.

        Without a TABLE, the commands run on a dataset that ships with
        scikit-learn (--dataset), split into a training and a test part.
        """
        if threads is not None:
            import torch

            torch.set_num_threads(threads)

    @cli.command()
    @table_argument
    @_with_options(fit_options)
    @click.option("--output", "-o", "output", type=click.Path(dir_okay=False, path_type=Path),
                  default="model.joblib", show_default=True, help="The model file to write (joblib).")
    def fit(table, output, **options):
        """Fit an estimator on TABLE and save the fitted pipeline.

        TABLE is a CSV file (or .parquet, .tsv); without it, the training
        split of --dataset.
        """
        import joblib

        model, source, _ = _fit_model(table, **options)
        try:
            joblib.dump(model, output)
        except OSError as exc:
            raise click.ClickException(f"{output}: cannot write: {_first_line(exc)}") from None
        click.echo(f"fitted {_describe(model, source)}; saved {output}")

    @cli.command()
    @table_argument
    @click.option("--model", "-m", "model_path", type=click.Path(path_type=Path), default="model.joblib",
                  show_default=True, help="The model file written by skbayes fit.")
    @click.option("--output", "-o", default="-", show_default=True, help="The CSV file to write; - is stdout.")
    @coverage_option
    @click.option("--id", "id_column", metavar="COLUMN", help="Copy this column to the output instead of 'row'.")
    @dataset_option
    def predict(table, model_path, output, coverage, id_column, dataset):
        """Write the predictions for each row of TABLE as CSV.

        Regression: row, mean, std, lower, upper. Classification: row,
        prediction, proba_<class>..., predictive_entropy, expected_entropy,
        mutual_information, variation_ratio. Without TABLE: the test split
        of the model's dataset.
        """
        from .pipeline import load_model
        from .report import predict_table

        model = _run(load_model, model_path)
        frame, source = _held_out(model, table, dataset)
        predictions = _run(predict_table, model, frame, coverage=coverage, id_column=id_column, source=source)
        _write_csv(predictions, output)

    @cli.command(short_help="Print test log-likelihood, error, coverage and calibration on TABLE.")
    @table_argument
    @click.option("--model", "-m", "model_path", type=click.Path(path_type=Path), default=None,
                  help="The model file written by skbayes fit (default: model.joblib with a TABLE; without "
                       "TABLE and --model, a model is fitted on the training split of --dataset).")
    @coverage_option
    @click.option("--figures", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="Folder to save the calibration figures in (PNG).")
    @click.option("--predictions", type=click.Path(dir_okay=False, path_type=Path), default=None,
                  help="Also write the predictions to this CSV file.")
    @click.option("--baselines/--no-baselines", default=True, show_default=True,
                  help="When evaluate fits the model: also fit the baselines a tabular user already has "
                       "(BayesianRidge, scikit-learn's exact GP up to 2,000 rows, NGBoost when installed; "
                       "LogisticRegression for classes) on the same rows and print their scores beside it.")
    @_with_options(fit_options)
    @click.pass_context
    def evaluate(ctx, table, model_path, coverage, figures, predictions, baselines, **options):
        """Print the test log-likelihood, error, coverage and calibration on TABLE.

        TABLE is a held-out table with the target column. Without TABLE
        and --model, fits a model (with the fit options) on the training
        split of --dataset and evaluates it on the test split, beside the
        baselines fitted on the same rows: one command that runs the whole
        job.
        """
        from .pipeline import load_model
        from .report import evaluate_table, format_metrics, save_figures

        fitting = table is None and model_path is None
        if not fitting:
            given = [name for name in options if name != "dataset"
                     and ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT]
            if given:
                raise click.ClickException(
                    f"--{given[0].replace('_', '-')} is a fit option: evaluate fits only without TABLE and --model"
                )
        if fitting:
            model, source, train = _fit_model(None, **options)
            click.echo(f"fitted {_describe(model, source)}")
            frame, source = _held_out(model, None, None)
        else:
            model = _run(load_model, model_path or "model.joblib")
            frame, source = _held_out(model, table, options["dataset"])
        metrics, rows, y = _run(evaluate_table, model, frame, coverage=coverage, source=source)
        name = type(model["pipeline"][-1]).__name__
        click.echo(f"{name} on {source}, {len(frame)} rows")
        click.echo(format_metrics(metrics, model["task"], coverage))
        if fitting and baselines:
            from .baselines import baseline_estimators, baseline_metrics, format_comparison

            width = len(model["pipeline"][0].get_feature_names_out())  # the encoded columns the models see
            candidates, notes = baseline_estimators(model["task"], len(train), width, options["random_state"])
            scored = []
            for label, estimator in candidates:
                try:
                    scored.append((label, baseline_metrics(model, estimator, train, frame, y, coverage)))
                except Exception as exc:  # a baseline that fails is a note, not the end of the user's job
                    notes.append(f"{label} left out: {_first_line(exc)}")
            click.echo(f"\nthe same scores of the baselines, fitted on the same {len(train)} rows:")
            click.echo(format_comparison(name, {**metrics, "fit_seconds": model["fit_seconds"]}, scored, notes))
        if predictions is not None:
            _write_csv(rows, predictions)
            click.echo(f"saved {predictions}")
        if figures is not None:
            for path in _run(save_figures, model, y, rows, figures, coverage=coverage):
                click.echo(f"saved {path}")

    return cli


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    stream = sys.stderr if file is None else file
    stream.write(f"Warning: {_first_line(message)}\n")


def main(argv=None):
    """Run the ``skbayes`` command (the console script and ``python -m skbayes``).

    Parameters
    ----------
    argv : list of str, default=None
        The arguments; None reads ``sys.argv[1:]``.

    Returns
    -------
    None
        Exits the process with click's exit code: 0 on success, 1 with a
        one-line ``Error: ...`` on stderr for bad input, 2 for a usage
        error; 1 with a one-line error if click or pandas is missing.
    """
    for name in ("click", "pandas"):  # looked up, not imported: --help needs neither pandas nor numpy
        if (sys.modules[name] is None) if name in sys.modules else importlib.util.find_spec(name) is None:
            sys.stderr.write(f"Error: the skbayes command needs {name}: pip install 'skbayes[cli]'\n")
            sys.exit(1)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning
        make_cli().main(args=argv, prog_name="skbayes")
