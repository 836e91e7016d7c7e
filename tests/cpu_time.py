"""Where the suite's CPU goes, per test (opt-in): `PYTHONPATH=tests python -m pytest -p cpu_time`.

Each test's CPU (user + sys) is its worker's own plus that of the children the worker reaped meanwhile
(servers, sandboxes and CLI subprocesses the test started), one JSON line per test appended to
$AUTORESEARCH_TEST_CPU_FILE (default cpu-times.jsonl), then one `__session__` line per worker with its
totals (collection included). A session-scoped server (`shared_server`) is reaped at its worker's end:
its CPU lands on that worker's last test. `python tests/cpu_time.py FILE` sums them by file.
"""

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

OUT = os.environ.get("AUTORESEARCH_TEST_CPU_FILE", "cpu-times.jsonl")


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _write(record: dict[str, object]) -> None:
    with open(OUT, "a") as out:
        out.write(json.dumps(record) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    (own, children), wall = _cpu(), time.perf_counter()
    yield
    (own_end, children_end), wall_end = _cpu(), time.perf_counter()
    _write(
        {"id": item.nodeid, "self": own_end - own, "child": children_end - children, "wall": wall_end - wall}
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    own, children = _cpu()
    _write({"id": "__session__", "self": own, "child": children, "pid": os.getpid()})


def by_file(path: str) -> None:
    tests: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    with open(path) as lines:
        records = [json.loads(line) for line in lines]
    for record in records:
        if record["id"] != "__session__":
            total = tests[record["id"].split("::")[0]]
            total[0] += record["self"] + record["child"]
            total[1] += 1
    for name, (cpu, count) in sorted(tests.items(), key=lambda item: -item[1][0]):
        print(f"{cpu:8.1f} s  {count:4.0f} tests  {name}")
    print(f"{sum(cpu for cpu, _ in tests.values()):8.1f} s  in all")


if __name__ == "__main__":
    by_file(sys.argv[1])
