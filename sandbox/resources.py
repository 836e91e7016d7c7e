"""Per-run resources beyond rlimits and the run's cgroup (cgroups.py): a disk quota for the working
directory, and the sweep that removes what a killed server left behind.

- Disk: RLIMIT_FSIZE caps each file; the total is polled (every POLL_S) from outside the sandbox, and the
  run is killed once its working directory holds more than its quota of bytes or files, then checked
  once more at the end. Between two polls a run can overshoot by what it writes in POLL_S.
- Sweep: sandbox directories and cgroups carry their owner's PID in their names; at start-up, those of
  processes that no longer exist are removed.
"""

import contextlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from autoresearch_mcp.sandbox.cgroups import sweep_stale_cgroups

DIR_PREFIX = "autoresearch-sandbox-"
POLL_S = 0.2


class DiskWatch(threading.Thread):
    """Polls a directory's size and entry count; calls `on_over` (once) when either passes its cap."""

    def __init__(self, path: Path, max_bytes: int, max_files: int, on_over: Callable[[], None]) -> None:
        super().__init__(daemon=True, name="sandbox-disk-watch")
        self.path, self.max_bytes, self.max_files, self.on_over = path, max_bytes, max_files, on_over
        self.problem: str | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(POLL_S):
            if self.check():
                self.on_over()
                return

    def stop(self) -> str | None:
        """Stop polling, check once more, and say what was over the quota (None when nothing was)."""
        self._halt.set()
        self.join()
        self.check()
        return self.problem

    def check(self) -> bool:
        if self.problem is None:
            used, files = usage(self.path, self.max_files)
            if files > self.max_files:
                self.problem = f"created more than {self.max_files} files in its working directory"
            elif used > self.max_bytes:
                self.problem = (
                    f"wrote more than {self.max_bytes // (1024 * 1024)} MB in its working directory"
                )
        return self.problem is not None


def usage(root: Path, max_files: int) -> tuple[int, int]:
    """Bytes allocated and entries beneath `root`; counting stops past `max_files` entries."""
    total, count = 0, 0
    stack = [str(root)]
    while stack and count <= max_files:
        try:
            entries = os.scandir(stack.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                count += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += max(info.st_blocks * 512, info.st_size if stat.S_ISREG(info.st_mode) else 0)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
    return total, count


# -- the sweep -------------------------------------------------------------------------------------
def pid_alive(pid: int) -> bool:
    """Whether a process with this PID exists on this host (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_alive(name: str, prefix: str) -> bool:
    pid_text, tagged, _ = name[len(prefix) :].partition("-")
    if not tagged or not pid_text.isdigit():
        return True  # not ours to judge (an untagged layout, or someone else's)
    pid = int(pid_text)
    return pid == os.getpid() or pid_alive(pid)


def sweep_stale_sandboxes() -> int:
    """Remove sandbox directories and cgroups whose owning process is gone; how many were removed."""
    removed = 0
    with contextlib.suppress(OSError):
        for entry in Path(tempfile.gettempdir()).iterdir():
            if (
                entry.name.startswith(DIR_PREFIX)
                and entry.is_dir()
                and not _owner_alive(entry.name, DIR_PREFIX)
            ):
                shutil.rmtree(entry, ignore_errors=True)
                removed += not entry.exists()
    return removed + sweep_stale_cgroups(_owner_alive)
