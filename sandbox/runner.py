"""Run untrusted code in a child process, with limits, and turn whatever happens into a result.

The parent never imports candidate code. It writes a spec into a fresh temporary directory and starts
`python -I -m autoresearch_mcp.sandbox.child SPEC`, which imports a trusted harness entry point from this
package; the harness loads the candidate source and reports back through a result file. A crash, a
timeout, a kill or a memory blow-up comes back as a `SandboxResult`, never as an exception.
"""

import contextlib
import importlib.util
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.sandbox.child import landlock_abi

# Variables the child may keep. Everything else (API keys, tokens, AUTORESEARCH_* configuration) is
# dropped. The OPENBLAS ones work around processors where old OpenBLAS builds crash.
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# Entry points the child may import: "module:function" pairs that registered tasks declare
# (Task.sandbox_entries), so a plugin task can ship its own harness. Nothing else is ever imported there.
_ALLOWED_ENTRIES: set[str] = {"autoresearch_mcp.sandbox.script:run_script"}


class Limits(BaseModel):
    """Per-task resource limits for one sandboxed execution."""

    model_config = ConfigDict(frozen=True)

    wall_s: float = Field(default=60.0, gt=0, description="wall-clock limit; the process group is killed")
    cpu_s: float = Field(default=60.0, gt=0, description="CPU seconds (RLIMIT_CPU)")
    memory_mb: int = Field(default=512, ge=64, description="address space (RLIMIT_AS)")
    output_bytes: int = Field(default=64_000, ge=1024, description="captured stdout+stderr kept (the tail)")
    file_mb: int = Field(default=64, ge=1, description="largest file the child may write (RLIMIT_FSIZE)")
    threads: int = Field(default=1, ge=1, description="OMP/BLAS threads the child may use")
    network: bool = Field(default=False, description="allow network access (off: a fresh network namespace)")


class SandboxResult(BaseModel):
    status: Literal["ok", "crash", "timeout"]
    reason: str = Field(description="one line: why it ended this way")
    returncode: int | None
    result: dict[str, Any] | None = Field(description="what the harness entry point returned")
    output_tail: str = Field(description="the last part of stdout and stderr")
    output_truncated: bool
    wall_s: float
    cpu_s: float
    isolation: list[str] = Field(description="what was enforced for this run")


