"""Run untrusted code in a child process, with limits, and turn whatever happens into a result.

The parent never imports candidate code. It writes a spec into a fresh temporary directory and starts
`python -I -m autoresearch_mcp.sandbox.child SPEC`, which imports a trusted harness entry point; the
harness runs candidate code only in confined forks of itself (isolate.py) and reports back through a
pipe no fork holds. What comes back is checked (results.py) before anyone reads it. A crash, a timeout, a
kill, a memory blow-up or a full disk comes back as a `SandboxResult`, never as an exception.
"""

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.sandbox import cgroups, seccomp
from autoresearch_mcp.sandbox.cgroups import EvaluationCgroup
from autoresearch_mcp.sandbox.identity import hand_over
from autoresearch_mcp.sandbox.isolation import nproc_binds, plan, process_cap_available
from autoresearch_mcp.sandbox.namespaces import (
    network_namespace_available,
    pid_namespace_available,
    user_flags,
)
from autoresearch_mcp.sandbox.resources import DIR_PREFIX, DiskWatch, sweep_stale_sandboxes
from autoresearch_mcp.sandbox.results import MAX_RESULT_BYTES, BadResult, crash_reason, parse_result
from autoresearch_mcp.sandbox.sealed import pipe_with
from autoresearch_mcp.sandbox.streams import HeadReader, TailReader, Waiter

__all__ = [
    "DIR_PREFIX",
    "network_namespace_available",
    "pid_namespace_available",
    "process_cap_available",
    "sweep_stale_sandboxes",
]

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
    memory_mb: int = Field(
        default=512,
        ge=64,
        description="address space per process (RLIMIT_AS), and the memory of all candidate processes "
        "together where there is a cgroup",
    )
    output_bytes: int = Field(default=64_000, ge=1024, description="captured stdout+stderr kept (the tail)")
    file_mb: int = Field(default=64, ge=1, description="largest file the child may write (RLIMIT_FSIZE)")
    disk_mb: int = Field(default=256, ge=1, description="all it may keep in its working directory at once")
    max_files: int = Field(default=10_000, ge=1, description="entries it may create in its working directory")
    processes: int = Field(default=64, ge=4, description="processes and threads at once, where capped")
    threads: int = Field(default=1, ge=1, description="OMP/BLAS threads the child may use")
    network: bool = Field(default=False, description="allow network access (off: a fresh network namespace)")
    new_processes: bool = Field(
        default=False,
        description="the task declares that its candidate code starts processes (fork, exec); "
        "otherwise a seccomp filter refuses them (threads stay allowed)",
    )


class SandboxResult(BaseModel):
    status: Literal["ok", "crash", "timeout"]
    reason: str = Field(description="one line: why it ended this way")
    returncode: int | None
    result: dict[str, Any] | None = Field(description="what the harness entry point returned")
    output_tail: str = Field(description="the last part of stdout and stderr")
    output_truncated: bool
    wall_s: float
    cpu_s: float
    candidate_cpu_s: float | None = Field(
        default=None, description="CPU time of the candidate's cgroup: its processes and all they started"
    )
    memory_peak_mb: float | None = Field(
        default=None, description="the most memory the candidate's processes held together (cgroup)"
    )
    isolation: list[str] = Field(description="what was enforced for this run")


SPIN_COUNT = "10000"


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
        # GNU OpenMP's idle threads spin 10,000 rounds, not 300,000, before they sleep: on a machine with
        # other work (workers side by side, a local model) the long spin made a two-thread XGBoost fit 3
        # to 4 times slower in CPU and wall; sleeping at once (OMP_WAIT_POLICY=PASSIVE) made it twice as
        # slow on an idle machine, where this bound costs nothing.
        GOMP_SPINCOUNT=SPIN_COUNT,
    )
    return env


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


