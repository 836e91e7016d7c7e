"""A sandboxed child dies with the process that started it: a killed server leaves nothing running."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

PARENT = textwrap.dedent(
    """
    import sys
    from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
    print("ready", flush=True)
    run_sandboxed(
        "autoresearch_mcp.sandbox.script:run_script",
        {"source": "import time\\ndef f():\\n    time.sleep(120)\\n", "call": "f"},
        Limits(wall_s=120, cpu_s=120, memory_mb=256),
    )
    """
)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, stack = set(), [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.add(child)
            stack.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_killing_the_parent_kills_the_sandboxed_child_and_everything_it_started():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 20
        while len(sandboxed := descendants(parent.pid)) < 2:  # the child (and its init, when namespaced)
            assert time.monotonic() < deadline, "the sandboxed child never started"
            time.sleep(0.05)
        time.sleep(0.5)
        sandboxed = descendants(parent.pid)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in sandboxed):
            assert time.monotonic() < deadline, f"still running after the parent died: {sandboxed}"
            time.sleep(0.05)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
