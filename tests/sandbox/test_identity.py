"""Who untrusted code runs as (sandbox/identity.py): the sandbox's user under a root server, named by
AUTORESEARCH_SANDBOX_USER or `nobody`; where there is none, the server says so once at start and each run's
isolation list says so, and the run goes on as the server's user. Real sandboxed runs."""

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoresearch_mcp.contract.env import ENV_SANDBOX_USER
from autoresearch_mcp.sandbox import identity, isolation
from autoresearch_mcp.sandbox.identity import SandboxUser, sandbox_user
from autoresearch_mcp.sandbox.runner import Limits, run_sandboxed
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings

SCRIPT = "autoresearch_mcp.sandbox.script:run_script"
WHO = "import os\ndef who():\n    return [os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]\n"
NONE_HERE = SandboxUser(None, "forced off for this test")
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="only a root server has another user to become")


@pytest.fixture
def probed_afresh() -> Iterator[None]:
    """sandbox_user() is probed once per process: again for this test, and again after it."""
    sandbox_user.cache_clear()
    yield
    sandbox_user.cache_clear()


def who() -> tuple[list[object], list[str]]:
    """The ids a candidate holds, and its run's isolation list."""
    result = run_sandboxed(SCRIPT, {"source": WHO, "call": "who"}, Limits(wall_s=20))
    assert result.status == "ok" and result.result is not None, result.output_tail
    return result.result["value"], result.isolation


@as_root
def test_under_a_root_server_a_candidate_runs_as_nobody_with_no_group_and_its_run_says_so():
    uid, gid = sandbox_user().ids or (0, 0)
    assert uid != 0 and gid != 0
    ids, listed = who()
    assert ids == [uid, uid, gid, []]
    assert any(line.startswith(f"untrusted code runs as uid {uid} (nobody)") for line in listed)


@as_root
def test_the_sandbox_user_is_whom_autoresearch_sandbox_user_names(
    monkeypatch: pytest.MonkeyPatch, probed_afresh: None
):
    monkeypatch.setenv(ENV_SANDBOX_USER, "54321:54322")
    assert sandbox_user() == SandboxUser((54321, 54322), "uid 54321 (54321:54322)")
    assert who()[0] == [54321, 54321, 54322, []]


@as_root
@pytest.mark.parametrize(("named", "why"), [("0", "is root's"), ("no-such-user-here", "no user")])
def test_a_sandbox_user_that_is_root_or_unknown_is_refused_and_said(
    monkeypatch: pytest.MonkeyPatch, probed_afresh: None, named: str, why: str
):
    monkeypatch.setenv(ENV_SANDBOX_USER, named)
    found = sandbox_user()
    assert found.ids is None and why in found.reason and "untrusted code runs as root" in found.reason


def test_where_there_is_no_other_user_the_server_says_so_once_and_the_run_goes_on_as_its_own(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
):
    monkeypatch.setattr(isolation, "sandbox_user", lambda: NONE_HERE)
    with caplog.at_level(logging.WARNING, logger="autoresearch_mcp.server.runs"):
        Research(ServerSettings(db_path=tmp_path / "runs.db")).open().close()
    warned = [r.getMessage() for r in caplog.records if "weaker guarantees" in r.getMessage()]
    assert len(warned) == 1 and "forced off for this test" in warned[0]
    ids, listed = who()
    assert ids[:2] == [os.getuid(), os.geteuid()]
    assert "untrusted code NOT run as another user (forced off for this test)" in listed


def test_a_tree_handed_over_belongs_to_the_user_links_and_all(tmp_path: Path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "file").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")  # dangling: the link itself is handed over
    if os.geteuid() != 0:
        pytest.skip("only root may give files away")
    identity.hand_over(tmp_path, (54321, 54322))
    owners = {(p.lstat().st_uid, p.lstat().st_gid) for p in [tmp_path, *tmp_path.rglob("*")]}
    assert owners == {(54321, 54322)}
