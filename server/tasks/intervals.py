"""How sure is a speedup? Distribution-free intervals for the factor between two sets of timings.

Why these and not a bootstrap: both are exact at their level whatever the noise's distribution,
deterministic (the same timings give the same verdict every time), and need nothing but sorting and a
binomial sum. A bootstrap of the median from 20 timings is coarse (the median of a resample takes few
distinct values), random, and covers less than it claims.
- `paired_ratio_interval`, for the speedup (reference / candidate) and the keep decision (best /
  candidate): pairs timed side by side differ, on the log scale, by the factor between the versions plus
  noise that is symmetric when the order within pairs alternates; the Hodges-Lehmann estimate with the
  Wilcoxon signed-rank interval is then exact whatever the noise, and narrow.
- `ratio_interval` (a ratio of medians of independent samples), only for a keep decision from stored
  timings, when the best could not be timed beside the candidate: each median gets its order-statistic
  interval (the binomial one, at sqrt(level), so that both hold at once with `level`) and the ratio's
  interval is their quotient; conservative, and wider.

Which samples: call-to-call noise is not the only noise. The machine's load drifts between two
benchmarks (measured on a 2-core machine with a background job: medians of one unchanged function
7% apart from one sandbox run to the next, while each run's own interval was a few percent wide), so an
interval from timings taken minutes apart claims more than it knows, and a baseline timed once under a neighbour's load
inflated every later speedup of a run by the same factor. The speedup and the keep decision therefore
use timings taken side by side, in one sandbox run, on the same inputs (`paired_ratio_interval`).

Which level: the keep rule's interval is at LEVEL (a candidate no faster than the best is kept with
chance 2.5%). The speedup's interval is at SPEEDUP_LEVEL, higher, because it is read as a claim on
every benchmark of a run (tens of them): code no faster than the reference says "no speedup" (an
interval containing 1) with chance 99%, whatever load other runs put on the machine, since load falls
on both members of a pair alike.
"""

import math
import statistics
from collections.abc import Sequence
from typing import NamedTuple

LEVEL = 0.95
SPEEDUP_LEVEL = 0.99


class Ratio(NamedTuple):
    """The factor a / b (above 1: b is faster), with its interval at LEVEL."""

    estimate: float
    low: float
    high: float

    def excludes_one(self) -> bool:
        return self.low > 1.0 or self.high < 1.0


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(max(v, 1e-9)) for v in values]


def ratio_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Ratio:
    """Independent samples: median(a) / median(b), with the quotient of the two medians' intervals (for
    20 timings each median's interval at sqrt(0.95) runs from the 5th to the 16th smallest)."""
    if not a or not b:
        raise ValueError("both samples need at least one value")
    each = math.sqrt(level)
    low_a, high_a = median_interval(a, each)
    low_b, high_b = median_interval(b, each)
    return Ratio(
        estimate=statistics.median(a) / max(statistics.median(b), 1e-9),
        low=low_a / max(high_b, 1e-9),
        high=high_a / max(low_b, 1e-9),
    )


def median_interval(values: Sequence[float], level: float) -> tuple[float, float]:
    """[x_(j), x_(n+1-j)] covers the median with chance 1 - 2 P(Binomial(n, 1/2) < j): the largest j
    that keeps it at `level` or more (with too few values for the level, the whole range)."""
    xs, n = sorted(values), len(values)
    below = [math.comb(n, i) / 2**n for i in range(n + 1)]  # P(Binomial(n, 1/2) = i)
    j = 1
    while j < (n + 1) // 2 and 2 * sum(below[: j + 1]) <= 1 - level:
        j += 1
    return xs[j - 1], xs[n - j]


def paired_ratio_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> Ratio:
    """Pairs (a[i] and b[i] timed on the same input, one right after the other): the factor a / b from
    the Walsh averages of the per-pair log ratios, with the Wilcoxon signed-rank interval (for 20 pairs
    the critical value is 52, as in the exact table). Drift in the machine's load between pairs
    cancels: both members of a pair see the same load."""
    if len(a) != len(b) or not a:
        raise ValueError("paired samples need the same, non-zero length")
    d = [x - y for x, y in zip(_logs(a), _logs(b), strict=True)]
    n = len(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2)
    k = math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))
    k = min(max(k, 0), (len(walsh) - 1) // 2)  # too few pairs for the level: the whole range
    return Ratio(
        estimate=math.exp(statistics.median(walsh)), low=math.exp(walsh[k]), high=math.exp(walsh[-1 - k])
    )


def interval_words(low: float, high: float) -> str:
    """`[2.05, 2.2]`: an interval as every answer and the summary write it."""
    return f"[{low:.4g}, {high:.4g}]"


def best_suffix(metrics: dict[str, float], metric: str, level: bool = False) -> str:
    """What the summary adds after the best's metric: its interval (` [2.05, 2.2] at 99%`) where the task
    measured one, and the mean over its re-evaluations where it had any."""
    text = ""
    low, high = metrics.get(f"{metric}_low"), metrics.get(f"{metric}_high")
    if low is not None and high is not None:
        # The speedup's is the speed harness's own, at SPEEDUP_LEVEL; a script's printed bounds say none.
        # An answer and the neutral summary name the level (an answer's beside its verdict's).
        text += f" {interval_words(low, high)}" + (
            f" at {SPEEDUP_LEVEL:.0%}" if level and metric == "speedup" else ""
        )
    mean, runs = metrics.get(f"{metric}_mean"), metrics.get("evaluations")
    if mean is not None and runs is not None:
        text += f" (mean {mean:.4f} of {int(runs)} seeds)"
    return text
