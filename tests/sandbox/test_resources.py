"""Class 5 of issue 13: a total disk quota per run (not only per file), a process cap where the platform
allows one, and sandbox directories of a dead server removed at the next start."""

import os
import subprocess
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch_mcp.sandbox import resources, runner
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed

SCRIPT = "autoresearch_mcp.sandbox.script:run_script"


def run(source: str, limits: Limits):
    return run_sandboxed(SCRIPT, {"source": textwrap.dedent(source)}, limits)


def test_writing_more_than_the_disk_quota_in_files_under_the_size_limit_is_a_crash() -> None:
    source = """\
        import time
        for i in range(40):
            with open(f"chunk-{i}.bin", "wb") as f:
                f.write(b"x" * 4 * 1024 * 1024)
            time.sleep(0.05)
    """
    result = run(source, Limits(wall_s=30, file_mb=8, disk_mb=32))
    assert result.status == "crash" and result.reason == "wrote more than 32 MB in its working directory"


def test_creating_more_files_than_the_quota_allows_is_a_crash() -> None:
    source = """\
        import os
        os.mkdir("many")
        for i in range(200_000):
            open(f"many/{i}", "w").close()
    """
    result = run(source, Limits(wall_s=30, disk_mb=64))
    assert result.status == "crash" and "files in its working directory" in result.reason


def test_a_run_within_the_quota_is_untouched() -> None:
    result = run("with open('a.bin', 'wb') as f:\n    f.write(b'x' * 1024 * 1024)\n", Limits(disk_mb=8))
    assert result.status == "ok"


@pytest.mark.skipif(
    not getattr(runner, "process_cap_available", lambda: True)(),
    reason="neither a pids cgroup nor RLIMIT_NPROC here",
)
def test_the_number_of_processes_is_capped() -> None:
    source = """\
        import os, time
        def attack():
            made = 0
            for _ in range(400):
                try:
                    pid = os.fork()
                except OSError:
                    break
                if pid == 0:
                    time.sleep(30)
                    os._exit(0)
                made += 1
            return made
    """
    payload = {"source": textwrap.dedent(source), "call": "attack"}
    result = run_sandboxed(SCRIPT, payload, Limits(wall_s=20, processes=32, new_processes=True))
    assert result.status == "ok", result
    assert result.result is not None and result.result["value"] < 32
    assert any("processes" in line for line in result.isolation)


def _dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def test_sandbox_directories_of_a_dead_owner_are_swept_and_live_ones_are_kept() -> None:
    base = Path(tempfile.gettempdir())
    dead = Path(tempfile.mkdtemp(prefix=f"{runner.DIR_PREFIX}{_dead_pid()}-", dir=base))
    (dead / "work").mkdir()
    (dead / "work" / "leftover.bin").write_bytes(b"x" * 1000)
    alive = Path(tempfile.mkdtemp(prefix=f"{runner.DIR_PREFIX}{os.getpid()}-", dir=base))
    try:
        removed = runner.sweep_stale_sandboxes()
        assert not dead.exists() and alive.exists() and removed >= 1
    finally:
        for path in (dead, alive):
            if path.exists():
                (path / "work" / "leftover.bin").unlink(missing_ok=True)
                for sub in sorted(path.rglob("*"), reverse=True):
                    sub.rmdir() if sub.is_dir() else sub.unlink()
                path.rmdir()


@pytest.fixture
def watched(tmp_path: Path) -> Iterator[tuple[resources.DiskWatch, int]]:
    """A disk watch on tmp_path with a quota of 2 entries, and the write end of its harness pipe."""
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    try:
        yield resources.DiskWatch(tmp_path, 10**9, 2, lambda: None, read_end), write_end
    finally:
        os.close(read_end)
        os.close(write_end)


def test_what_the_harness_lays_out_itself_is_not_counted_and_what_follows_is(
    tmp_path: Path, watched: tuple[resources.DiskWatch, int]
) -> None:
    watch, harness = watched
    os.write(harness, b"hold\n")
    for i in range(10):  # the harness lays out a folder of 10 files
        (tmp_path / f"laid-{i}").write_text("x")
    assert not watch.check()
    os.write(harness, b"own 0 10\n")
    assert not watch.check()
    for i in range(3):  # the script's own: one more than its quota of 2
        (tmp_path / f"made-{i}").write_text("x")
    assert watch.check() and watch.problem == "created more than 2 files in its working directory"


def test_a_count_the_harness_spoke_during_is_not_judged(
    tmp_path: Path, watched: tuple[resources.DiskWatch, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    watch, harness = watched
    counted = resources.usage

    def while_the_layout_begins(root: Path, max_files: int) -> tuple[int, int]:
        os.write(harness, b"hold\n")  # the harness starts its layout while the watch counts
        for i in range(10):
            (tmp_path / f"laid-{i}").write_text("x")
        return counted(root, max_files)

    monkeypatch.setattr(resources, "usage", while_the_layout_begins)
    assert not watch.check() and watch.problem is None and watch.held


def test_openmp_threads_spin_briefly_before_they_sleep_and_number_the_limits_threads() -> None:
    source = """\
        import os
        print(os.environ["GOMP_SPINCOUNT"], os.environ["OMP_NUM_THREADS"])
    """
    result = run(source, Limits(threads=2))
    assert result.status == "ok" and result.output_tail.split() == ["10000", "2"]
