"""query_results' hard time limit: each query runs in a worker process, which is killed when it overruns.

SQLite's progress handler runs between virtual-machine steps, and one step can be one C function call
that takes minutes (instr, replace or trim over megabyte strings; a printf width of two billion). A
thread cannot be stopped inside it; a process can. So the 2 s limit holds for any query, whatever
function a future SQLite or a longer allow-list adds: the worker answers within TIME_LIMIT_S (its own
progress handler), or it is killed GRACE_S later and replaced. It serves one query at a time, under an
address-space limit, and exits when the server does.

`python -m autoresearch_mcp.server.query_worker`: it prints "ready", then answers one JSON request per
line of stdin with one JSON reply per line of stdout.
"""

import atexit
import contextlib
import json
import os
import resource
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import QueryResult
from autoresearch_mcp.server.query import TIME_LIMIT_S, run_query

GRACE_S = 0.5
MEMORY_BYTES = 1024 * 1024 * 1024
STARTUP_S = 60.0
_READY = "ready"


class QueryWorker:
    """The server's side: one worker process, started on first use, replaced after a kill."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    def query(self, db_path: Path, sql: str, max_rows: int) -> QueryResult:
        request = json.dumps({"db": str(db_path), "sql": sql, "max_rows": max_rows}).encode() + b"\n"
        with self._lock:
            proc = self._ready()
            try:
                assert proc.stdin is not None
                proc.stdin.write(request)
                proc.stdin.flush()
                line = _read_line(proc, time.monotonic() + TIME_LIMIT_S + GRACE_S)
            except (BrokenPipeError, OSError):
                line = None
            if line is None:  # overran (one long C call), or died: it goes, the next query gets a fresh one
                self._stop()
                raise ResearchError(
                    f"refused: the query ran longer than {TIME_LIMIT_S:g} s and was stopped. "
                    "Add a LIMIT or a narrower WHERE, and avoid string functions over whole sources.",
                    kind="bad_query",
                )
        reply = json.loads(line)
        if "error" in reply:
            raise ResearchError(reply["error"], kind="bad_query")
        return QueryResult.model_validate(reply["ok"])

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _ready(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        proc = subprocess.Popen(
            [sys.executable, "-P", "-m", "autoresearch_mcp.server.query_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C meant for the server goes to the server
        )
        if _read_line(proc, time.monotonic() + STARTUP_S) != _READY.encode():
            proc.kill()
            proc.wait()
            raise ResearchError("the query worker did not start; see the server's log", kind="unavailable")
        self._proc = proc
        return proc

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _read_line(proc: subprocess.Popen[bytes], deadline: float) -> bytes | None:
    """One line from the worker, or None when the deadline passes first or it exits."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    chunks: list[bytes] = []
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return None
        chunks.append(chunk)
        if chunk.endswith(b"\n"):
            return b"".join(chunks).rstrip(b"\n")
    return None


_worker = QueryWorker()
# Stopped and reaped as the server's process ends (stdin's EOF would end it, unwaited).
atexit.register(_worker.close)


def query_in_worker(db_path: Path, sql: str, max_rows: int) -> QueryResult:
    return _worker.query(db_path, sql, max_rows)


def _exit_with_the_server() -> None:
    """The server reads our replies; when it is gone (killed included), poll reports an error on the
    pipe: stop at once, even in the middle of a query nobody will read."""

    def watch() -> None:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), 0)  # errors and hang-ups only
        while True:
            for _, event in poller.poll():
                if event & (select.POLLERR | select.POLLHUP | select.POLLNVAL):
                    os._exit(1)

    threading.Thread(target=watch, daemon=True, name="exit-with-server").start()


def main() -> int:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    _exit_with_the_server()
    out = sys.stdout
    out.write(_READY + "\n")
    out.flush()
    for line in sys.stdin:
        request: dict[str, Any] = json.loads(line)
        try:
            result = run_query(Path(request["db"]), request["sql"], int(request["max_rows"]))
            reply: dict[str, Any] = {"ok": result.model_dump()}
        except ResearchError as exc:
            reply = {"error": str(exc)}
        except MemoryError:
            reply = {"error": "refused: the query needed more memory than a query may use"}
        out.write(json.dumps(reply) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
