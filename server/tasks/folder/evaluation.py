"""A task folder's `[evaluate]` step, inside the sandbox, once the script's run has ended.

By then every process the candidate started is dead (the harness emptied its cgroup leaf). The declared
outputs are read from the script's directory without following a link on the way (a link could lead
to what only the evaluator may read) and only where the run wrote them itself (a regular file with
one name); then a fresh directory, made now, gets the folder laid out from the user's own files (never
a version the agent wrote), the evaluator's and the script's reads beside it, and the outputs copied
in. The evaluator runs there under the same OS boundary as the script: the sandbox's user, its own
Landlock domain for writes, the seccomp filters, a scrubbed environment. What it prints comes back;
the server reads its metric line, and only that decides.
"""

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autoresearch_mcp.sandbox import candidate, identity
from autoresearch_mcp.server.tasks.folder.layout import lay_out

MAX_OUTPUT_BYTES = 256 * 1024 * 1024  # one output, read into memory once to be copied
# Runs the evaluator (the harness's booted command) with an environment, in a directory, writing only
# beneath another, for at most so many seconds: its exit status and the ends of its output.
Runner = Callable[[dict[str, str], Path, Path, float], dict[str, Any]]


def read_output(cwd: Path, work: Path, name: str) -> bytes | str:
    """The bytes of output `name` the run left in `cwd`, or why there are none to give the evaluator."""
    path = cwd / name
    if os.path.realpath(path) != os.path.abspath(path) or not Path(os.path.realpath(path)).is_relative_to(
        work
    ):
        return f"{name} is, or lies behind, a symbolic link: an output must be a file the run wrote"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return f"the run left no {name} for the evaluator"
    except OSError as exc:
        return f"{name} cannot be read ({exc.strerror})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            return f"{name} is not a regular file the run wrote (a link, a fifo or a directory)"
        if info.st_size > MAX_OUTPUT_BYTES:
            return f"{name} holds {info.st_size} bytes, more than the {MAX_OUTPUT_BYTES} an output may"
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return stream.read(MAX_OUTPUT_BYTES + 1)
    finally:
        os.close(fd)


def evaluate(
    payload: dict[str, Any], work: Path, cwd: Path, env: dict[str, str], run: Runner, *, links: bool
) -> dict[str, Any]:
    """Run the folder's evaluator on what the script left: its exit status and the ends of its output,
    or `missing`, the reason an output could not be given to it."""
    spec = payload["evaluate"]
    outputs = {}
    for name in spec["outputs"]:
        found = read_output(cwd, work, name)
        if isinstance(found, str):
            return {"missing": found}
        outputs[name] = found
    there = Path(tempfile.mkdtemp(prefix=".evaluation-", dir=work))
    folder = Path(payload["folder_path"])
    reads = payload["reads"] + spec["reads"]
    place = lay_out(folder, there, {}, reads, links=links)
    for name, data in outputs.items():
        target = place / name
        if target.is_dir() and not target.is_symlink():
            return {"missing": f"{name} is a directory in the folder: an output is a file"}
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)  # a file of the folder's by that name (a copy, or a link to it)
        target.write_bytes(data)
    if candidate.Setup.ids is not None:  # the evaluator runs as the sandbox's user too
        identity.hand_over(there, candidate.Setup.ids)
    env = {**env, "HOME": str(there), "TMPDIR": str(there)}
    return run(env, place, there, float(spec["timeout_s"]))
