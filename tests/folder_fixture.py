"""A task folder outside the repository, as a user writes one: a small pure-Python script that prints its
metric, and its autoresearch.toml. Fast (no imports beyond the standard library)."""

import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """\
    import json
    import os
    import sys

    params = json.loads(os.environ["AUTORESEARCH_PARAMS"])
    x, y = params["x"], params["y"]
    if params["shape"] == "crash":
        print("about to fail", flush=True)
        sys.exit("the shape 'crash' always fails")
    with open("scratch.txt", "w") as out:  # relative: the experiment's own working directory
        out.write("written by the script")
    weight = open("data/weight.txt").read().strip()  # relative: as in the folder
    print("steps: 3")
    print(f"loss: {float(weight) * ((x - 0.3) ** 2 + (y + 0.2) ** 2):.6f}")
    """
)

TOML = textwrap.dedent(
    """\
    [task]
    name = "{name}"
    description = "Find the bottom of a bowl. The script reads a weight from data/."
    command = ["python", "train.py"]
    metric = "loss"
    direction = "minimize"
    timeout_s = {timeout}
    {extra}

    [params.x]
    type = "float"
    low = -1.0
    high = 1.0
    default = 0.0
    description = "first coordinate"

    [params.y]
    type = "float"
    low = -1.0
    high = 1.0
    default = 0.0

    [params.shape]
    type = "categorical"
    choices = ["bowl", "crash"]
    default = "bowl"
    """
)


def make_folder(
    root: Path, name: str = "bowl", *, script: str = SCRIPT, timeout: float = 20, extra: str = ""
) -> Path:
    folder = root / name
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "weight.txt").write_text("2\n")
    (folder / "train.py").write_text(script)
    (folder / "autoresearch.toml").write_text(TOML.format(name=name, timeout=timeout, extra=extra))
    return folder


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every file under the folder and its bytes: a run must leave this unchanged."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# examples/tasks/slow-function's pairwise_close, faster: half the pairs, no square root, locals bound
# once. About 2x, well clear of timing noise on 2 busy cores (halving the pairs alone gains little: the
# skipped `i < j` test was cheap). The same output.
FASTER_PAIRWISE_CLOSE = (
    "def pairwise_close(points, radius):\n"
    "    r2 = radius * radius\n"
    "    pairs = []\n"
    "    n = len(points)\n"
    "    for i in range(n):\n"
    "        xi, yi = points[i]\n"
    "        for j in range(i + 1, n):\n"
    "            xj, yj = points[j]\n"
    "            dx = xi - xj\n"
    "            dy = yi - yj\n"
    "            if dx * dx + dy * dy < r2:\n"
    "                pairs.append((i, j))\n"
    "    return sorted(pairs)\n"
)


def small_slow_function(where: Path, points: int = 150, calls: int = 3) -> Path:
    """A copy of examples/tasks/slow-function timed on fewer points and calls: what a test of the path
    needs, at a twentieth of the example's benchmark."""
    import shutil

    source = Path(__file__).resolve().parents[1] / "examples" / "tasks" / "slow-function"
    folder = Path(shutil.copytree(source, where / "slow-function"))
    bench = folder / "bench.py"
    bench.write_text(bench.read_text().replace("POINTS, RADIUS = 600,", f"POINTS, RADIUS = {points},"))
    toml = folder / "autoresearch.toml"
    toml.write_text(toml.read_text().replace("calls = 10", f"calls = {calls}"))
    return folder
