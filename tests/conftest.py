"""Shared fixtures: every test gets its own data directory and database; nothing touches the user's."""

import importlib
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest

import toy_task  # noqa: F401  (registers the test-only task "toy-quadratic")
from autoresearch_mcp.contract.env import ENV_TASK_DIRS, ENV_TASK_PLUGINS
from autoresearch_mcp.sandbox import runner
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks import registry
from isolation_gate import pytest_runtest_makereport  # noqa: F401  (CI: a missing layer fails)

pytest_plugins = ["pytester"]  # tests/sandbox/test_isolation_gate.py runs pytest on a file of its own

if TYPE_CHECKING:
    import argparse

    from autoresearch_mcp.client.llm.scripted import ScriptedLLM

ROOT = Path(__file__).resolve().parents[1]
TESTS_DIR = Path(__file__).resolve().parent
# Covertype: a 2,000-row fixture in the repository (tests/data/PROVENANCE.md) for every test that only
# needs some Covertype data, and the 20,000-row sample the package ships (or AUTORESEARCH_COVTYPE) for
# the few whose meaning depends on the real set.
COVTYPE_FIXTURE = TESTS_DIR / "data" / "covtype_2k.csv.gz"
COVTYPE_20K = Path(
    os.environ.get("AUTORESEARCH_COVTYPE")
    or ROOT / "server" / "tasks" / "builtin" / "hpo-covertype" / "source" / "covtype_20k.csv.gz"
)
# 3 calls: the keep rule's interval is then the whole range, so a rewrite is kept only when every pair
# favours it. At 6,000 records the original takes ~27 ms a call and the fastest rewrite ~6 ms: a call
# held back 20 ms on a loaded machine does not turn a surely faster rewrite into "not kept" (at 2,000,
# ~9 ms against ~2 ms, it did).
TEST_CODEOPT_RECORDS, TEST_CODEOPT_CALLS = 6_000, 3
NEEDS_20K = "needs the 20,000-row Covertype CSV (shipped in server/tasks/builtin/hpo-covertype/source/)"


# The built-in tasks (and installed plugins) load once, here, with no plugin module named by the
# developer's environment: otherwise the first test of a worker to list the tasks would load them under
# its own AUTORESEARCH_TASK_PLUGINS, and every later test of that worker would see its plugins.
with pytest.MonkeyPatch.context() as _env:
    _env.delenv(ENV_TASK_PLUGINS, raising=False)
    registry.task_names()
# Task folders are built in too: defining FolderTask (on the first folder a server registers) admits the
# folder child's sandbox entry point, once per process.
importlib.import_module("autoresearch_mcp.server.tasks.folder.task")


@contextmanager
def registry_restored() -> Iterator[tuple[dict[str, "registry.TaskFactory"], set[str]]]:
    """The task registry and the sandbox's admitted entry points as they are now, put back on exit
    (both are process-wide: what one test registers, every later test of its worker would see)."""
    tasks, entries = dict(registry._REGISTRY), set(runner._ALLOWED_ENTRIES)
    try:
        yield tasks, entries
    finally:
        registry._REGISTRY.clear()
        registry._REGISTRY.update(tasks)
        runner._ALLOWED_ENTRIES.clear()
        runner._ALLOWED_ENTRIES.update(entries)


@pytest.fixture(autouse=True)
def nothing_left_registered() -> Iterator[None]:
    """A test that registers a task or admits a sandbox entry point undoes it (`plugged_in`,
    `monkeypatch`), or fails here: the task list (completions, unknown-task messages) would otherwise
    depend on which tests ran before in the same worker."""
    with registry_restored() as (tasks, entries):
        yield
        left = sorted(set(registry._REGISTRY) - set(tasks)) + sorted(runner._ALLOWED_ENTRIES - entries)
    assert not left, f"the test left registered: {', '.join(left)}"


@contextmanager
def plugged_in(module: str) -> Iterator[ModuleType]:
    """A plugin task module imported as a server imports one (it registers its tasks, and defining them
    admits their sandbox entry points), for the duration of the block only."""
    with registry_restored():
        sys.modules.pop(module, None)  # registering happens on import: import it afresh
        try:
            yield importlib.import_module(module)
        finally:
            sys.modules.pop(module, None)


@pytest.fixture(scope="session")
def small_codeopt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """codeopt-records at the suite's size: a copy of the shipped folder, given as a task folder, runs in
    its place (tests about the full-size benchmark make their own)."""
    from codeopt_rewrites import codeopt_folder

    where = tmp_path_factory.mktemp("small-codeopt") / "codeopt-records"
    return codeopt_folder(where, TEST_CODEOPT_RECORDS, TEST_CODEOPT_CALLS)


@pytest.fixture(autouse=True)
def isolated_data_dir(
    nothing_left_registered: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_codeopt: Path
) -> Iterator[Path]:
    # nothing_left_registered first: set up before `monkeypatch`, it checks after monkeypatch's undo.
    data = tmp_path / "data"
    for name in [n for n in os.environ if n.startswith("AUTORESEARCH_")]:  # nothing of the user's
        monkeypatch.delenv(name)
    monkeypatch.setenv("AUTORESEARCH_DATA_DIR", str(data))
    # Small codeopt benchmarks and one thread per training, in process and in every server a test
    # spawns: the suite runs two tests at a time on two cores. The tests about the full-size benchmark
    # set their own sizes.
    monkeypatch.setenv(ENV_TASK_DIRS, str(small_codeopt))
    monkeypatch.setenv("AUTORESEARCH_HPO_THREADS", "1")
    yield data