def run_sandboxed(
    entry: str, payload: dict[str, Any], limits: Limits, sealed: Sequence[Any] = ()
) -> SandboxResult:
    """Run `entry` ("package.module:function", declared by a registered task) on `payload` in a
    limited child.

    The function gets the payload (plain JSON) and returns a JSON-able dict, which comes back checked
    (sandbox/results.py). Its working directory is a fresh temporary directory, named after this process
    (so a sweep after a crash knows whose it was), removed afterwards. `sealed`: values (plain JSON) the
    harness takes one at a time with `sealed.take()`, never in its memory before it needs them (the
    inputs of later timed calls: sealed.py says why).
    """
    if entry not in _ALLOWED_ENTRIES:
        raise ValueError(
            f"sandbox entry point {entry!r} is not declared by a registered task (Task.sandbox_entries)"
        )
    root = Path(tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-"))
    support = cgroups.cgroup_support()
    cgroup = None
    try:
        if support.version is not None:
            cgroup = EvaluationCgroup(support, limits.memory_mb * 1024 * 1024, limits.processes)
        return _run_in(root, entry, payload, limits, cgroup, sealed)
    finally:
        if cgroup is not None:
            cgroup.remove()
        shutil.rmtree(root, ignore_errors=True)


def _run_in(
    root: Path,
    entry: str,
    payload: dict[str, Any],
    limits: Limits,
    cgroup: EvaluationCgroup | None,
    sealed: Sequence[Any],
) -> SandboxResult:
    work = root / "work"
    work.mkdir()
    spec_path = root / "spec.json"
    prefix, isolation, read_only_mounts, ids, own_ipc = plan(limits, cgroup)
    if ids is not None:  # the user untrusted code runs as may enter `root` (not list it) and owns `work`
        root.chmod(0o711)
        hand_over(work, ids)
    cmd = [sys.executable, "-I", "-m", "autoresearch_mcp.sandbox.child", str(spec_path)]
    unshare = shutil.which("unshare")
    if prefix and unshare:
        cmd = [unshare, *(user_flags() or ()), *prefix, "--", *cmd]

    started = time.monotonic()
    # The child watches the read end and dies when it reads EOF: when we close the write end, or when
    # this process dies (a server killed mid-experiment must not leave training running). The result
    # comes back on a pipe of its own: only the harness frame holds its write end.
    watch_r, watch_w = os.pipe()
    result_r, result_w = os.pipe()
    sealed_r = pipe_with(sealed) if sealed else None
    quota_r, quota_w = os.pipe()  # the harness says what of the working directory is its own
    os.set_blocking(quota_r, False)
    spec = {
        "entry": entry,
        "import_root": _import_root(entry.partition(":")[0]),
        "payload": payload,
        "result_fd": result_w,
        "limits": limits.model_dump(),
        "nproc_rlimit": cgroup is None and nproc_binds(),
        "candidate_cgroup": None if cgroup is None else cgroup.candidate_spec(),
        "deny_processes": not limits.new_processes and seccomp.seccomp_available(),
        "read_only_mounts": read_only_mounts,
        "sandbox_ids": ids,
        "own_ipc": own_ipc,
        "sealed_fd": sealed_r,
        "quota_fd": quota_w,
    }
    spec_path.write_text(json.dumps(spec))
    env = {**_child_env(limits, work), "AUTORESEARCH_SANDBOX_WATCH_FD": str(watch_r)}
    if cgroup is not None:
        env["AUTORESEARCH_SANDBOX_CGROUP"] = json.dumps(cgroup.harness_procs())
    try:
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so a kill takes every descendant
            pass_fds=(watch_r, result_w, quota_w, *([] if sealed_r is None else [sealed_r])),
        )
    except BaseException:
        for fd in (watch_w, result_r, quota_r):
            os.close(fd)
        raise
    finally:
        for fd in (watch_r, result_w, quota_w, sealed_r):
            if fd is not None:
                os.close(fd)
    reader, results = TailReader(proc.stdout, limits.output_bytes), HeadReader(result_r, MAX_RESULT_BYTES)
    reader.start()
    results.start()
    waiter = Waiter(proc.pid)
    waiter.start()
    disk = DiskWatch(
        work, limits.disk_mb * 1024 * 1024, limits.max_files, lambda: _kill(proc, cgroup), quota_r
    )
    disk.start()
    waiter.join(timeout=limits.wall_s)
    timed_out = waiter.is_alive()
    _kill(proc, cgroup)  # on a timeout the child; always, anything it left behind
    waiter.join()
    proc.returncode = waiter.returncode  # reaped by the waiter: Popen must not think it still runs
    over_quota = disk.stop()
    os.close(quota_r)
    os.close(watch_w)
    reader.finish(grace_s=2)
    results.finish(grace_s=2)
    os.close(result_r)
    if proc.stdout is not None:
        proc.stdout.close()
    wall = time.monotonic() - started
    cpu = None if cgroup is None else cgroup.candidate_cpu_s()
    peak = None if cgroup is None else cgroup.memory_peak_bytes()
    tail = reader.tail()
    truncated = reader.total > limits.output_bytes
    code = waiter.returncode
    result: dict[str, Any] | None = None
    if timed_out:
        status, reason = "timeout", f"killed after the wall-clock limit of {limits.wall_s:g} s"
    elif over_quota:
        status, reason = "crash", over_quota
    elif code == 0:
        try:
            result = parse_result(results.data(), results.overflowed)
            status, reason = "ok", "finished"
        except BadResult as exc:
            status, reason = "crash", str(exc)
    else:
        status, reason = "crash", crash_reason(code, tail, limits)
        if cgroup is not None and (kills := cgroup.oom_kills()):
            reason = (
                f"the candidate's processes went over their {limits.memory_mb} MB together and the "
                f"kernel killed {kills} of them ({reason})"
            )
    if truncated:
        tail = f"[output truncated: {reader.total} bytes, last {limits.output_bytes} kept]\n" + tail
    return SandboxResult(
        status=status,
        reason=reason,
        returncode=code,
        result=result,
        output_tail=tail,
        output_truncated=truncated,
        wall_s=round(wall, 4),
        cpu_s=round(max(waiter.cpu_s, 0.0), 4),
        candidate_cpu_s=None if cpu is None else round(cpu, 4),
        memory_peak_mb=None if peak is None else round(peak / 2**20, 1),
        isolation=isolation,
    )


def _kill(proc: subprocess.Popen[bytes], cgroup: EvaluationCgroup | None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if cgroup is not None:  # also what left the process group (setsid) where there is no PID namespace
        cgroup.kill_all()
