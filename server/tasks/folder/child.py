"""The harness of a task folder, inside the sandbox: run the user's command, report what it printed.

Runs in the sandboxed child (sandbox/child.py): its writes are already confined to the working
directory. It lays the folder out there (small files copied, directories and large files linked to
the originals, the run's version of the edited files written in their place), so relative paths
resolve as they would in the folder while nothing in the folder can be written; then it confines reads to the folder, the declared
`reads`, the interpreter and the system, and starts the command. The command runs one Landlock domain
deeper (writes only in the working directory, no TCP, no signals to the harness) with a scrubbed
environment plus AUTORESEARCH_PARAMS. There is no Python allow-list: the script is its owner's code, and
the agent's edits to it are held by the OS layers alone (docs/sandbox.md). What comes back is the exit
status and the ends of stdout and stderr; the server parses the metric lines.
"""

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import IO, Any

from autoresearch_mcp.sandbox import candidate, seccomp
from autoresearch_mcp.sandbox.child import confine_fork, confine_reads

CONFINES_READS = True  # reads are confined here, once the folder is laid out (sandbox/child.py)
STDOUT_KEEP = 64_000
STDERR_KEEP = 8_000
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "HOME", "TMPDIR", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
ENV_KEEP += ("MKL_NUM_THREADS", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "PYTHONHASHSEED")


COPY_UP_TO = 1_000_000  # bytes: smaller files are copied, larger ones and directories linked


def _place(entry: Path, at: Path) -> None:
    """A copy of a small file (Python resolves a linked script to its real folder, and would import its
    neighbours from there, not the run's versions), a link to anything else."""
    if entry.is_file() and not entry.is_symlink() and entry.stat().st_size <= COPY_UP_TO:
        shutil.copyfile(entry, at)
    else:
        at.symlink_to(entry)


def lay_out(folder: Path, work: Path, files: dict[str, str]) -> None:
    """The folder's entries in `work` (small files copied, the rest linked), except the edited files
    (and the directories on their way), which are written from the run's version."""
    edited_dirs: dict[Path, set[str]] = {}
    for name in files:
        parts = Path(name).parts
        for depth in range(len(parts)):
            edited_dirs.setdefault(Path(*parts[:depth]), set()).add(parts[depth])
    for relative, real in sorted(edited_dirs.items(), key=lambda item: len(item[0].parts)):
        (work / relative).mkdir(parents=True, exist_ok=True)
        source_dir = folder / relative
        if source_dir.is_dir():
            for entry in source_dir.iterdir():
                if entry.name not in real:
                    _place(entry, work / relative / entry.name)
    if not files:
        for entry in folder.iterdir():
            _place(entry, work / entry.name)
    for name, text in files.items():
        (work / name).write_text(text, encoding="utf-8")


def _tail(stream: IO[bytes], keep: int, out: list[bytes]) -> None:
    data = bytearray()
    for chunk in iter(lambda: stream.read(65536), b""):
        data += chunk
        if len(data) > 4 * keep:
            del data[: len(data) - keep]
    out.append(bytes(data[-keep:]))


def _environment(payload: dict[str, Any], work: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key in ENV_KEEP}
    env.update(
        HOME=str(work),
        TMPDIR=str(work),
        AUTORESEARCH_PARAMS=payload["params"],
        AUTORESEARCH_SEED=str(payload["seed"]),
        PYTHONUNBUFFERED="1",
    )
    return env


# Run by the interpreter as `python -c BOOT ARGS...` after seccomp.py's own source (self-contained: any
# CPython runs it, the server's package or not): install the filter, then run the script (or `-m
# module`, or `-c code`) as `python ARGS...` would, its folder first on sys.path (not its real one: a
# copied or linked script must import the run's versions of its neighbours).
BOOT_TAIL = """
import os as _os, runpy as _runpy, sys as _sys
deny_new_processes()
_args = _sys.argv[1:]
if _args[0] == "-m":
    _sys.argv = _args[1:]
    _runpy.run_module(_args[1], run_name="__main__", alter_sys=True)
elif _args[0] == "-c":
    _sys.argv = ["-c", *_args[2:]]
    exec(compile(_args[1], "<string>", "exec"), {"__name__": "__main__"})
else:
    _sys.argv = _args
    _sys.path[0] = _os.path.dirname(_os.path.abspath(_args[0]))
    _runpy.run_path(_args[0], run_name="__main__")
"""


def without_new_processes(command: list[str], python: str) -> list[str]:
    """`command` (whose first word is the interpreter) with the seccomp filter installed before the
    script's first line: the interpreter's own options stay in front of `-c`."""
    rest = command[1:]
    options = []
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c"):
        options.append(rest.pop(0))
    if not rest:
        raise ValueError("the command names no script, -m module or -c code after the interpreter")
    boot = Path(seccomp.__file__).read_text(encoding="utf-8") + BOOT_TAIL
    return [python, *options, "-c", boot, *rest]


def run_command(payload: dict[str, Any]) -> dict[str, Any]:
    work = Path.cwd()
    folder = Path(payload["folder_path"])
    lay_out(folder, work, payload["files"])
    python = Path(payload["python_path"])
    interpreter = {python.parent.parent, python.resolve().parent.parent}  # a venv and its base
    command = payload["command"]
    if candidate.Setup.deny_processes:  # the task did not declare processes; seccomp is here
        command = without_new_processes(command, str(python))
    confine_reads([folder, *payload["reads"], *interpreter])

    def confine_script() -> None:  # in the child, before exec: its cgroup leaf, one Landlock domain deeper
        if candidate.Setup.group is not None:
            candidate.Setup.group.join()
        confine_fork(work)

    candidate.before_fork()  # nothing an earlier run of the script left behind runs on
    proc = subprocess.Popen(
        command,
        cwd=work,
        env=_environment(payload, work),
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
        proc.wait(timeout=float(payload["timeout_s"]))
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
