"""The benchmark's inputs, which the agent may not edit (it is not in `edit`). The harness calls
make_input(seed) for each timed call, with a seed it draws fresh and no version of slow.py sees before
its call, then times pairwise_close on it beside the original slow.py's (the reference) and checks the
output against it ([benchmark] in autoresearch.toml).
"""

import random

POINTS, RADIUS = 600, 0.05


def make_input(seed):
    """The arguments of one call: 600 random points in the unit square and the radius."""
    rng = random.Random(seed)
    return [(rng.random(), rng.random()) for _ in range(POINTS)], RADIUS
