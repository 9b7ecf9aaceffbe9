"""Seconds per training epoch of PBP next to MeanFieldVI's, on UCI concrete split 0.

What it does
------------
PBP (probabilistic backpropagation) includes the training rows one after
another by assumed density filtering, so its epoch is a loop of 927 tiny
steps on ``concrete`` (one hidden layer of 50 units), against the 29
minibatch steps of mean-field VI. This script runs ``epoch_time.py
--registry MeanFieldVI PBP``: the two methods with the benchmarks' registry
settings (``BayesianMLPRegressor``, float64, ``random_state=0``, PBP one row
per ADF step), one untimed warm-up each, then ``--repeats`` interleaved runs
(MeanFieldVI, PBP, MeanFieldVI, PBP, ...) of ``--epochs`` epochs, reporting
the median and minimum seconds per epoch (fit time / epochs run), PBP's ratio
to MeanFieldVI and the load average at start and end.

How to run
----------
::

    SKBAYES_DATA_HOME=/path/to/data OMP_NUM_THREADS=1 \\
        python examples/benchmarks/pbp_epoch_time.py --epochs 10 --repeats 7 \\
        --out examples/benchmarks/results/performance/pbp_epoch_time.json

Run it on an otherwise idle machine. Without ``--out`` the table is only
printed; with it the raw times go to that JSON file and the table to the
Markdown file beside it (same name, ``.md``).
"""

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import epoch_time  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=10, help="Epochs per timed run (default: 10).")
    parser.add_argument("--repeats", type=int, default=7, help="Timed runs per method (default: 7).")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default: 1).")
    parser.add_argument("--data-home", default=None,
                        help="Folder holding uci/<name>/ (a copy that overrides the bundled sets; default: $SKBAYES_DATA_HOME, else ~/.cache/skbayes, else the bundled copy).")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu).")
    parser.add_argument("--out", default=None, help="Write the raw times (JSON) and the table (.md beside it) here.")
    args = parser.parse_args(argv)
    common = ["--registry", "MeanFieldVI", "PBP", "--epochs", str(args.epochs), "--repeats", str(args.repeats),
              "--threads", str(args.threads), "--device", args.device]
    if args.data_home is not None:
        common += ["--data-home", args.data_home]
    if args.out is not None:
        return epoch_time.main([*common, "--json", args.out])
    with tempfile.TemporaryDirectory() as tmp:
        return epoch_time.main([*common, "--json", str(Path(tmp) / "pbp_epoch_time.json")])


if __name__ == "__main__":
    sys.exit(main())
