"""What a task folder's script can reach (docs/sandbox.md, "A task folder's script"): its folder and its
declared `reads` at the relative places they have beside the folder, writes only in the experiment's
own directory, no network and no Unix socket; the user's files are never written, nor their mode or
times changed. Real folders under tmp_path, run in the real sandbox."""

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autoresearch_mcp.sandbox import child as sandbox_child
from autoresearch_mcp.sandbox import isolation, runner, seccomp
from autoresearch_mcp.sandbox.child import landlock_abi, mount_read_only
from autoresearch_mcp.sandbox.identity import SandboxUser
from autoresearch_mcp.sandbox.namespaces import read_only_mounts_work, user_flags
from autoresearch_mcp.sandbox.runner import Limits, network_namespace_available
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome
from autoresearch_mcp.server.tasks.folder import layout as folder_layout
from autoresearch_mcp.server.tasks.folder import task as folder_task_module
from autoresearch_mcp.server.tasks.folder.layout import COPY_UP_TO, lay_out
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from folder_fixture import folder_files, make_folder

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock here: files are not confined")
needs_seccomp = pytest.mark.skipif(not seccomp.seccomp_available(), reason="no seccomp here")
needs_mount_namespace = pytest.mark.skipif(
    user_flags() is None, reason="no namespaces here: the task's files cannot be mounted read-only"
)
needs_read_only_mounts = pytest.mark.skipif(
    not read_only_mounts_work(), reason="the task's files cannot be mounted read-only here"
)


def run_script(folder: Path) -> Outcome:
    """One experiment of the folder's script, with its params' defaults, in the sandbox."""
    task = folder_task_class(folder)({})
    ctx = ExecContext(run_id="r-folder", seed=1, iteration=1, options=task.options())
    return task.execute(task.params_model(), task.initial_artifact(), ctx)


def test_a_relative_read_outside_the_folder_resolves_as_it_would_in_the_folder(tmp_path):
    root = tmp_path / "projects"
    script = """\
        import os
        shared = float(open("../shared/w.txt").read())
        lookup = float(open("../../lookup.txt").read())
        try:  # a declared read is read-only: what the script writes stays in its own directory
            open("../shared/new.txt", "w").write("x")
        except OSError:
            pass
        print(f"listed: {len(os.listdir('../shared'))}")
        print(f"loss: {shared * lookup}")
    """
    folder = make_folder(
        root / "proj", script=textwrap.dedent(script), extra='reads = ["../shared", "../../lookup.txt"]'
    )
    (root / "proj" / "shared").mkdir()
    (root / "proj" / "shared" / "w.txt").write_text("3\n")
    (root / "lookup.txt").write_text("4\n")
    before = folder_files(root)
    outcome = run_script(folder)
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics["loss"] == 12.0
    assert outcome.metrics["listed"] in (1.0, 2.0)  # 2: where nothing confines writes, its own copy
    assert folder_files(root) == before


def test_a_script_creates_and_overwrites_files_in_its_folders_subfolders_without_writing_the_folder(
    tmp_path,
):
    script = """\
        import os
        open("out/new.txt", "w").write("new")
        open("out/old.txt", "w").write("replaced")
        open("out/nested/deep.txt", "a").write("+more")
        os.makedirs("out/nested/made")
        open("out/nested/made/x.txt", "w").write("x")
        wrote = (open("out/old.txt").read(), open("out/new.txt").read(), open("out/nested/deep.txt").read())
        print(f"subfolder_writes: {int(wrote == ('replaced', 'new', 'deep+more'))}")
        try:  # a large file is linked, not copied: it can be read, and replaced, never written through
            with open("data/big.bin", "r+b") as big:
                big.write(b"0")
        except OSError:
            os.remove("data/big.bin")
            open("data/big.bin", "wb").write(b"mine")
        print(f"big_read: {int(open('data/big.bin', 'rb').read(4) in (b'mine', b'0bbb'))}")
        print("loss: 1")
    """
    folder = make_folder(tmp_path, script=textwrap.dedent(script))
    (folder / "out" / "nested").mkdir(parents=True)
    (folder / "out" / "old.txt").write_text("old")
    (folder / "out" / "nested" / "deep.txt").write_text("deep")
    (folder / "data" / "big.bin").write_bytes(b"b" * (COPY_UP_TO + 1))
    before = folder_files(folder)
    outcome = run_script(folder)
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics["subfolder_writes"] == 1.0 and outcome.metrics["big_read"] == 1.0
    assert folder_files(folder) == before


