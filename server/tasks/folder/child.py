"""The harness of a task folder, inside the sandbox: run the user's command, report what it printed.

Runs in the sandboxed child (sandbox/child.py): its writes are already confined to the working
directory. It lays the folder out there (its directories made afresh, small files copied, large ones
linked, the run's version of the edited files written in their place; the declared `reads` at the
places they have beside the folder), so relative paths resolve as they would in the folder while
nothing of the user's can be written (`_Layout` says how); then it confines reads to the folder, the
declared `reads`, the interpreter and the system, and starts the command. The command runs one Landlock domain
deeper (writes only in the working directory, no TCP, no signals to the harness) under a seccomp filter (no
Unix sockets, no mounts), with no capabilities and a scrubbed environment plus AUTORESEARCH_PARAMS. The
folder and the declared `reads` are read-only mounts for it where the server found that mounts work
(`read_only_paths`; sandbox/isolation.py): Landlock leaves a file's mode, owner and times open, a read-only
mount does not. There is no Python allow-list: the script is
its owner's code, and the agent's edits to it are held by the OS layers alone (docs/sandbox.md). What comes
back is the exit status and the ends of stdout and stderr; the server parses the metric lines.
"""

import json
import os
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from autoresearch_mcp.sandbox import candidate, identity, profiler, resources, seccomp
from autoresearch_mcp.sandbox.child import (
    confine_fork,
    confine_fork_reads,
    confine_reads,
    hidden_read_rules,
    landlock_abi,
    read_roots,
)
from autoresearch_mcp.server.tasks.folder.evaluation import evaluate
from autoresearch_mcp.server.tasks.folder.layout import lay_out

CONFINES_READS = True  # reads are confined here, once the folder is laid out (sandbox/child.py)
STDOUT_KEEP = 64_000
STDERR_KEEP = 8_000
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "TMPDIR", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
ENV_KEEP += ("MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONHASHSEED", "GOMP_SPINCOUNT")


def _hidden(payload: dict[str, Any]) -> list[str]:
    """What only the evaluator may read ([evaluate]'s reads, resolved)."""
    evaluation = payload.get("evaluate") or {}
    return list(evaluation.get("hidden", []))


def read_only_paths(payload: dict[str, Any]) -> list[str]:
    """What sandbox/child.py mounts read-only before it confines itself (not run_command: by then Landlock
    refuses this process any mount): the folder and the declared reads (the evaluator's too), so that no
    version of the script can chmod, chown, utime or setxattr the user's files (Landlock does not handle
    those calls). Refusing the calls themselves with seccomp was the other way: it would reach every file,
    but shutil.copy, copystat and tempfile chmod their own files in the working directory, and common code
    would break."""
    return [payload["folder_path"], *(real for _, real in payload["reads"]), *_hidden(payload)]


def readable_paths(payload: dict[str, Any], *, evaluator: bool = True) -> list[str]:
    """What the harness and the evaluator may read besides the system and the server's interpreter
    (sandbox/child.py makes it reachable to the sandbox's user, then `run_command` confines reads to it):
    the folder, the declared reads, the installation of the interpreter that runs the script (a venv and
    its base), and the evaluator's reads; the script, one Landlock domain deeper, all but those."""
    python = Path(payload["python_path"])
    interpreter = {python.parent.parent, python.resolve().parent.parent}
    paths = [payload["folder_path"], *(real for _, real in payload["reads"]), *map(str, interpreter)]
    return paths + (_hidden(payload) if evaluator else [])


def _tail(stream: IO[bytes], keep: int, out: list[bytes]) -> None:
    data = bytearray()
    for chunk in iter(lambda: stream.read(65536), b""):
        data += chunk
        if len(data) > 4 * keep:
            del data[: len(data) - keep]
    out.append(bytes(data[-keep:]))


def _environment(payload: dict[str, Any], work: Path) -> dict[str, str]:
    """The script's environment: the harness's scrubbed one, its own home, its params and seed."""
    env = {key: value for key, value in os.environ.items() if key in ENV_KEEP}
    env.update(HOME=str(work), TMPDIR=str(work), AUTORESEARCH_SEED=str(payload["seed"]), PYTHONUNBUFFERED="1")
    return env