def _unshare_works(flags: tuple[str, ...]) -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        probe = subprocess.run([unshare, *flags, "--", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


# Without root, namespaces need an unprivileged user namespace first (where the distribution allows it).
_AS_USER = ("--user", "--map-root-user")
_PID_FLAGS = ("--pid", "--fork", "--kill-child", "--mount-proc")


@lru_cache(maxsize=1)
def _user_flags() -> tuple[str, ...] | None:
    """() when namespaces can be made directly, the user-namespace flags when only those work, else None."""
    for flags in ((), _AS_USER):
        if _unshare_works((*flags, "--net")) or _unshare_works((*flags, *_PID_FLAGS)):
            return flags
    return None


@lru_cache(maxsize=1)
def network_namespace_available() -> bool:
    """True when `unshare --net` works here (root, or user namespaces allowed)."""
    flags = _user_flags()
    return flags is not None and _unshare_works((*flags, "--net"))


@lru_cache(maxsize=1)
def pid_namespace_available() -> bool:
    """True when the child can get its own PID namespace and /proc (it then sees no other process)."""
    flags = _user_flags()
    return flags is not None and _unshare_works((*flags, *_PID_FLAGS))


def _child_env(limits: Limits, home: Path) -> dict[str, str]:
    env = {key: os.environ[key] for key in ENV_ALLOW if key in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    threads = str(limits.threads)
    env.update(
        HOME=str(home),
        TMPDIR=str(home),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONHASHSEED="0",
        JOBLIB_MULTIPROCESSING="0",  # one process by design; it would only warn that /dev/shm is closed
        OMP_NUM_THREADS=threads,
        OPENBLAS_NUM_THREADS=threads,
        MKL_NUM_THREADS=threads,
    )
    return env


class _Waiter(threading.Thread):
    """Reaps the child with wait4, which also gives the CPU time of it and its descendants."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.returncode: int | None = None
        self.cpu_s = 0.0

    def run(self) -> None:
        _, status, usage = os.wait4(self.pid, 0)
        self.returncode = os.waitstatus_to_exitcode(status)
        self.cpu_s = usage.ru_utime + usage.ru_stime


class _TailReader(threading.Thread):
    """Drains a pipe so the child never blocks on it, keeping only the last `cap` bytes.

    It polls instead of blocking in read, so that it can stop (and the pipe can be closed) even while a
    stray descendant still holds the write end open.
    """

    def __init__(self, stream: Any, cap: int) -> None:
        super().__init__(daemon=True)
        self.fd, self.cap = stream.fileno(), cap
        self.chunks: deque[bytes] = deque()
        self.kept = 0
        self.total = 0
        self.deadline: float | None = None  # set once the child has ended: drain until then, then stop

    def finish(self, grace_s: float) -> None:
        self.deadline = time.monotonic() + grace_s
        self.join(timeout=grace_s + 1)

    def run(self) -> None:
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP)
        while self.deadline is None or time.monotonic() < self.deadline:
            if not poller.poll(50):
                if self.deadline is not None:
                    return  # the child has ended and nothing more is coming now
                continue
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return
            self.total += len(chunk)
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.kept - len(self.chunks[0]) >= self.cap:
                self.kept -= len(self.chunks.popleft())

    def tail(self) -> str:
        data = b"".join(self.chunks)[-self.cap :]
        return data.decode("utf-8", errors="replace")


def allow_entry(entry: str) -> None:
    """Admit a trusted harness entry point ("package.module:function"); the task registry calls this
    for every entry a registered task declares."""
    module, _, func = entry.partition(":")
    if not module or not func.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        raise ValueError(f"a sandbox entry point is 'package.module:function', got {entry!r}")
    _ALLOWED_ENTRIES.add(entry)


def _import_root(module: str) -> str | None:
    """The sys.path entry the module is found under, for a child started with -I (which ignores
    PYTHONPATH): None when it is part of an installed package the child finds by itself."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    origin = Path(spec.origin)
    depth = module.count(".") + (1 if origin.name == "__init__.py" else 0) + 1
    root = origin.parents[depth - 1]
    return None if module.startswith("autoresearch_mcp.") else str(root)


def run_sandboxed(entry: str, payload: dict[str, Any], limits: Limits) -> SandboxResult:
    """Run `entry` ("package.module:function", declared by a registered task) on `payload` in a
    limited child.

    The function gets the payload (plain JSON) and returns a JSON-able dict. Its working directory is a
    fresh temporary directory that is removed afterwards.
    """
    if entry not in _ALLOWED_ENTRIES:
        raise ValueError(
            f"sandbox entry point {entry!r} is not declared by a registered task (Task.sandbox_entries)"
        )
    root = Path(tempfile.mkdtemp(prefix="autoresearch-sandbox-"))
    try:
        return _run_in(root, entry, payload, limits)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_in(root: Path, entry: str, payload: dict[str, Any], limits: Limits) -> SandboxResult:
    work = root / "work"
    work.mkdir()
    result_path = root / "result.json"
    spec_path = root / "spec.json"
    spec = {
        "entry": entry,
        "import_root": _import_root(entry.partition(":")[0]),
        "payload": payload,
        "result_path": str(result_path),
        "limits": limits.model_dump(),
    }
    spec_path.write_text(json.dumps(spec))

    isolation = [
        f"rlimit: address space {limits.memory_mb} MB, cpu {limits.cpu_s:g} s, files {limits.file_mb} MB",
        f"wall clock {limits.wall_s:g} s",
        "scrubbed environment",
        "temporary working directory",
    ]
    cmd = [sys.executable, "-I", "-m", "autoresearch_mcp.sandbox.child", str(spec_path)]
    unshare = shutil.which("unshare")
    prefix: list[str] = []
    if not limits.network and network_namespace_available():
        prefix += ["--net"]
        isolation.append("no network (empty network namespace)")
    elif not limits.network:
        isolation.append("network NOT isolated (no permission to create a network namespace)")
    if pid_namespace_available():
        # Every process the child starts dies with it (the namespace's init is the child), and its own
        # /proc hides every other process, with their environments.
        prefix += _PID_FLAGS
        isolation.append("own PID namespace and /proc (stray processes die with it)")
    else:
        isolation.append("no PID namespace: a process that leaves its process group can outlive the run")
    if prefix and unshare:
        cmd = [unshare, *(_user_flags() or ()), *prefix, "--", *cmd]
    abi = landlock_abi()
    if abi:
        isolation.append(
            f"Landlock ABI {abi}: writes only in the working directory, reads only Python, system "
            "libraries and the files the task names"
            + (", no TCP" if abi >= 4 and not limits.network else "")
            + (", no signals to other processes" if abi >= 6 else "")
        )
    else:
        isolation.append("filesystem NOT confined (no Landlock): the child can read what this user can")

    started = time.monotonic()
    # The child watches the read end and dies when it reads EOF: when we close the write end, or when
    # this process dies (a server killed mid-experiment must not leave training running).
    watch_r, watch_w = os.pipe()
    env = {**_child_env(limits, work), "AUTORESEARCH_SANDBOX_WATCH_FD": str(watch_r)}
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a kill takes every descendant
            pass_fds=(watch_r,),
        )
    except BaseException:
        os.close(watch_w)
        raise
    finally:
        os.close(watch_r)
    reader = _TailReader(proc.stdout, limits.output_bytes)
    reader.start()
    waiter = _Waiter(proc.pid)
    waiter.start()
    waiter.join(timeout=limits.wall_s)
    timed_out = waiter.is_alive()
    _kill_group(proc)  # on a timeout the child; always, anything it left in its process group
    waiter.join()
    os.close(watch_w)
    proc.returncode = waiter.returncode
    reader.finish(grace_s=2)
    if proc.stdout is not None:
        proc.stdout.close()
    wall = time.monotonic() - started
    cpu = waiter.cpu_s
    tail = reader.tail()
    truncated = reader.total > limits.output_bytes
    result = _read_result(result_path)
    code = proc.returncode

    if timed_out:
        status, reason = "timeout", f"killed after the wall-clock limit of {limits.wall_s:g} s"
    elif code == 0 and result is not None:
        status, reason = "ok", "finished"
    else:
        status, reason = "crash", _crash_reason(code, tail, limits)
    if truncated:
        tail = f"[output truncated: {reader.total} bytes, last {limits.output_bytes} kept]\n" + tail
    return SandboxResult(
        status=status,
        reason=reason,
        returncode=code,
        result=result if status == "ok" else None,
        output_tail=tail,
        output_truncated=truncated,
        wall_s=round(wall, 4),
        cpu_s=round(max(cpu, 0.0), 4),
        isolation=isolation,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def _read_result(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _crash_reason(code: int | None, tail: str, limits: Limits) -> str:
    if "MemoryError" in tail or "std::bad_alloc" in tail:
        return f"ran out of memory (limit {limits.memory_mb} MB of address space)"
    if code is not None and code < 0:
        sig = signal.Signals(-code)
        if sig == signal.SIGXCPU:
            return f"exceeded the CPU limit of {limits.cpu_s:g} s"
        if sig == signal.SIGXFSZ:
            return f"wrote a file larger than the limit of {limits.file_mb} MB"
        return f"killed by signal {sig.name}"
    if code is not None and code > 128 and code - 128 in signal.valid_signals():
        # unshare --fork reports a killed child as 128 + signal
        sig = signal.Signals(code - 128)
        if sig == signal.SIGXCPU:
            return f"exceeded the CPU limit of {limits.cpu_s:g} s"
        return f"killed by signal {sig.name}"
    last = next((line for line in reversed(tail.splitlines()) if line.strip()), "")
    return f"exited with code {code}: {last[:200]}" if last else f"exited with code {code}"