@needs_landlock
def test_a_script_cannot_read_files_outside_its_folder_and_its_declared_reads(tmp_path):
    beside = tmp_path / "beside.txt"
    beside.write_text("not the script's")
    other = tmp_path / "other-project" / ".env"
    other.parent.mkdir()
    other.write_text("API_KEY=secret")
    allowed = tmp_path / "declared.txt"
    allowed.write_text("5")
    script = f"""\
        import os
        def refused(read):
            try:
                read()
            except (PermissionError, FileNotFoundError):  # Landlock, or not in the sandbox's view at all
                return 1
            return 0
        print(f"beside: {{refused(lambda: open({str(beside)!r}).read())}}")
        print(f"other_project: {{refused(lambda: open({str(other)!r}).read())}}")
        print(f"listing: {{refused(lambda: os.listdir({str(tmp_path)!r}))}}")
        print(f"loss: {{float(open({str(allowed)!r}).read())}}")
    """
    folder = make_folder(tmp_path, script=textwrap.dedent(script), extra=f'reads = ["{allowed}"]')
    outcome = run_script(folder)
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics == {"beside": 1.0, "other_project": 1.0, "listing": 1.0, "loss": 5.0}


@pytest.mark.skipif(not network_namespace_available(), reason="no network namespace here")
def test_a_script_reaches_no_host_over_tcp_or_udp(tmp_path):
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp.bind(("127.0.0.1", 0))
        script = f"""\
            import socket
            try:
                socket.create_connection(("127.0.0.1", {tcp.getsockname()[1]}), timeout=2).close()
                print("tcp_connected: 1")
            except OSError:
                print("tcp_connected: 0")
            try:
                with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as out:
                    out.sendto(b"hello", ("127.0.0.1", {udp.getsockname()[1]}))
                print("udp_sent: 1")
            except OSError:
                print("udp_sent: 0")
            print("loss: 1")
        """
        outcome = run_script(make_folder(tmp_path, script=textwrap.dedent(script)))
        udp.setblocking(False)
        with pytest.raises(BlockingIOError):
            udp.recv(16)
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics["tcp_connected"] == 0.0 and outcome.metrics["udp_sent"] == 0.0


CONNECT_TO_A_UNIX_SOCKET = """\
    import errno, socket
    try:
        with socket.socket(socket.AF_UNIX) as client:
            client.connect({path!r})
        print("connected: 1")
    except OSError as exc:
        print(f"refused: {{int(exc.errno == errno.EPERM)}}")
    left, right = socket.socketpair()  # names no path: still allowed
    left.send(b"x")
    print(f"socketpair: {{int(right.recv(1) == b'x')}}")
    print("loss: 1")
"""


@needs_seccomp
@pytest.mark.parametrize("processes", [False, True], ids=["plain", "processes"])
def test_a_script_cannot_connect_to_a_unix_socket_even_where_it_declares_processes(tmp_path, processes):
    # A socket file the script may read (a declared read), as /var/run/docker.sock would be: the network
    # namespace does not cover it, and Landlock does not mediate connect().
    path = tmp_path / "host.sock"
    extra = f'reads = ["{path}"]' + ("\nprocesses = true" if processes else "")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        listener.listen()
        script = textwrap.dedent(CONNECT_TO_A_UNIX_SOCKET.format(path=str(path)))
        outcome = run_script(make_folder(tmp_path / "proj", script=script, extra=extra))
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics == {"refused": 1.0, "socketpair": 1.0, "loss": 1.0}


