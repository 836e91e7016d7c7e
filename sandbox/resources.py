"""Per-run resources beyond rlimits and the run's cgroup (cgroups.py): a disk quota for the working
directory, and the sweep that removes what a killed server left behind.

- Disk: RLIMIT_FSIZE caps each file; the total is polled (every POLL_S) from outside the sandbox, and the
  run is killed once its working directory holds more than its quota of bytes or files, then checked
  once more at the end. Between two polls a run can overshoot by what it writes in POLL_S. What the
  trusted harness puts there itself before any untrusted code runs (a task folder laid out, perhaps
  100,000 files) is not the run's: the harness says so on a pipe only it holds (`hold_quota`, then
  `exclude_from_quota`), and the quota counts on top of it.
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
    """Polls a directory's size and entry count; calls `on_over` (once) when either passes its cap.
    `harness_fd`: the read end of the harness's quota pipe (non-blocking), whose lines say what of the
    directory is the harness's own (`hold`: it is laying it out, do not count yet; `own BYTES ENTRIES`)."""

    def __init__(
        self,
        path: Path,
        max_bytes: int,
        max_files: int,
        on_over: Callable[[], None],
        harness_fd: int | None = None,
    ) -> None:
        super().__init__(daemon=True, name="sandbox-disk-watch")
        self.path, self.max_bytes, self.max_files, self.on_over = path, max_bytes, max_files, on_over
        self.problem: str | None = None
        self._halt = threading.Event()
        self._harness_fd, self._said = harness_fd, b""
        self.held, self.own_bytes, self.own_files = False, 0, 0

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
        self._hear_the_harness()
        if self.problem is None and not self.held:
            used, files = usage(self.path, self.max_files + self.own_files)
            if self._hear_the_harness():
                return False  # it spoke while this counted (a layout begun): count again next time
            if files > self.max_files + self.own_files:
                self.problem = f"created more than {self.max_files} files in its working directory"
            elif used > self.max_bytes + self.own_bytes:
                self.problem = (
                    f"wrote more than {self.max_bytes // (1024 * 1024)} MB in its working directory"
                )
        return self.problem is not None

    def _hear_the_harness(self) -> bool:
        """Read what the harness said since the last time; whether it said anything."""
        if self._harness_fd is None:
            return False
        with contextlib.suppress(BlockingIOError):
            while chunk := os.read(self._harness_fd, 4096):
                self._said += chunk
        *lines, self._said = self._said.split(b"\n")
        for line in lines:
            words = line.split()
            if words == [b"hold"]:
                self.held = True
            elif len(words) == 3 and words[0] == b"own" and all(w.isdigit() for w in words[1:]):
                self.held, self.own_bytes, self.own_files = False, int(words[1]), int(words[2])
        return bool(lines)


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


# -- the harness's side of the quota pipe ----------------------------------------------------------
_quota_fd: list[int] = []


def open_quota_pipe(fd: int) -> None:
    """In the harness: the write end of the runner's quota pipe (no child process inherits it)."""
    os.set_inheritable(fd, False)
    _quota_fd[:] = [fd]


def hold_quota() -> None:
    """In the harness, before it fills the working directory itself: do not count what follows yet."""
    _tell(b"hold\n")


def exclude_from_quota(root: Path) -> None:
    """In the harness, once it has filled `root` and before any untrusted code runs: what is there now
    is its own, and the quota counts on top of it from here on."""
    used, files = usage(root, 10**9)
    _tell(f"own {used} {files}\n".encode())


def _tell(line: bytes) -> None:
    if _quota_fd:
        os.write(_quota_fd[0], line)


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
