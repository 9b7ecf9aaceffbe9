"""Reading tables (CSV, Parquet) and the scikit-learn datasets of the command."""

from pathlib import Path

from ._common import DATASETS, _SPLIT_SEED, _TEST_SIZE, _first_line, _pandas, _quote_list


def read_table(path):
    """Read a CSV or Parquet table into a DataFrame.

    A name ending in ``.parquet`` or ``.pq`` is read with
    :func:`pandas.read_parquet` (which needs pyarrow or fastparquet), one
    ending in ``.tsv`` or ``.tab`` as tab-separated values, anything else
    with :func:`pandas.read_csv` (comma-separated, first line the header;
    ``.gz``, ``.bz2``, ``.zip``, ``.xz`` and ``.zst`` are decompressed).

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    frame : pandas.DataFrame
        At least one column and one row; the rows keep pandas' default
        index 0, 1, ... .

    Raises
    ------
    ValueError
        With a one-line message if the file does not exist, is a folder,
        is empty, has a header but no rows, cannot be parsed, or is Parquet
        with no Parquet engine installed.
    """
    pd = _pandas()
    path = Path(path)
    if not path.exists():
        raise ValueError(f"{path}: no such file")
    if path.is_dir():
        raise ValueError(f"{path}: is a folder, not a table")
    suffixes = [s.lower() for s in path.suffixes]
    try:
        if suffixes and suffixes[-1] in (".parquet", ".pq"):
            frame = pd.read_parquet(path)
        elif {".tsv", ".tab"} & set(suffixes):
            frame = pd.read_csv(path, sep="\t")
        else:
            frame = pd.read_csv(path)
    except ImportError as exc:
        if suffixes and suffixes[-1] in (".parquet", ".pq"):
            raise ValueError(
                f"{path}: reading Parquet needs pyarrow (pip install pyarrow) or fastparquet ({_first_line(exc)})"
            ) from exc
        raise ValueError(f"{path}: cannot read the file: {_first_line(exc)}") from exc
    except pd.errors.EmptyDataError as exc:
        raise ValueError(f"{path}: the file is empty") from exc
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        raise ValueError(f"{path}: cannot be read as a table: {_first_line(exc)}") from exc
    except Exception as exc:  # pyarrow's errors for a file that is not Parquet
        if type(exc).__module__.startswith("pyarrow"):
            raise ValueError(f"{path}: cannot be read as Parquet: {_first_line(exc)}") from exc
        raise
    if frame.shape[1] == 0:
        raise ValueError(f"{path}: the file has no columns")
    if frame.shape[0] == 0:
        raise ValueError(f"{path}: the table has a header but no rows")
    return frame


def load_dataset(name, split):
    """A dataset that ships with scikit-learn, as a table with a ``target`` column.

    The rows are split once into a training part and a test part (a
    quarter of the rows) by :func:`~sklearn.model_selection.train_test_split`
    with ``random_state=0``, stratified by class for a classification
    dataset, so that ``skbayes fit`` and ``skbayes evaluate`` without a
    TABLE see complementary rows.

    Parameters
    ----------
    name : {"diabetes", "breast_cancer", "wine", "iris"}
        :func:`~sklearn.datasets.load_diabetes` (442 rows, 10 features,
        regression), :func:`~sklearn.datasets.load_breast_cancer` (569 rows,
        30 features, 2 classes), :func:`~sklearn.datasets.load_wine` (178
        rows, 13 features, 3 classes) or :func:`~sklearn.datasets.load_iris`
        (150 rows, 4 features, 3 classes).
    split : {"train", "test"}
        Which part.

    Returns
    -------
    frame : pandas.DataFrame
        The feature columns and ``target``, with the original row numbers
        of the dataset as index.

    Raises
    ------
    ValueError
        If ``name`` or ``split`` is unknown.
    """
    import sklearn.datasets
    from sklearn.model_selection import train_test_split

    if name not in DATASETS:
        raise ValueError(f"unknown dataset '{name}'; choose one of {_quote_list(DATASETS, limit=10)}")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    loader, task = DATASETS[name]
    frame = getattr(sklearn.datasets, loader)(as_frame=True).frame
    stratify = frame["target"] if task == "classification" else None
    train, test = train_test_split(frame, test_size=_TEST_SIZE, random_state=_SPLIT_SEED, stratify=stratify)
    return (train if split == "train" else test).sort_index()