@needs_seccomp
def test_where_a_script_declares_processes_a_forked_process_talks_over_a_pipe_but_a_manager_is_refused(
    tmp_path,
):
    # The cost of refusing Unix sockets: a multiprocessing Manager (and the forkserver start method)
    # listens on one.
    script = """\
        import multiprocessing
        def square(conn):
            conn.send(conn.recv() ** 2)
        if __name__ == "__main__":
            fork = multiprocessing.get_context("fork")
            here, there = fork.Pipe()
            worker = fork.Process(target=square, args=(there,))
            worker.start()
            here.send(7)
            print(f"forked: {here.recv()}")
            worker.join()
            try:
                fork.Manager()
                print("manager: 1")
            except (OSError, EOFError):
                print("manager: 0")
            print("loss: 1")
    """
    outcome = run_script(make_folder(tmp_path, script=textwrap.dedent(script), extra="processes = true"))
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics == {"forked": 49.0, "manager": 0.0, "loss": 1.0}


CHANGE_METADATA = """\
    import ctypes, os, shutil
    # First, try to undo the read-only mount (possible with CAP_SYS_ADMIN, which a root server's script
    # has): mount_setattr clearing MOUNT_ATTR_RDONLY. Landlock lets it through; the seccomp filter not.
    attr = (ctypes.c_uint64 * 4)(0, 1, 0, 0)
    ctypes.CDLL(None).syscall(442, -100, {folder!r}.encode(), 0, attr, ctypes.sizeof(attr))
    refused = 0
    for path in {paths!r}:
        for change in (lambda: os.chmod(path, 0o777), lambda: os.utime(path, (1, 1))):
            try:
                change()
            except OSError:
                refused += 1
    print(f"refused: {{refused}}")
    shutil.copy2("data/weight.txt", "copy.txt")  # chmod and utime on its own files still work
    os.chmod("train.py", 0o700)
    print(f"own_files: {{int(os.stat('copy.txt').st_mtime == os.stat('data/weight.txt').st_mtime)}}")
    print("loss: 1")
"""


@needs_seccomp
@needs_read_only_mounts
def test_a_script_cannot_change_the_mode_or_times_of_the_folders_files_or_its_declared_reads(tmp_path):
    declared = tmp_path / "lookup.txt"
    declared.write_text("4\n")
    folder = tmp_path / "proj" / "bowl"
    paths = [str(folder / "data" / "weight.txt"), str(folder / "train.py"), str(declared)]
    script = CHANGE_METADATA.format(folder=str(folder), paths=paths)
    make_folder(tmp_path / "proj", script=textwrap.dedent(script), extra=f'reads = ["{declared}"]')
    before = {path: os.stat(path) for path in paths}
    outcome = run_script(folder)
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics == {"refused": 6.0, "own_files": 1.0, "loss": 1.0}
    after = {path: os.stat(path) for path in paths}
    assert {p: (s.st_mode, s.st_mtime_ns) for p, s in after.items()} == {
        p: (s.st_mode, s.st_mtime_ns) for p, s in before.items()
    }


def test_where_no_mount_namespace_can_be_made_the_files_stay_as_they_are_and_the_run_goes_on(
    tmp_path, monkeypatch
):
    mounted = []

    class NoNamespaces:  # the libc of a process that is neither root nor in a user namespace
        @staticmethod
        def unshare(flags):
            return -1

        @staticmethod
        def mount(*args):
            mounted.append(args)
            return 0

    monkeypatch.setattr(sandbox_child, "_libc", lambda: NoNamespaces)
    work = tmp_path / "work"
    work.mkdir()
    # Nothing to mount (a missing path; one that holds the working directory): no namespace needed.
    assert mount_read_only([tmp_path / "missing", tmp_path], work)
    assert not mount_read_only([make_folder(tmp_path)], work)
    assert mounted == []


READ_ONLY = "the files the task names (a folder, its declared reads) mounted read-only"
NOT_READ_ONLY = "the files the task names NOT mounted read-only"


