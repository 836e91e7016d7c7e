"""One cgroup per evaluation, holding every process the candidate starts (the server's side).

Each sandbox run gets a cgroup of its own, `autoresearch-<server pid>-<id>`, with two leaves:

    autoresearch-.../           pids: every process and thread of the run, harness included
        harness/                the sandboxed harness (trusted code; it never runs candidate code)
        candidate/              every process that runs candidate code and whatever it starts: a memory
                                limit for the whole tree, its CPU time; the harness empties it (kills
                                everything in it) before each trusted measurement (candidate.py)

cgroup v2 where this process's cgroup, or its parent, delegates the memory and pids controllers to its
children; otherwise cgroup v1, with the memory and pids hierarchies (and cpuacct where mounted) in which
this process may create directories (root, or a delegated hierarchy). Neither: `cgroup_support()` says
why, and the runner and the server state the weaker guarantee (runner.py). The directories carry the
server's PID, so a restarted server removes those of a dead one (`sweep_stale_cgroups`).
"""

import contextlib
import os
import signal
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

CGROUP_PREFIX = "autoresearch-"
V1_CONTROLLERS = ("memory", "pids", "cpuacct")  # cpuacct is optional: CPU time then comes from rusage


@dataclass(frozen=True)
class Support:
    """Where this process may make evaluation cgroups: the directory per hierarchy ("" for v2)."""

    version: Literal["v2", "v1"] | None
    roots: dict[str, Path] = field(default_factory=dict)
    reason: str = ""  # why there is none

    def describe(self) -> str:
        if self.version == "v2":
            return "cgroup v2 (memory, pids, cpu.stat)"
        if self.version == "v1":
            return "cgroup v1 (" + ", ".join(sorted(self.roots)) + ")"
        return f"no cgroup ({self.reason})"


def _mounts() -> list[tuple[str, Path, str, set[str]]]:
    """(root within the hierarchy, mount point, fs type, super options) of each cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                found.append((fields[3], Path(fields[4]), tail[0], set(tail[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """This process's cgroup path per hierarchy: controller names for v1, "" for v2."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for name in controllers.split(",") if controllers else [""]:
                paths[name] = path
    return paths


def _beneath(mount_root: str, mount_point: Path, path: str) -> Path | None:
    relative = os.path.relpath(path, mount_root)
    return None if relative.startswith("..") else (mount_point / relative).resolve()


def _can_create_in(directory: Path) -> bool:
    if not (directory / "cgroup.procs").exists() or not os.access(directory, os.W_OK):
        return False
    probe = directory / f"{CGROUP_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _v2_root(mounts: list[tuple[str, Path, str, set[str]]], path: str) -> Path | None:
    for mount_root, point, kind, _ in mounts:
        own = _beneath(mount_root, point, path) if kind == "cgroup2" else None
        if own is None:
            continue
        for directory in (own, own.parent):  # ours, or our parent's (a sibling of ours)
            try:
                delegated = set((directory / "cgroup.subtree_control").read_text().split())
            except OSError:
                continue
            if {"memory", "pids"} <= delegated and _can_create_in(directory):
                return directory
    return None


@lru_cache(maxsize=1)
def cgroup_support() -> Support:
    """Probed once: v2 with memory and pids delegated, else v1 with memory and pids, else none."""
    mounts, paths = _mounts(), _own_paths()
    if not mounts:
        return Support(None, reason="no cgroup file system is mounted")
    if "" in paths and (root := _v2_root(mounts, paths[""])) is not None:
        return Support("v2", {"": root})
    roots: dict[str, Path] = {}
    for controller in V1_CONTROLLERS:
        for mount_root, point, kind, options in mounts:
            if kind == "cgroup" and controller in options and controller in paths:
                directory = _beneath(mount_root, point, paths[controller])
                if directory is not None and _can_create_in(directory):
                    roots[controller] = directory
                    break
    if "memory" in roots and "pids" in roots:
        return Support("v1", roots)
    return Support(
        None,
        reason="no cgroup v2 directory delegates memory and pids to this process, and no writable "
        "cgroup v1 memory and pids hierarchies (not root, or not delegated)",
    )