# Run by the interpreter as `python -c BOOT ARGS...` after seccomp.py's own source (self-contained: any
# CPython runs it, the server's package or not): install the filter, then run the script (or `-m
# module`, or `-c code`) as `python ARGS...` would, its folder first on sys.path (not its real one: a
# copied or linked script must import the run's versions of its neighbours).
BOOT_RUN = """
import os as _os, runpy as _runpy, sys as _sys
def _run():
    _args = _sys.argv[1:]
    if _args[0] == "-m":
        _sys.argv = _args[1:]
        _sys.path.insert(0, _os.getcwd())  # as `python -m` has it (the boot took it off)
        _runpy.run_module(_args[1], run_name="__main__", alter_sys=True)
    elif _args[0] == "-c":
        _sys.argv = ["-c", *_args[2:]]
        _sys.path.insert(0, "")
        exec(compile(_args[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        _sys.argv = _args
        _sys.path.insert(0, _os.path.dirname(_os.path.abspath(_args[0])))
        _runpy.run_path(_args[0], run_name="__main__")
"""
# The profiled run, after profiler.py's own source: sample the whole run by function, trace the edit
# files line by line (until the tracer's event cap), and write what was measured to the file that
# AUTORESEARCH_PROFILE names, whatever way the script ends short of os._exit.
BOOT_PROFILED = """
import json as _json
_spec = _json.loads(_os.environ.pop("AUTORESEARCH_PROFILE"))
_names = {}
for _name in _spec["files"]:
    _names[_name] = _name
    _names[_os.path.join(_os.getcwd(), _name)] = _name
_overhead = calibrate()
_sampler, _tracer = Sampler(set(_names)), LineProfiler(set(_names), max_events=_spec["max_events"])
def _rows(rows):
    return [[_names[f], line, seconds, hits] for f, line, seconds, hits in rows]
_sampler.start()
_tracer.start()
try:
    _run()
finally:
    _tracer.stop()
    _sampler.stop()
    with open(_spec["out"], "w") as _out:
        _json.dump({"sampled": _rows(_sampler.rows()), "traced": _rows(_tracer.rows(_overhead)),
                    "other_s": _sampler.other_s, "calls": 1}, _out)
"""
PROFILE_FILE = ".autoresearch-profile.json"
# Line events traced per profiled run of a script: about 1 s of tracing (the whole run is sampled). A
# benchmark that loops in Python hit the profiler's default cap (3M events) and took 6.7 s, not 0.2 s.
TRACED_EVENTS = 300_000
MAX_PROFILE_BYTES = 2_000_000


def booted(command: list[str], python: str, deny: bool, profile: bool) -> list[str]:
    """`command` (whose first word is the interpreter) run by a boot that installs the process filter
    before the script's first line (`deny`) and profiles the run (`profile`): the interpreter's own
    options stay in front of `-c`. Unchanged when there is nothing to do."""
    if not deny and not profile:
        return command
    rest = command[1:]
    options = []
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        options.append(rest.pop(0))
    if not rest:
        raise ValueError("the command names no script, -m module or -c code after the interpreter")
    # `-c` puts the working directory first on sys.path, and HOME (the working directory too) holds the
    # user site: an earlier run of the script (the profiled run follows the first in the same directory)
    # could leave a platform.py or usercustomize.py there for the boot to import before its filter. So
    # -s, and the directory off sys.path until the script's own is put there (BOOT_RUN).
    options = ["-s", *options]
    boot = 'import sys as _boot_sys\nif _boot_sys.path[:1] == [""]:\n    del _boot_sys.path[0]\n'
    if deny:
        boot += Path(seccomp.__file__).read_text(encoding="utf-8") + "\ndeny_new_processes()\n"
    boot += BOOT_RUN
    if profile:
        boot += Path(profiler.__file__).read_text(encoding="utf-8") + BOOT_PROFILED
    else:
        boot += "\n_run()\n"
    return [python, *options, "-c", boot, *rest]


