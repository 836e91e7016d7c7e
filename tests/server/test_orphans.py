"""Orphans: experiments left 'running' by a server that is gone become 'interrupted' when a server
starts; those of a live server are left alone."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.db import process_token, this_host


def _store_with_running(tmp_path: Path, n: int) -> tuple[Store, list[int]]:
    store = Store(tmp_path / "runs.db")
    run = store.create_run(
        task="toy-quadratic", budget=10, target=None, seed=1, name=None, config={}, initial_source="x"
    )
    ids = [store.reserve_experiment(run.id, {"x": float(i)}, 1, None).id for i in range(n)]
    return store, ids


def _owner(store: Store, exp_id: int, *, pid: int, host: str, token: str | None) -> None:
    store.db.reader().execute(
        "UPDATE experiments SET owner_pid = ?, owner_host = ?, owner_token = ? WHERE id = ?",
        (pid, host, token, exp_id),
    )


def test_a_restarted_server_with_its_predecessors_pid_still_finds_the_predecessors_orphans(tmp_path: Path):
    # In a container the server is PID 1 on every start, so the PID alone would call the orphan alive.
    store, (orphan, mine) = _store_with_running(tmp_path, 2)
    _owner(store, orphan, pid=os.getpid(), host=this_host(), token="an-earlier-server")

    assert store.mark_orphans_interrupted() == 1
    interrupted = store.get_experiment(orphan)
    assert interrupted.status == "interrupted"
    assert interrupted.error_tail == "the server stopped while this experiment ran"
    assert store.get_experiment(mine).status == "running"
    row = store.db.reader().execute("SELECT owner_token FROM experiments WHERE id = ?", (mine,)).fetchone()
    assert row[0] == process_token()


def test_a_dead_pid_is_an_orphan_while_live_servers_and_other_hosts_are_left_alone(tmp_path: Path):
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    store, (dead, other_host, live) = _store_with_running(tmp_path, 3)
    _owner(store, dead, pid=int(gone.stdout), host=this_host(), token="t")
    _owner(store, other_host, pid=int(gone.stdout), host="another-machine", token="t")
    _owner(store, live, pid=os.getppid(), host=this_host(), token="t")  # the pytest runner's parent

    assert store.mark_orphans_interrupted() == 1
    assert [store.get_experiment(i).status for i in (dead, other_host, live)] == [
        "interrupted",
        "running",
        "running",
    ]


def test_a_job_left_by_an_earlier_server_with_the_same_pid_fails_and_names_why(tmp_path: Path):

    store, (exp_id,) = _store_with_running(tmp_path, 1)
    jobs = store.jobs
    job = jobs.create(store.get_experiment(exp_id).run_id, exp_id, "local")
    store.db.reader().execute("UPDATE jobs SET owner_token = 'an-earlier-server' WHERE id = ?", (job.id,))
    _owner(store, exp_id, pid=os.getpid(), host=this_host(), token="an-earlier-server")

    assert store.mark_orphans_interrupted() == 1 and jobs.fail_orphans() == 1
    failed = jobs.get(job.id)
    assert failed.status == "failed" and failed.error == "the server stopped while this job was queued"


def test_a_forked_process_is_a_process_of_its_own():
    read, write = os.pipe()
    with (
        warnings.catch_warnings()
    ):  # Python 3.12+ warns about forking a threaded process; this child only writes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child reports its token and leaves at once
        os.write(write, process_token().encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    assert child and child != process_token()
