"""The per-run lock: concurrent read-modify-write edits of one run's train.py never interleave."""

import threading
from concurrent.futures import ThreadPoolExecutor

from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store


def test_concurrent_edits_of_one_run_all_apply_one_after_another(settings: ServerSettings):
    store = Store(settings.db_path)
    service = Research(settings, store).open()
    run, _ = service.runs.start_run("toy-quadratic", 5, None, 1, None)
    sessions, rounds = 8, 5
    together = threading.Barrier(sessions)

    def edit(i: int) -> int:
        # All read the same version at once: without the lock, all but one would usually be refused
        # ("train.py changed while you edited it") by the store's check of the parent version.
        together.wait()
        marker = [("import time\n", f"import time\n# edit {i}\n")]
        return service.train_py.modify_train_py(run.id, f"edit {i}", None, marker).version

    versions: list[int] = []
    with ThreadPoolExecutor(sessions) as pool:
        for first in range(0, sessions * rounds, sessions):
            versions += pool.map(edit, range(first, first + sessions))

    edits = sessions * rounds
    assert sorted(versions) == list(range(2, edits + 2))
    chain = store.artifacts.versions(run.id)
    assert [(v.version, v.parent_version) for v in chain] == [(1, None)] + [
        (n, n - 1) for n in range(2, edits + 2)
    ]
    assert all(f"# edit {i}\n" in chain[-1].source for i in range(edits))
    assert store.events.counts(run.id) == {}  # no refusals
