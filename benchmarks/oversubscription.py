"""Why `compare --parallel` gives each mode half the cores: XGBoost thread teams that outnumber the cores
spin-wait for each other.

Fits the same XGBoost model (150 rounds, depth 8, hist, 16,000 Covertype rows) alone and as two concurrent
processes, with 1 and with 2 threads per fit, and prints the median seconds per fit over the repeats,
measured side by side in one run.

    python benchmarks/oversubscription.py --repeats 3
"""

import argparse
import statistics
import subprocess
import sys
import time

FIT = """
import sys, time
import pandas as pd, xgboost as xgb
df = pd.read_csv(sys.argv[1])
X, y = df.drop(columns=["Cover_Type"]).values, df["Cover_Type"].values - 1
t = time.monotonic()
xgb.XGBClassifier(n_estimators=150, max_depth=8, tree_method="hist", n_jobs=int(sys.argv[2]),
                  random_state=0).fit(X[:16000], y[:16000])
print(time.monotonic() - t)
"""


def fits(data: str, threads: int, processes: int) -> list[float]:
    """Seconds per fit for `processes` fits started together."""
    procs = [
        subprocess.Popen([sys.executable, "-c", FIT, data, str(threads)], stdout=subprocess.PIPE, text=True)
        for _ in range(processes)
    ]
    return [float(p.communicate()[0]) for p in procs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="Covertype CSV")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cases = [(1, 1), (2, 1), (1, 2), (2, 2)]  # (threads per fit, concurrent processes)
    seconds: dict[tuple[int, int], list[float]] = {case: [] for case in cases}
    started = time.monotonic()
    for _ in range(args.repeats):
        for threads, processes in cases:
            seconds[(threads, processes)] += fits(args.data, threads, processes)
    print("| threads per fit | fits at once | median seconds per fit |")
    print("|---|---|---|")
    for (threads, processes), values in seconds.items():
        print(f"| {threads} | {processes} | {statistics.median(values):.2f} |")
    print(f"\n{args.repeats} repeats, {time.monotonic() - started:.0f} s in all.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
