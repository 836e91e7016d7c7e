"""What a task folder's script can reach (docs/sandbox.md, "A task folder's script"): its folder and its
declared `reads` at the relative places they have beside the folder, writes only in the experiment's
own directory, no network; the user's files are never written. Real folders under tmp_path, run in the
real sandbox."""

import os
import socket
import textwrap
from pathlib import Path

import pytest

from autoresearch_mcp.sandbox.child import landlock_abi
from autoresearch_mcp.sandbox.runner import network_namespace_available
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome
from autoresearch_mcp.server.tasks.folder import child as folder_child
from autoresearch_mcp.server.tasks.folder.child import COPY_UP_TO, lay_out
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from folder_fixture import folder_files, make_folder

needs_landlock = pytest.mark.skipif(landlock_abi() < 1, reason="no Landlock here: files are not confined")


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
            except PermissionError:
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
    monkeypatch.setattr(folder_child, "MIRROR_UP_TO", 8)
    folder = make_folder(tmp_path / "user")
    (folder / "many").mkdir()
    for index in range(8):
        (folder / "many" / f"{index}.csv").write_text("1")
    work = tmp_path / "work"
    work.mkdir()
    lay_out(folder, work, {}, [], links=True)
    assert (work / "many").is_symlink() and not (work / "data").is_symlink()
    assert len(os.listdir(work / "many")) == 8
