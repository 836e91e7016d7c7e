"""CI's gate on the sandbox's layers. .ci/run sets AUTORESEARCH_TEST_REQUIRE_ISOLATION=1: CI's machine has
every isolation layer, so there a test that skips for want of one (Landlock, seccomp, a cgroup, a
namespace, a mount) fails instead of turning the run green untested. Elsewhere such a test skips, and
`-rs` (as .ci/run runs pytest) lists why."""

import os
from collections.abc import Generator
from typing import Any

import pytest

VARIABLE = "AUTORESEARCH_TEST_REQUIRE_ISOLATION"
# Read once, at start: conftest clears every AUTORESEARCH_* variable around each test.
REQUIRED = os.environ.get(VARIABLE) == "1"
# The words every skip reason for a missing layer holds (the sandbox tests' skipif reasons).
LAYERS = ("landlock", "seccomp", "cgroup", "namespace", "mount", "rlimit")


def names_a_layer(reason: str) -> bool:
    return any(word in reason.lower() for word in LAYERS)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    report = (yield).get_result()
    if REQUIRED and report.skipped and isinstance(report.longrepr, tuple):
        reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        if names_a_layer(reason):
            report.outcome = "failed"
            report.longrepr = f"{VARIABLE}=1 and an isolation layer is missing here: {reason}"
