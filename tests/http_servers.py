"""The real server over streamable HTTP as the tests spawn it: as a subprocess, on the loopback port it
picked itself (`--port 0`, read from its `--port-file`), with the suite's small sizes."""

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from conftest import TESTS_DIR


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a server a test spawns: none of the developer's AUTORESEARCH_* variables, the
    toy task, and the suite's small sizes (conftest): one XGBoost thread, whose spare threads would
    otherwise spin on a busy machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTORESEARCH_")}
    env.update(
        AUTORESEARCH_TASK_PLUGINS="toy_task",
        PYTHONPATH=str(TESTS_DIR),
        AUTORESEARCH_DATA_DIR=str(data_dir),
        AUTORESEARCH_LOG_LEVEL="WARNING",
        AUTORESEARCH_HPO_THREADS="1",
        # the suite's small codeopt-records (conftest), which the test's own environment names
        AUTORESEARCH_TASK_DIRS=os.environ.get("AUTORESEARCH_TASK_DIRS", ""),
    )
    env.update(extra)
    return env


def serve_command(db: Path, csv: Path, *args: str) -> list[str]:
    cli = [sys.executable, "-m", "autoresearch_mcp.cli", "serve", "--transport", "http"]
    return [*cli, "--db", str(db), "--data", str(csv), "--workers", "2", *args]


@contextmanager
def serving_process(
    db: Path, csv: Path, data_dir: Path, *args: str, **env: str
) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    """The server on a port it picked itself (`--port 0`), read from its `--port-file` once it listens:
    a port a test picks and frees first could be taken by a parallel worker before the server binds it."""
    port_file = db.parent / f"server-{uuid.uuid4().hex[:8]}.port"  # a restart on the same db: new files
    log_path = port_file.with_suffix(".log")
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            serve_command(db, csv, "--port", "0", "--port-file", str(port_file), *args),
            env=server_env(data_dir, **env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while not port_file.exists():
                assert proc.poll() is None, f"the server exited:\n{log_path.read_text()}"
                assert time.monotonic() < deadline, f"the server never listened:\n{log_path.read_text()}"
                time.sleep(0.05)
            yield int(port_file.read_text()), proc
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    assert not port_file.exists(), "a stopped server's port file stays behind"


@contextmanager
def http_server(db: Path, csv: Path, data_dir: Path, *args: str, **env: str) -> Iterator[int]:
    with serving_process(db, csv, data_dir, *args, **env) as (port, _proc):
        yield port
