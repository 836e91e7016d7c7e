"""The local worker process (executors.WORKER_MAIN starts it): one JSON job payload per line on stdin
(job.py runs it), one JSON reply per line on stdout, until stdin closes. It exits when its server dies.
"""

import json
import os
import select
import sys
import threading
import traceback
from typing import Any


def _exit_with_the_server(protocol_fd: int) -> None:
    """The server reads our replies from this pipe; when it dies (kill -9 included), the pipe loses its
    reader and poll reports POLLERR. Then stop at once rather than finish a job nobody will record; the
    job's sandboxed child dies with us (it watches its own pipe to this process)."""

    def watch() -> None:
        poller = select.poll()
        poller.register(protocol_fd, 0)  # no events asked for: only errors and hang-ups are reported
        while True:
            for _, event in poller.poll():
                if event & select.POLLNVAL:
                    return  # the pipe was closed here: we are exiting anyway
                if event & (select.POLLERR | select.POLLHUP):
                    os._exit(1)

    if hasattr(select, "poll"):  # POSIX; elsewhere a worker finishes its job as before
        threading.Thread(target=watch, daemon=True, name="exit-with-server").start()


def main() -> int:
    # The protocol owns the real stdout; anything else that prints (task code, libraries) goes to stderr.
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _exit_with_the_server(protocol.fileno())
    # The job's imports (pydantic, the tasks, the sandbox) come after the watcher: a worker whose
    # server dies while it still imports exits at once, not when the imports end.
    from autoresearch_mcp.server.jobs.job import execute_job
    from autoresearch_mcp.server.text import scrub_paths

    for line in sys.stdin:
        try:
            reply: dict[str, Any] = {"ok": execute_job(json.loads(line))}
        except (
            Exception
        ) as exc:  # the top-level handler: report any failure as this job's error, keep serving
            traceback.print_exc()  # the full story goes to the server's log (our stderr is its stderr)
            reply = {"error": scrub_paths(f"{type(exc).__name__}: {exc}")[:1000]}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