@dataclass
class EvaluationCgroup:
    """The cgroup of one sandbox run (see the module's docstring); `remove()` kills and removes it."""

    support: Support
    memory_bytes: int
    processes: int
    name: str = field(default_factory=lambda: f"{CGROUP_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}")
    made: list[Path] = field(default_factory=list)

    def __post_init__(self) -> None:
        try:
            self._make()
        except OSError:
            self.remove()
            raise

    def _dir(self, controller: str, leaf: str = "") -> Path:
        root = self.support.roots["" if self.support.version == "v2" else controller]
        return root / self.name / leaf if leaf else root / self.name

    def _make(self) -> None:
        for root in self.support.roots.values():
            for directory in (root / self.name, root / self.name / "harness", root / self.name / "candidate"):
                directory.mkdir()
                self.made.append(directory)
                # Only the server's user may enter it: untrusted code (another user, identity.py) reads no
                # run's processes or limits, its own or another server's.
                directory.chmod(0o700)
        memory, candidate = str(self.memory_bytes), self._dir("memory", "candidate")
        if self.support.version == "v2":
            (self._dir("")).joinpath("cgroup.subtree_control").write_text("+memory +pids")
            (self._dir("pids") / "pids.max").write_text(str(self.processes))
            (candidate / "memory.max").write_text(memory)
            with contextlib.suppress(OSError):  # no swap accounting: no swap to fill either
                (candidate / "memory.swap.max").write_text("0")
        else:
            (self._dir("pids") / "pids.max").write_text(str(self.processes))
            (candidate / "memory.limit_in_bytes").write_text(memory)
            with contextlib.suppress(OSError):  # memory + swap, where swap is accounted
                (candidate / "memory.memsw.limit_in_bytes").write_text(memory)

    def harness_procs(self) -> list[str]:
        """The files the harness writes "0" to, to join the run's cgroup (one per hierarchy)."""
        return [str(root / self.name / "harness" / "cgroup.procs") for root in self.support.roots.values()]

    def candidate_spec(self) -> dict[str, Any]:
        """What the harness needs to run the candidate leaf (candidate.py opens it before confining)."""
        leaf = {key: root / self.name / "candidate" for key, root in self.support.roots.items()}
        if self.support.version == "v2":
            return {
                "procs": [str(leaf[""] / "cgroup.procs")],
                "kill": str(leaf[""] / "cgroup.kill"),
                "cpu": str(leaf[""] / "cpu.stat"),
            }
        return {
            "procs": [str(path / "cgroup.procs") for path in leaf.values()],
            "kill": None,
            "cpu": str(leaf["cpuacct"] / "cpuacct.usage") if "cpuacct" in leaf else None,
        }

    def candidate_cpu_s(self) -> float | None:
        spec = self.candidate_spec()
        if spec["cpu"] is None:
            return None
        with contextlib.suppress(OSError, ValueError):
            return read_cpu_ns(Path(spec["cpu"]).read_bytes()) / 1e9
        return None

    def memory_peak_bytes(self) -> int | None:
        name = "memory.peak" if self.support.version == "v2" else "memory.max_usage_in_bytes"
        with contextlib.suppress(OSError, ValueError):
            return int((self._dir("memory", "candidate") / name).read_text().split()[0])
        return None

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the candidate tree's memory limit."""
        name = "memory.events" if self.support.version == "v2" else "memory.oom_control"
        with contextlib.suppress(OSError, ValueError):
            for line in (self._dir("memory", "candidate") / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def kill_all(self) -> None:
        for directory in reversed(self.made):
            kill_cgroup(directory)

    def remove(self) -> None:
        for directory in reversed(self.made):  # leaves first: a cgroup with children cannot go
            remove_cgroup(directory)
        self.made.clear()


def read_cpu_ns(text: bytes) -> int:
    """CPU time from cpuacct.usage (v1, nanoseconds) or cpu.stat's usage_usec (v2)."""
    for line in text.decode().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) * 1000
    return int(text.split()[0])


def kill_cgroup(path: Path) -> None:
    with contextlib.suppress(OSError):  # v2: one write kills everything in it, atomically
        (path / "cgroup.kill").write_text("1")
    for _ in range(50):  # v1: a process may fork while we kill (up to pids.max): repeat until empty
        try:
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        threading.Event().wait(0.01)


def remove_cgroup(path: Path) -> None:
    for child in sorted((p for p in path.iterdir() if p.is_dir()), reverse=True) if path.is_dir() else []:
        remove_cgroup(child)
    kill_cgroup(path)
    for _ in range(100):  # rmdir fails while the killed processes are still being reaped
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            threading.Event().wait(0.02)


def sweep_stale_cgroups(owner_alive: Callable[[str, str], bool]) -> int:
    """Remove evaluation cgroups whose owning server is gone (`owner_alive(name, prefix)` decides)."""
    removed = 0
    for root in cgroup_support().roots.values():
        with contextlib.suppress(OSError):
            for entry in root.iterdir():
                ours = entry.name.startswith(CGROUP_PREFIX) and entry.is_dir()
                if ours and not owner_alive(entry.name, CGROUP_PREFIX):
                    remove_cgroup(entry)
                    removed += not entry.exists()
    return removed