@contextmanager
def unused_port() -> Iterator[int]:
    """A loopback port nothing listens on, for as long as the block runs: bound here and never listening,
    so a connection to it is refused, and no other process (a parallel worker's server) can take it, as
    it could a port found free and closed again."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def covtype_csv() -> Path:
    """Some Covertype data: the 2,000-row fixture, always there."""
    return COVTYPE_FIXTURE


@pytest.fixture
def covtype_20k_csv() -> Path:
    """The 20,000-row set, for tests about the real data; they skip without it."""
    if not COVTYPE_20K.is_file():
        pytest.skip(f"{NEEDS_20K} (nothing at {COVTYPE_20K})")
    return COVTYPE_20K


@pytest.fixture
def agent_server_env(monkeypatch: pytest.MonkeyPatch, covtype_csv: Path) -> None:
    """What a server the agent spawns sees, as a user's would via AUTORESEARCH_*: the toy task (a
    plugin), the Covertype fixture, warnings only."""
    monkeypatch.setenv("AUTORESEARCH_TASK_PLUGINS", "toy_task")
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    monkeypatch.setenv("AUTORESEARCH_COVTYPE", str(covtype_csv))
    monkeypatch.setenv("AUTORESEARCH_LOG_LEVEL", "WARNING")
    # A training that hangs (seen once in CI, not explained) is killed well inside pytest's 300 s and
    # shows as a timeout experiment with its own message, not as a hung test.
    monkeypatch.setenv("AUTORESEARCH_HPO_WALL_S", "120")


# Set by the `shared_server` fixture for the test that asks for it.
_shared_server_url: str | None = None


@pytest.fixture(scope="session")
def _worker_server(tmp_path_factory: pytest.TempPathFactory, small_codeopt: Path) -> Iterator[str]:
    from http_servers import serving_process  # imports conftest: here, not at the top

    tmp = tmp_path_factory.mktemp("shared-server")
    small = {"AUTORESEARCH_TASK_DIRS": str(small_codeopt)}
    with serving_process(tmp / "runs.db", COVTYPE_FIXTURE, tmp / "data", **small) as (port, _proc):
        yield f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def shared_server(_worker_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """One HTTP server per test worker (the toy task, the suite's small sizes), for the agent tests
    that only need a server to run against: each starts a run of its own, and the run's database is
    the server's, not the test's. A server spawned per test costs about two CPU seconds of imports;
    the stdio transport keeps its own tests (test_cli, test_outside_clients, test_persistence)."""
    monkeypatch.setattr(sys.modules[__name__], "_shared_server_url", _worker_server)
    return _worker_server


@pytest.fixture
def server_here(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`run` and `compare` on a local database (`--db`) serve it in this process, over the SDK's
    in-memory transport, as the reading commands do (server/in_process.py), instead of spawning a stdio
    server: for the tests whose point is the agent or the command, not the transport. The server is the
    same (its settings from the same flags and AUTORESEARCH_* variables), its sandboxes still real
    subprocesses; a spawned one costs about two CPU seconds of imports. The stdio transport keeps tests
    of its own (test_cli, test_cli_mistakes' Ctrl-C, test_second_hour's terminal and bad toml,
    test_outside_clients, test_persistence, the examples)."""
    from autoresearch_mcp.client import compare, run_cmd
    from autoresearch_mcp.client.connect import connect
    from autoresearch_mcp.contract.env import data_setting
    from autoresearch_mcp.server.in_process import serve_here

    def connect_here(
        *, db: Path | None = None, data: str | None = None, server_args: list[str] | None = None, **rest: Any
    ) -> Any:
        if rest.get("server_url") or db is None:
            return connect(db=db, data=data, server_args=server_args, **rest)
        given = ["--data", data_setting(data)] if data is not None else []  # a spawned one's flag
        return connect(db=db, server_args=[*(server_args or []), *given], here=serve_here, **rest)

    for module in (run_cmd, compare):
        monkeypatch.setattr(module, "connect", connect_here)
    # What a server registers (a task folder's harness admits its sandbox entry point) is its own
    # process's: here, this test's only.
    with registry_restored():
        yield


def run_args(tmp_path: Path, *extra: str) -> "argparse.Namespace":
    """`autoresearch-mcp run` on a database of the test's own, quiet, with `extra` flags (with the
    `shared_server` fixture: against that server instead). The model proposes the first experiment too
    (`--first model`): a test's replies are the run's experiments, one for one; a test of the recorded
    defaults passes `--first defaults`."""
    from autoresearch_mcp.cli import build_parser

    server = (
        ["--server-url", _shared_server_url] if _shared_server_url else ["--db", str(tmp_path / "runs.db")]
    )
    argv = ["run", *server, "--quiet", "--first", "model", *extra]
    return build_parser().parse_args(argv)


def toy_openai_args(tmp_path: Path, base_url: str, iterations: int, *extra: str) -> "argparse.Namespace":
    """`run` on the toy task against an OpenAI-compatible endpoint (a fake one), model "m"."""
    return run_args(
        tmp_path, "--task", "toy-quadratic", "--llm", "openai", "--base-url", base_url,
        "--model", "m", "--iterations", str(iterations), *extra,
    )  # fmt: skip


@pytest.fixture
def settings(tmp_path: Path, covtype_csv: Path) -> ServerSettings:
    return ServerSettings(db_path=tmp_path / "runs.db", covtype_path=str(covtype_csv), hpo_threads=1)


def scripted_llm(task: str, seed: int = 42) -> "ScriptedLLM":
    """The scripted double as run_session builds it: the task as the server describes it, and train.py v1."""
    from autoresearch_mcp.client.llm.scripted import ScriptedLLM
    from autoresearch_mcp.server.tasks.registry import make_task

    spec = make_task(task, {})
    return ScriptedLLM(
        task=spec.info(), plan=spec.scripted_plan(), original=spec.initial_artifact(), seed=seed
    )
