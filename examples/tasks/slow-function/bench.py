"""The benchmark, which the agent may not edit (it is not in `edit`): check the output of slow.py against
a trusted reference on fresh inputs, then time it. Prints `seconds: <fastest of 7 calls>` (the least
disturbed by other work on the machine), the metric to minimise, or exits with an error when the output
differs.
"""

import random
import statistics
import sys
import time

from slow import pairwise_close


def reference(points, radius):
    return sorted(
        (i, j)
        for i in range(len(points))
        for j in range(i + 1, len(points))
        if (points[i][0] - points[j][0]) ** 2 + (points[i][1] - points[j][1]) ** 2 < radius * radius
    )


def make_points(n, seed):
    rng = random.Random(seed)
    return [(rng.random(), rng.random()) for _ in range(n)]


for seed in (1, 2, 3):  # correctness first, on inputs the function has never seen
    points = make_points(300, seed + random.SystemRandom().randrange(1 << 30))
    if pairwise_close(points, 0.05) != reference(points, 0.05):
        sys.exit("wrong output: pairwise_close differs from the reference")

times = []
for repeat in range(7):
    points = make_points(600, repeat)
    start = time.perf_counter()
    pairwise_close(points, 0.05)
    times.append(time.perf_counter() - start)
print(f"seconds: {min(times):.5f}")
print(f"median_seconds: {statistics.median(times):.5f}")
