"""The cgroup v2 path, on a file tree laid out as cgroupfs lays one out. This host mounts cgroup v1
(the v2 hierarchy holds no controllers), so test_processes.py exercises v1 with the real kernel; here
the v2 probe, the files an evaluation cgroup writes and the ones it reads are checked against the
kernel's documented names (Documentation/admin-guide/cgroup-v2.rst). What the kernel does with them
(cgroup.kill, memory.max) needs a v2 host."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch_mcp.sandbox import cgroups
from autoresearch_mcp.sandbox.cgroups import EvaluationCgroup, cgroup_support


def cgroup_dir(path: Path, delegates: str) -> Path:
    """A cgroup as cgroupfs shows one: its procs file, and the controllers it enables for children."""
    path.mkdir(parents=True)
    (path / "cgroup.procs").write_text("")
    (path / "cgroup.subtree_control").write_text(delegates + "\n")
    return path


@pytest.fixture
def v2_mount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cgroup2 mount at tmp_path/cg, this process in /system.slice/server.service."""
    mount = tmp_path / "cg"
    monkeypatch.setattr(cgroups, "_mounts", lambda: [("/", mount, "cgroup2", {"rw"})])
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": "/system.slice/server.service"})
    cgroup_support.cache_clear()
    yield mount
    cgroup_support.cache_clear()


def test_a_v2_cgroup_that_delegates_memory_and_pids_is_where_evaluation_cgroups_go(v2_mount: Path):
    own = cgroup_dir(v2_mount / "system.slice" / "server.service", "cpu memory pids")
    support = cgroup_support()
    assert support.version == "v2" and support.roots == {"": own.resolve()}
    assert support.describe() == "cgroup v2 (memory, pids, cpu.stat)"


def test_without_memory_and_pids_delegated_v2_is_not_used_and_the_parent_is_tried(v2_mount: Path):
    parent = cgroup_dir(v2_mount / "system.slice", "memory pids")
    cgroup_dir(parent / "server.service", "cpu")  # ours delegates no memory: a sibling of ours will do
    assert cgroup_support().roots == {"": parent.resolve()}


def test_a_v2_cgroup_that_delegates_nothing_leaves_no_cgroup_and_says_why(v2_mount: Path):
    cgroup_dir(v2_mount / "system.slice", "cpu")
    cgroup_dir(v2_mount / "system.slice" / "server.service", "")
    support = cgroup_support()
    assert support.version is None and "memory and pids" in support.reason


def test_an_evaluation_cgroup_on_v2_limits_the_candidate_tree_and_reads_its_cpu_peak_and_kills(
    v2_mount: Path,
):
    own = cgroup_dir(v2_mount / "system.slice" / "server.service", "memory pids")
    group = EvaluationCgroup(cgroup_support(), memory_bytes=256 * 2**20, processes=64)
    run, candidate = own / group.name, own / group.name / "candidate"
    assert [p.relative_to(own).as_posix() for p in group.made] == [
        group.name,
        f"{group.name}/harness",
        f"{group.name}/candidate",
    ]
    # The run's cgroup enables both controllers for its leaves, caps every process of the run, and the
    # candidate leaf's memory for its whole tree, with no swap to spill into.
    # Only the server's user may enter any of them: no run's processes or limits for untrusted code.
    assert {oct(directory.stat().st_mode & 0o777) for directory in group.made} == {"0o700"}
    assert (run / "cgroup.subtree_control").read_text() == "+memory +pids"
    assert (run / "pids.max").read_text() == "64"
    assert (candidate / "memory.max").read_text() == str(256 * 2**20)
    assert (candidate / "memory.swap.max").read_text() == "0"
    assert group.harness_procs() == [str(run / "harness" / "cgroup.procs")]
    assert group.candidate_spec() == {
        "procs": [str(candidate / "cgroup.procs")],
        "kill": str(candidate / "cgroup.kill"),
        "cpu": str(candidate / "cpu.stat"),
    }
    # What the kernel reports, in its formats: cpu.stat in microseconds, a peak, the OOM kill count.
    (candidate / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1200000\nsystem_usec 300000\n")
    (candidate / "memory.peak").write_text("104857600\n")
    (candidate / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.candidate_cpu_s() == pytest.approx(1.5)
    assert group.memory_peak_bytes() == 100 * 2**20
    assert group.oom_kills() == 1
    # Killing writes cgroup.kill in every cgroup of the run, leaves first (one write kills a whole tree).
    group.kill_all()
    assert all((directory / "cgroup.kill").read_text() == "1" for directory in group.made)
