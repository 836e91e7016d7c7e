"""How a task folder is laid out for its script (layout.py) and how the script is booted (child.py),
checked directly: what the layout links rather than copies, and what the boot imports before its filter."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autoresearch_mcp.sandbox.seccomp import seccomp_available
from autoresearch_mcp.server.tasks.folder import child, layout


def test_a_small_file_that_is_a_symlink_is_linked_never_copied(tmp_path: Path):
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_text("token\n")
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "train.py").write_text("print('loss: 1')\n")
    (folder / ".env").symlink_to(outside)  # small, but not the folder's: Landlock must still judge the read
    work = tmp_path / "work"
    work.mkdir()
    cwd = layout.lay_out(folder, work, {}, [], links=True)
    assert (cwd / ".env").is_symlink() and os.readlink(cwd / ".env") == str(folder / ".env")
    assert not (cwd / "train.py").is_symlink()  # the folder's own small files are copies


def test_a_file_the_server_cannot_read_is_linked_and_the_layout_goes_on(tmp_path: Path, monkeypatch):
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "train.py").write_text("print('loss: 1')\n")
    (folder / "locked.bin").write_bytes(b"x")
    real_copy = shutil.copyfile

    def refuse_locked(source, target, *args, **kwargs):
        if str(source).endswith("locked.bin"):
            raise PermissionError(13, "Permission denied", str(source))
        return real_copy(source, target, *args, **kwargs)

    monkeypatch.setattr(layout.shutil, "copyfile", refuse_locked)
    work = tmp_path / "work"
    work.mkdir()
    cwd = layout.lay_out(folder, work, {}, [], links=True)
    assert (cwd / "locked.bin").is_symlink() and (cwd / "train.py").read_text() == "print('loss: 1')\n"
    work2 = tmp_path / "work2"
    work2.mkdir()
    cwd2 = layout.lay_out(folder, work2, {}, [], links=False)  # where nothing may be linked: left out
    assert not os.path.lexists(cwd2 / "locked.bin") and (cwd2 / "train.py").is_file()


@pytest.mark.skipif(not seccomp_available(), reason="the boot installs a seccomp filter")
def test_the_boot_imports_nothing_an_earlier_run_left_in_the_working_directory(tmp_path: Path):
    # The profiled run follows the first in the same directory: a platform.py (which the filter's own
    # code imports) or a usercustomize.py left there must not run before the filter does.
    for name in ("platform.py", "usercustomize.py"):
        (tmp_path / name).write_text(f"open({name!r} + '.ran', 'w').close()\n")
    (tmp_path / "train.py").write_text("import os\nprint('loss:', 1.0)\n")
    command = child.booted(["python", "train.py"], sys.executable, deny=True, profile=False)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "loss: 1.0" in done.stdout
    assert not (tmp_path / "platform.py.ran").exists() and not (tmp_path / "usercustomize.py.ran").exists()
