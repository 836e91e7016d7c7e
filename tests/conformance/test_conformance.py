"""The official MCP conformance suite against `serve --transport http` (opt-in: pytest -m conformance).

tests/conformance/run.sh does the work: it installs the pinned suite with npm, starts the server on a free
loopback port and runs every scenario that applies to a server without the reference fixtures."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import TESTS_DIR

pytestmark = pytest.mark.conformance


def test_the_http_server_passes_every_applicable_conformance_scenario():
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("the conformance suite needs node and npm")
    result = subprocess.run(
        ["bash", str(TESTS_DIR / "conformance" / "run.sh")],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