def isolation_lists(monkeypatch) -> list[list[str]]:
    """The `isolation` list of each sandboxed run the folder task makes from here on."""
    lists = []

    def recorded(*args, **kwargs):
        result = runner.run_sandboxed(*args, **kwargs)
        lists.append(result.isolation)
        return result

    monkeypatch.setattr(folder_task_module, "run_sandboxed", recorded)
    return lists


CHANGE_TIMES = """\
    import os
    try:
        os.utime({path!r}, (1, 1))
        print("changed: 1")
    except OSError:
        print("changed: 0")
    print("loss: 1")
"""


def test_where_mounts_do_not_work_here_the_run_goes_on_unprotected_and_its_isolation_list_says_so(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(isolation, "read_only_mounts_work", lambda: False)
    # Where mounts fail, the sandbox's user cannot be given what it must read either (identity.py).
    monkeypatch.setattr(isolation, "sandbox_user", lambda: SandboxUser(None, "forced off for this test"))
    lists = isolation_lists(monkeypatch)
    folder = tmp_path / "proj" / "bowl"
    script = CHANGE_TIMES.format(path=str(folder / "data" / "weight.txt"))
    make_folder(tmp_path / "proj", script=textwrap.dedent(script))
    outcome = run_script(folder)
    assert outcome.status == "ok", outcome.error_tail
    assert outcome.metrics == {"changed": 1.0, "loss": 1.0}  # no mount was made: the times changed
    assert (folder / "data" / "weight.txt").stat().st_mtime == 1
    [listed] = lists
    assert any(line.startswith(NOT_READ_ONLY) for line in listed)
    assert not any(line.startswith(READ_ONLY) for line in listed)


@needs_mount_namespace
def test_where_mounts_are_promised_and_one_fails_the_experiment_fails_before_any_task_code_runs(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(isolation, "read_only_mounts_work", lambda: True)
    entry = "refused_mount_entry:run"
    monkeypatch.setattr(runner, "_ALLOWED_ENTRIES", {*runner._ALLOWED_ENTRIES, entry})  # this test's only
    data = tmp_path / "data.txt"
    data.write_text("1\n")
    result = runner.run_sandboxed(entry, {"data_path": str(data)}, Limits(wall_s=30))
    assert any(line.startswith(READ_ONLY) for line in result.isolation)
    assert result.status == "crash"
    assert result.result is None
    assert "the entry ran" not in result.output_tail
    assert "the task's files could not be mounted read-only" in result.reason
    assert "Permission denied" in result.reason


UNDER_A_SUBMOUNT = """
import errno, os, subprocess, sys
from pathlib import Path
from autoresearch_mcp.sandbox.child import mount_read_only
folder, work = sys.argv[1:]
inner = Path(folder, "inner")
subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(inner)], check=True)
(inner / "file.txt").write_text("x")
assert mount_read_only([folder], Path(work))
refused = []
for path in (Path(folder, "top.txt"), inner / "file.txt"):
    try:
        os.chmod(path, 0o600)
        refused.append(0)
    except OSError as exc:
        refused.append(int(exc.errno == errno.EROFS))
print(refused)
"""


@needs_read_only_mounts
def test_a_file_on_a_mount_below_a_named_directory_is_read_only_too(tmp_path):
    folder, work = tmp_path / "folder", tmp_path / "work"
    (folder / "inner").mkdir(parents=True)
    (folder / "top.txt").write_text("x")
    work.mkdir()
    # A mount namespace of the test's own, where it may mount the tmpfs below the folder.
    command = ["unshare", *(user_flags() or ()), "--mount", "--"]
    command += [sys.executable, "-I", "-c", UNDER_A_SUBMOUNT, str(folder), str(work)]
    probe = subprocess.run(command, capture_output=True, text=True, timeout=30)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip() == "[1, 1]"


HELD_CAPABILITIES = """\
    import ctypes
    libc = ctypes.CDLL(None)
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    sets = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable
    assert libc.capget(header, sets) == 0
    print(f"held: {sum(bin(word).count('1') for word in sets)}")
    print(f"bounding: {sum(libc.prctl(23, cap, 0, 0, 0) == 1 for cap in range(64))}")  # PR_CAPBSET_READ
    print(f"ambient: {sum(libc.prctl(47, 1, cap, 0, 0) == 1 for cap in range(64))}")  # PR_CAP_AMBIENT_IS_SET
    print(f"securebits: {libc.prctl(27, 0, 0, 0, 0)}")  # PR_GET_SECUREBITS
    print("loss: 1")
"""


def test_a_script_holds_no_capability_and_cannot_regain_one_even_where_the_server_is_root(tmp_path):
    # Landlock keeps the script out of its own /proc/self (docs/sandbox.md), so it asks the kernel.
    outcome = run_script(make_folder(tmp_path, script=textwrap.dedent(HELD_CAPABILITIES)))
    assert outcome.status == "ok", outcome.error_tail
    # The harness can drop the bounding set and lock the securebits where it holds CAP_SETPCAP: as root,
    # or as the mapped root of its user namespace.
    harness_root = os.geteuid() == 0 or user_flags() is not None
    assert outcome.metrics["held"] == 0
    assert outcome.metrics["ambient"] == 0
    if harness_root:
        assert outcome.metrics["bounding"] == 0
        assert (
            outcome.metrics["securebits"] == 0b1110_1111
        )  # NOROOT, NO_SETUID_FIXUP, no ambient raise; locked


def test_where_writes_are_not_confined_the_layout_links_nothing_a_write_could_follow_into_the_folder(
    tmp_path,
):
    """Without Landlock nothing refuses a write through a link, so every file is copied; with it, a
    large file is a link that reads the original and refuses writes."""
    folder = make_folder(tmp_path / "user")
    (folder / "data" / "big.bin").write_bytes(b"b" * (COPY_UP_TO + 1))
    (folder / "out").mkdir()
    before = folder_files(folder)
    unconfined, confined = tmp_path / "unconfined", tmp_path / "confined"
    for work, links in ((unconfined, False), (confined, True)):
        work.mkdir()
        lay_out(folder, work, {"train.py": "print('loss: 1')\n"}, [], links=links)
    laid_out = sorted(p.relative_to(unconfined) for p in unconfined.rglob("*"))
    assert laid_out == sorted(p.relative_to(folder) for p in folder.rglob("*"))
    assert not [p for p in unconfined.rglob("*") if p.is_symlink()]
    for path in unconfined.rglob("*"):
        if path.is_file():
            path.write_bytes(b"overwritten")
    assert [p.relative_to(confined) for p in confined.rglob("*") if p.is_symlink()] == [Path("data/big.bin")]
    assert (confined / "out").is_dir() and not (confined / "out").is_symlink()
    assert (confined / "train.py").read_text() == "print('loss: 1')\n"
    assert folder_files(folder) == before
    assert os.path.samefile(confined / "data" / "big.bin", folder / "data" / "big.bin")


def test_a_read_that_holds_the_folder_puts_the_folders_neighbours_around_its_copy(tmp_path):
    folder = make_folder(tmp_path / "proj")
    (tmp_path / "proj" / "shared").mkdir()
    (tmp_path / "proj" / "shared" / "w.txt").write_text("3")
    work = tmp_path / "work"
    work.mkdir()
    cwd = lay_out(folder, work, {}, [["..", str(folder.parent)]], links=True)
    assert cwd == work / "proj" / "bowl" and not cwd.is_symlink()
    assert (cwd / ".." / "shared").is_symlink() and (cwd / ".." / "shared" / "w.txt").read_text() == "3"
    assert (cwd / "data" / "weight.txt").read_text() == "2\n"


def test_a_directory_too_large_to_lay_out_at_each_experiment_is_linked_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(folder_layout, "MIRROR_UP_TO", 8)
    folder = make_folder(tmp_path / "user")
    (folder / "many").mkdir()
    for index in range(8):
        (folder / "many" / f"{index}.csv").write_text("1")
    work = tmp_path / "work"
    work.mkdir()
    lay_out(folder, work, {}, [], links=True)
    assert (work / "many").is_symlink() and not (work / "data").is_symlink()
    assert len(os.listdir(work / "many")) == 8
