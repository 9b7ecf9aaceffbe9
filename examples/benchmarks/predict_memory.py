"""Peak-memory growth of BayesianMLPRegressor.predict(X, return_std=True) as the number of rows grows.

Each size runs in a fresh process, so that the peak resident set size
(``ru_maxrss``) measured around the one prediction is that prediction's. The
model is the default one (one hidden layer of 50 units, 100 Monte-Carlo
draws), fitted for 2 epochs on 200 rows of 8 features.

Run: ``python examples/benchmarks/predict_memory.py --rows 10000 100000 1000000``.
"""

import argparse
import subprocess
import sys

SCRIPT = """
import resource, warnings
import numpy as np
from skbayes import BayesianMLPRegressor
warnings.simplefilter("ignore")
rng = np.random.RandomState(0)
model = BayesianMLPRegressor((50,), inference="mfvi", noise="homoscedastic", max_iter=2, random_state=0, device="cpu").fit(rng.randn(200, 8), rng.randn(200))
X = rng.randn({rows}, 8)
model.predict(X[:1000], return_std=True)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
mean, std = model.predict(X, return_std=True)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) / 1024, (mean.nbytes + std.nbytes) / 2**20)
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    args = parser.parse_args()
    print("| rows | peak growth (MiB) | outputs (MiB) |")
    print("|---|---|---|")
    for rows in args.rows:
        out = subprocess.run([sys.executable, "-c", SCRIPT.format(rows=rows)], capture_output=True, text=True)
        if out.returncode:
            print(f"| {rows:,} | failed: {out.stderr.strip().splitlines()[-1]} | |")
            continue
        growth, outputs = map(float, out.stdout.split())
        print(f"| {rows:,} | {growth:.0f} | {outputs:.1f} |")


if __name__ == "__main__":
    main()