def run_command(payload: dict[str, Any]) -> dict[str, Any]:
    """Payload: the folder, the run's files, the command and its settings. With `evaluate`, the folder's
    evaluator runs on what the first run left (evaluation.py), and its report comes back beside the
    script's. With `profile`, the command runs a second time under the profiler once the first run ended
    well (`profile_only`: that run alone), and the report carries what it measured."""
    work = Path.cwd()
    folder = Path(payload["folder_path"])
    hidden = _hidden(payload)
    # Links are safe only where Landlock confines writes (sandbox/child.py did, if the kernel has it).
    links = landlock_abi() > 0
    resources.hold_quota()  # the layout is not the script's: it may hold more files than its quota
    cwd = lay_out(folder, work, payload["files"], payload["reads"], links=links, hidden=hidden)
    if candidate.Setup.ids is not None:  # the script runs as the sandbox's user: the layout is its own
        identity.hand_over(work, candidate.Setup.ids)
    resources.exclude_from_quota(work)
    python = Path(payload["python_path"])
    confine_reads(readable_paths(payload))
    # The script reads all the harness may but what only the evaluator may: one Landlock layer more.
    rules = (
        hidden_read_rules(read_roots(readable_paths(payload, evaluator=False)), hidden) if hidden else None
    )
    deny = candidate.Setup.deny_processes  # the task did not declare processes; seccomp is here
    command = payload["command"]
    can_profile = bool(payload.get("profile")) and Path(command[0]) == python
    env = {**_environment(payload, work), "AUTORESEARCH_PARAMS": payload["params"]}
    timeout = float(payload["timeout_s"])
    report: dict[str, Any] = {"profile": None}
    if not payload.get("profile_only"):
        plain = booted(command, str(python), deny, profile=False)
        report.update(_run(plain, env, cwd, work, timeout, rules))
        if report["returncode"] != 0 or report["timed_out"]:
            return report
        if payload.get("evaluate"):
            evaluator = booted(payload["evaluate"]["command"], str(python), deny, profile=False)
            report["evaluation"] = evaluate(
                payload,
                work,
                cwd,
                _environment(payload, work),
                lambda *how: _run(evaluator, *how),
                links=links,
            )
    if can_profile:
        spec = {"files": list(payload["files"]), "out": str(work / PROFILE_FILE), "max_events": TRACED_EVENTS}
        profiled = booted(command, str(python), deny, profile=True)
        ended = _run(profiled, {**env, "AUTORESEARCH_PROFILE": json.dumps(spec)}, cwd, work, timeout, rules)
        report["profile"] = _read_profile(work / PROFILE_FILE)
        if payload.get("profile_only"):
            report.update(ended)
    return report


def _read_profile(path: Path) -> dict[str, Any] | None:
    """What the profiled run wrote (the script could write there too: it only misleads its own
    profile, which the server checks before it shows anything)."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_PROFILE_BYTES + 1)
        found = json.loads(data) if len(data) <= MAX_PROFILE_BYTES else None
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _run(
    command: list[str],
    env: dict[str, str],
    cwd: Path,
    writable: Path,
    timeout_s: float,
    reads: list[tuple[str, int]] | None = None,
) -> dict[str, Any]:
    """One run of the command in `cwd`, its writes confined to `writable` (and its reads to `reads`,
    Landlock rules, where given); its exit status and the ends of its output."""

    def confine_script() -> None:
        """In the child, before exec: its cgroup leaf and an IPC namespace of its own, one Landlock
        domain deeper (two with `reads`), the sandbox's user with no capabilities (with no_new_privs an
        exec keeps the set it had, all of root's where the server runs as root), and the first seccomp
        filter: before exec, so that it holds for any command, `processes = true` or not; the boot adds
        the process filter where the folder did not declare processes (`booted`)."""
        candidate.enter()
        confine_fork(writable)
        if reads is not None:
            confine_fork_reads(reads)
        candidate.lock(before_exec=True)

    candidate.before_fork()  # nothing an earlier run of the script left behind runs on
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=confine_script,
    )
    out: list[bytes] = []
    err: list[bytes] = []
    readers = [
        threading.Thread(target=_tail, args=(proc.stdout, STDOUT_KEEP, out), daemon=True),
        threading.Thread(target=_tail, args=(proc.stderr, STDERR_KEEP, err), daemon=True),
    ]
    for reader in readers:
        reader.start()
    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, 9)
        proc.wait()
    for reader in readers:
        reader.join(timeout=5)
    candidate.after_fork()  # what the script started and left running dies with the experiment
    return {
        "returncode": proc.returncode,
        "timed_out": timed_out,
        "stdout_tail": (out[0] if out else b"").decode("utf-8", "replace")[-STDOUT_KEEP:],
        "stderr_tail": (err[0] if err else b"").decode("utf-8", "replace")[-STDERR_KEEP:],
    }
