"""Property-based: whatever JSON a client sends to any tool, the answer is a result or a ToolError (never
a crash, never a hang), and no earlier record changes. In memory, on the real store and sandbox.

Each test builds one server and one client; hypothesis's @given is synchronous, so the client lives in
an anyio blocking portal (its own event loop thread) and each example is one `portal.call`. Arguments
are drawn per property from three sources: values the input schema admits, values it does not (any
JSON), and "interesting" real values (the runs' ids, job ids, train.py versions, near-valid sources and
edits). Most cases hit validation or the toy task; budgets are small so few reach the sandbox, and no
running run uses XGBoost.

What counts as a crash: a refusal of ours is an `is_error` result whose text is the message and whose
`_meta` carries the refusal with its kind; the SDK turns its own argument errors into `is_error`
with "Error executing tool NAME: <message>", and any other exception into `is_error` with the bare
"Error executing tool NAME" (and logs it at ERROR). So an error result must carry a message, and the SDK's server logger must stay free
of ERROR records. No exception may come out of call_tool either: the one the SDK raises for protocol
misuse here is pydantic's ValidationError (for CallToolRequestParams), on the client side, when
`arguments` is not a JSON object with string keys; nothing is sent then (see the test for it). Since
every tool here raises ToolError and never MCPError, no JSON-RPC error reaches the client.
"""

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pydantic
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, example, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from mcp import Client
from mcp.server import MCPServer
from mcp.types import CallToolResult
from record_checks import assert_earlier_records_intact, assert_store_consistent, snapshot

from autoresearch_mcp.contract.errors import REFUSAL_META
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.query import VIEWS
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from toy_task import SOURCE

CALL_TIMEOUT_S = 60.0  # a "hang": far above the slowest legitimate call here (a job wait of ~1 s)
READ_TOOLS = frozenset(
    {"list_runs", "get_experiment_history", "get_run_summary", "get_current_train_py", "get_job"}
    | {"query_results", "profile_train_py"}
)
# In this order: tools that change which run is current or stop it come last.
WRITE_TOOLS = (
    "add_note",
    "modify_train_py",
    "replace_function",
    "revert_train_py",
    "run_experiment",
    "run_benchmark",
    "submit_training_job",
    "finish_run",
    "start_run",
)


def fuzz(
    strategy: st.SearchStrategy[Any],
    examples: int,
    check: Callable[[Any], None],
    first: Sequence[Any] = (),
) -> None:
    """Run `check` on the values in `first`, then on `examples` values drawn from `strategy` (the same
    ones every run), shrinking any failure to a small example."""

    @hsettings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(value=strategy)
    def property_holds(value: Any) -> None:
        check(value)

    for value in first:
        property_holds = example(value=value)(property_holds)
    property_holds()


# -- JSON and schema strategies --------------------------------------------------------------------
# Integers where storage and conversions break: SQLite holds 64-bit signed, doubles 53-bit mantissas.
EDGE_INTS = (0, -1, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**30)
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from(EDGE_INTS)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
    | st.sampled_from(
        ["", "\x00", "null", "-1", "🦀" * 3, "r-", "../../etc/passwd", "'; DROP TABLE runs; --"]
    )
)
ANY_JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10,
)


def admitted(schema: dict[str, Any], defs: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that the JSON schema admits (the subset of JSON Schema that pydantic emits here)."""
    if "$ref" in schema:
        return admitted(defs[schema["$ref"].split("/")[-1]], defs)
    if "anyOf" in schema:
        return st.one_of([admitted(variant, defs) for variant in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        low, high = schema.get("minLength", 0), schema.get("maxLength")
        drawn = st.text(min_size=low, max_size=min(high or 40, 40))
        return drawn | st.just("x" * high) if high else drawn
    if kind == "integer":
        low, high = schema.get("minimum"), schema.get("maximum")
        edges = [n for n in EDGE_INTS if (low is None or n >= low) and (high is None or n <= high)]
        return st.integers(low, high) | st.sampled_from(edges) if edges else st.integers(low, high)
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        return st.lists(admitted(schema.get("items", {}), defs), max_size=min(schema.get("maxItems", 3), 3))
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        return st.fixed_dictionaries(
            {k: admitted(v, defs) for k, v in props.items() if k in required},
            optional={k: admitted(v, defs) for k, v in props.items() if k not in required},
        )
    return ANY_JSON


@st.composite
def arguments(
    draw: st.DrawFn, schema: dict[str, Any], hints: dict[str, st.SearchStrategy[Any]]
) -> dict[str, Any]:
    """One arguments object: each property admitted, hinted, any JSON, or left out; sometimes extra keys."""
    defs = schema.get("$defs", {})
    required = set(schema.get("required", ()))
    args: dict[str, Any] = {}
    for name, sub in schema.get("properties", {}).items():
        choice = draw(st.integers(0, 9))
        if choice == 0 or (choice == 1 and name not in required):
            continue  # left out (a missing required one is a validation error)
        if choice <= 3:
            args[name] = draw(ANY_JSON)
        elif name in hints and choice <= 7:
            args[name] = draw(hints[name])
        elif name == "params":  # the schema admits sleep up to 60 s: hinted params keep tests fast
            args[name] = draw(hints["params"])
        else:
            args[name] = draw(admitted(sub, defs))
    args.update(draw(st.dictionaries(st.text(min_size=1, max_size=8), ANY_JSON, max_size=2)))
    return args


def toy_params() -> st.SearchStrategy[dict[str, Any]]:
    coordinate = st.floats(-10, 10, allow_nan=False) | st.sampled_from([0.3, 9.0, -10.0, 10.0])
    valid = st.fixed_dictionaries(
        {"x": coordinate}, optional={"y": coordinate, "sleep": st.floats(0, 0.05, allow_nan=False)}
    )
    near = st.fixed_dictionaries(
        {}, optional={"x": ANY_JSON, "y": st.floats(allow_nan=False), "bogus": ANY_JSON, "sleep": ANY_JSON}
    )
    hpo = st.fixed_dictionaries({}, optional={"max_depth": st.integers(1, 15), "n_estimators": st.integers()})
    return st.one_of(valid, valid, near, hpo, st.dictionaries(st.text(max_size=8), ANY_JSON, max_size=3))


HOSTILE_SOURCES = [
    "import os\n\ndef score(params):\n    return float(len(os.environ))\n",
    "def score(params):\n    return ().__class__.__bases__[0].__subclasses__()\n",
    "def score(params):\n    return eval('1')\n",
    "def score(p):\n    return 1.0\n",
    "def score(params)\n    return 1.0\n",
    "x = (" * 300 + ")" * 300 + "\ndef score(params):\n    return 1.0\n",
    "\x00",
    "",
]


def sources() -> st.SearchStrategy[str]:
    variant = st.integers(0, 10**6).map(lambda n: SOURCE + f"\n# variant {n}\n")
    return variant | st.sampled_from(HOSTILE_SOURCES) | st.text(max_size=200)


def edits() -> st.SearchStrategy[list[dict[str, Any]]]:
    lines = [line + "\n" for line in SOURCE.splitlines() if line.strip()]
    search = st.sampled_from(lines) | st.text(max_size=20)
    replace = st.sampled_from(["", "# note\n", "import os\n", "    return 1.0\n"]) | st.text(max_size=20)
    edit = st.fixed_dictionaries({"search": search, "replace": replace})
    return st.lists(edit | st.dictionaries(st.text(max_size=8), ANY_JSON, max_size=3), max_size=3)


# -- SQL from a grammar of fragments, plus whole hostile statements -------------------------------
SQL_WORDS = [
    *("SELECT", "*", "FROM", "WHERE", "AS", "JOIN", "ON", "UNION", "ALL", "LIMIT", "ORDER BY", "GROUP BY"),
    *("INSERT INTO", "VALUES", "UPDATE", "SET", "DELETE FROM", "REPLACE INTO", "DROP TABLE", "DROP VIEW"),
    *("CREATE TABLE", "CREATE TEMP TABLE", "CREATE VIEW", "CREATE TRIGGER", "CREATE INDEX", "ALTER TABLE"),
    *("ATTACH DATABASE", "DETACH", "PRAGMA", "VACUUM", "REINDEX", "ANALYZE", "BEGIN", "COMMIT", "ROLLBACK"),
    *("SAVEPOINT", "WITH", "RECURSIVE", ";", "(", ")", ",", "=", "--", "/*", "*/", "'", '"', "1", "NULL"),
]
SQL_NAMES = [
    *VIEWS,
    *("runs", "experiments", "artifacts", "notes", "events", "jobs", "schema_migrations", "main.runs"),
    *("sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_sequence", "temp.t"),
    *("pragma_table_info('runs')", "json_each('[1,2]')", "generate_series(1, 10)"),
]
SQL_CALLS = [
    *("load_extension('libx')", "readfile('/etc/passwd')", "writefile('x', 'y')", "zeroblob(100000000)"),
    *("randomblob(16)", "random()", "sqlite_version()", "json_extract(params, '$.x')", "edit('x')"),
    *("printf('%.*c', 100000000, 'x')", "upper(name)", "char(65)", "fts3_tokenizer('simple')"),
]


def hostile_statements(out_dir: Path) -> list[str]:
    target = out_dir / "evil.db"
    return [
        "UPDATE runs SET status = 'stopped'",
        "DELETE FROM experiments",
        "DROP TABLE notes",
        "INSERT INTO v_notes VALUES (99, 'r-x', 'strategy', 'forged', 'now')",
        "SELECT 1; DELETE FROM experiments",
        f"ATTACH DATABASE '{target}' AS evil",
        f"VACUUM INTO '{target}'",
        "PRAGMA writable_schema = 1",
        "PRAGMA journal_mode = DELETE",
        "BEGIN EXCLUSIVE",
        "CREATE TEMP TABLE t AS SELECT * FROM v_runs",
        "CREATE TEMP TRIGGER t AFTER INSERT ON notes BEGIN DELETE FROM notes; END",
        "WITH v_runs AS (SELECT * FROM events) SELECT * FROM v_runs",
        "SELECT * FROM sqlite_master",
        "SELECT load_extension('/tmp/evil')",
        "SELECT zeroblob(1000000000)",
        "SELECT count(*) FROM v_experiments a, v_experiments b, v_notes c",
        "SELECT * FROM v_runs WHERE run_id = '' OR 1=1 --",
        "sElEcT run_id /* comment */ FROM v_runs -- tail",
        "SELECT source FROM v_artifacts ORDER BY version DESC",
    ]


def sql_strings(out_dir: Path) -> st.SearchStrategy[str]:
    fragment = st.sampled_from(SQL_WORDS + SQL_NAMES + SQL_CALLS) | st.text(max_size=6)
    soup = st.lists(fragment, min_size=1, max_size=12).map(" ".join)
    select = st.builds(
        "SELECT {} FROM {} {}".format,
        st.sampled_from(["*", "count(*)", "1", "typeof(1)", "random()", "upper('a')", *SQL_CALLS]),
        st.sampled_from([*VIEWS, *VIEWS, *SQL_NAMES]),
        st.sampled_from(
            ["", "LIMIT 3", "WHERE 1=1", "ORDER BY 1 DESC", "; SELECT 1", "UNION SELECT * FROM runs"]
        ),
    )
    return st.one_of(select, select, soup, st.sampled_from(hostile_statements(out_dir)))


# Calls that succeed on the populated world, run before the drawn ones so every valid path is taken.
VALID_CALLS: dict[str, list[dict[str, Any]]] = {
    "add_note": [{"text": "try y below zero", "kind": "failed"}],
    "modify_train_py": [
        {"description": "a comment", "source": SOURCE + "\n# fuzz\n"},
        {
            "description": "edit",
            "edits": [{"search": "import time\n", "replace": "import time\nimport math\n"}],
        },
    ],
    "replace_function": [
        {"name": "score", "source": "def score(params):\n    return -abs(params['x'] - 0.3)\n"}
    ],
    "revert_train_py": [{"version": 1}],
    "run_experiment": [{"params": {"x": 0.1, "y": 0.2}}, {"params": {"x": 9.0, "y": 1.0}, "note": "crashes"}],
    "submit_training_job": [{"params": {"x": 0.7, "sleep": 0.01}}],
    "finish_run": [{"reason": "fuzzing done"}],
    "start_run": [{"task": "toy-quadratic", "budget": 2}],
}


def edge_cases(schema: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """`base` with each property in turn set to a value at the edges of JSON and of SQLite's integers
    (random draws reach these rarely, so every tool gets them explicitly)."""
    values: list[Any] = [2**63, -(2**63) - 1, 10**30, -1, "\x00", None]
    return [{**base, name: value} for name in schema.get("properties", {}) for value in values]


# -- the harness ----------------------------------------------------------------------------------
class ErrorRecords(logging.Handler):
    """Collects ERROR records from the SDK's server logger: it logs a tool crash there with a traceback."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Harness:
    portal: BlockingPortal
    client: Client
    server: MCPServer
    research: Research
    db: Path
    errors: ErrorRecords
    tools: dict[str, Any] = field(default_factory=dict)

    def call(self, tool: str, args: Any) -> CallToolResult:
        async def bounded() -> CallToolResult:
            with anyio.fail_after(CALL_TIMEOUT_S):
                return await self.client.call_tool(tool, args)

        return self.portal.call(bounded)

    def ok(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = self.call(tool, args)
        assert not result.is_error, result.content[0].text
        assert result.structured_content is not None
        return result.structured_content

    def answered(self, tool: str, args: dict[str, Any]) -> CallToolResult:
        """The property: a result or a ToolError that says why; nothing logged as a crash."""
        self.errors.records.clear()
        result = self.call(tool, args)
        if result.is_error:
            text = result.content[0].text
            refused = (result.meta or {}).get(REFUSAL_META)
            said_why = text.startswith(f"Error executing tool {tool}: ") or (
                refused is not None and refused["message"] == text and text
            )
            assert said_why, f"{tool} crashed on {args!r}: {text!r}"
        else:
            assert result.structured_content is not None, (tool, args)
        assert not self.errors.records, [r.getMessage() for r in self.errors.records]
        return result


@contextmanager
def serving(settings: ServerSettings) -> Iterator[Harness]:
    research = Research(settings).open()
    server = build_server(research)
    errors = ErrorRecords()
    logger = logging.getLogger("mcp.server.mcpserver.server")
    logger.addHandler(errors)
    try:
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(Client(server)) as client,
        ):
            harness = Harness(portal, client, server, research, settings.db_path, errors)
            listed = portal.call(client.list_tools)
            harness.tools = {tool.name: tool.input_schema for tool in listed.tools}
            yield harness
    finally:
        logger.removeHandler(errors)
        research.close()


@dataclass
class World:
    """The records a test starts from, and the hints that aim arguments at them."""

    toy_run: str
    stopped_run: str
    job_id: str | None
    hints: dict[str, st.SearchStrategy[Any]]
    typical: dict[str, st.SearchStrategy[dict[str, Any]]]


def populate(h: Harness, tmp_path: Path, with_job: bool) -> World:
    stopped = h.ok("start_run", {"task": "hpo-covertype", "budget": 3, "name": "stopped"})["run_id"]
    h.ok("finish_run", {"reason": "never used", "run_id": stopped})
    toy = h.ok("start_run", {"task": "toy-quadratic", "budget": 8})["run_id"]
    h.ok("run_experiment", {"params": {"x": 1.0}, "note": "first"})
    h.ok("run_experiment", {"params": {"x": 9.0}})  # the toy candidate crashes on x=9: a crash record
    h.ok("add_note", {"text": "x near 0.3", "kind": "strategy"})
    change = {"search": "import time\n", "replace": "import time\n# v2\n"}
    h.ok("modify_train_py", {"description": "v2", "edits": [change]})
    job_id = None
    if with_job:
        job_id = h.ok("submit_training_job", {"params": {"x": 0.5}})["job"]["id"]
        done = h.ok("get_job", {"job_id": job_id, "wait_seconds": 60})
        assert done["job"]["status"] == "done"
    runs = st.sampled_from([toy, stopped, "r-0000000000", "", "R-" + toy[2:]])
    hints: dict[str, st.SearchStrategy[Any]] = {
        "run_id": runs | st.text(max_size=70),
        "job_id": st.sampled_from([job_id or "j-none", "j-0000000000", ""]) | st.text(max_size=70),
        "version": st.integers(-1, 6) | st.sampled_from(EDGE_INTS),
        "params": toy_params(),
        "source": sources(),
        "edits": edits(),
        "sql": sql_strings(tmp_path / "sql-out"),
        "wait_seconds": st.floats(0, 0.2, allow_nan=False),
        "task": st.sampled_from(["toy-quadratic", "hpo-covertype", "codeopt-records", "nope"]),
    }
    return World(toy, stopped, job_id, hints, well_formed(hints))


def well_formed(hints: dict[str, st.SearchStrategy[Any]]) -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """Arguments shaped the way a sensible client sends them, so the valid paths get exercised too."""
    text = st.text(min_size=1, max_size=40)
    run = st.fixed_dictionaries({}, optional={"run_id": hints["run_id"]})
    return {
        "add_note": st.fixed_dictionaries(
            {"text": text}, optional={"kind": st.sampled_from(["strategy", "failed"])}
        ),
        "modify_train_py": st.fixed_dictionaries({"description": text, "source": hints["source"]})
        | st.fixed_dictionaries({"description": text, "edits": hints["edits"]}),
        "replace_function": st.fixed_dictionaries(
            {"name": st.sampled_from(["score", "nope", "time"]), "source": hints["source"]}
        ),
        "revert_train_py": st.fixed_dictionaries({"version": st.integers(1, 4)}),
        "run_experiment": st.fixed_dictionaries({"params": hints["params"]}, optional={"note": text}),
        "run_benchmark": run,
        "submit_training_job": st.fixed_dictionaries({"params": hints["params"]}),
        "finish_run": st.fixed_dictionaries({"reason": text}) | run.map(lambda r: {"reason": "done", **r}),
        "start_run": st.fixed_dictionaries(
            {"task": hints["task"]},
            optional={"budget": st.integers(1, 20), "target": st.floats(-1, 1), "seed": st.integers(0, 9)},
        ),
    }


# -- the tests ------------------------------------------------------------------------------------
def test_the_fuzzed_tools_are_exactly_the_tools_the_server_lists(settings: ServerSettings):
    with serving(settings) as h:
        assert set(h.tools) == READ_TOOLS | set(WRITE_TOOLS), "a new tool needs a fuzz phase here"


def test_any_arguments_to_the_read_tools_get_an_answer_and_change_nothing(
    settings: ServerSettings, tmp_path: Path
):
    settings = settings.model_copy(update={"workers": 1})
    with serving(settings) as h:
        world = populate(h, tmp_path, with_job=True)
        before = snapshot(h.db)

        for tool in sorted(READ_TOOLS):

            def read_changes_nothing(args: dict[str, Any], tool: str = tool) -> None:
                h.answered(tool, args)
                assert snapshot(h.db) == before

            base = {"sql": "SELECT 1"} if tool == "query_results" else {}
            edges = edge_cases(h.tools[tool], base)
            fuzz(arguments(h.tools[tool], world.hints), 40, read_changes_nothing, first=edges)
        assert_store_consistent(h.db)


def test_any_sql_is_refused_or_answered_read_only(settings: ServerSettings, tmp_path: Path):
    out_dir = tmp_path / "sql-out"  # where ATTACH and VACUUM INTO would create files if they could
    out_dir.mkdir()
    with serving(settings) as h:
        world = populate(h, tmp_path, with_job=False)
        before = snapshot(h.db)
        files = sorted(p.name for p in h.db.parent.iterdir() if not p.name.endswith(("-wal", "-shm")))
        answered: list[bool] = []

        def sql_is_read_only(case: tuple[str, Any]) -> None:
            sql, max_rows = case
            result = h.answered("query_results", {"sql": sql, "max_rows": max_rows})
            answered.append(not result.is_error)
            if not result.is_error:
                body = result.structured_content
                assert len(body["rows"]) <= (max_rows if isinstance(max_rows, int) else 200)
                assert all(len(row) == len(body["columns"]) for row in body["rows"])
            assert snapshot(h.db) == before
            assert not any(out_dir.iterdir())

        rows = st.one_of(st.integers(1, 1000), st.integers(1, 3), ANY_JSON)
        hostile = [(sql, 200) for sql in hostile_statements(out_dir)]  # each one surely, then drawn ones
        fuzz(st.tuples(world.hints["sql"], rows), 80, sql_is_read_only, first=hostile)
        assert any(answered) and not all(answered)  # both paths were exercised
        after = sorted(p.name for p in h.db.parent.iterdir() if not p.name.endswith(("-wal", "-shm")))
        assert after == files  # nothing attached, vacuumed into or created next to the store


def test_any_arguments_to_the_write_tools_get_an_answer_and_leave_earlier_records_intact(
    settings: ServerSettings, tmp_path: Path
):
    settings = settings.model_copy(update={"workers": 1})
    with serving(settings) as h:
        world = populate(h, tmp_path, with_job=False)
        outcomes: dict[str, list[bool]] = {}

        for tool in WRITE_TOOLS:
            outcomes[tool] = []

            def earlier_records_stay(args: dict[str, Any], tool: str = tool) -> None:
                before = snapshot(h.db)
                result = h.answered(tool, args)
                outcomes[tool].append(not result.is_error)
                assert_earlier_records_intact(before, snapshot(h.db))

            strategy = arguments(h.tools[tool], world.hints) | world.typical[tool]
            valid = VALID_CALLS.get(tool, [])
            edges = edge_cases(h.tools[tool], valid[0] if valid else {})
            fuzz(strategy, 30, earlier_records_stay, first=valid + edges)
            h.ok("list_runs", {})  # and the server still answers normally

        # every tool was refused at least once, and the ones that can succeed here did
        assert all(not all(results) for results in outcomes.values()), outcomes
        for tool in ("add_note", "modify_train_py", "run_experiment", "finish_run", "start_run"):
            assert any(outcomes[tool]), f"{tool} never succeeded: the fuzzing missed the valid path"
        for job in h.ok("query_results", {"sql": "SELECT job_id FROM v_jobs"})["rows"]:
            h.ok("get_job", {"job_id": job[0], "wait_seconds": 30})  # let jobs end before the check
        assert_store_consistent(h.db)


def test_arguments_that_are_not_a_json_object_are_refused_by_the_client_before_sending(
    settings: ServerSettings,
):
    """The one exception call_tool raises: pydantic's ValidationError for CallToolRequestParams."""
    with serving(settings) as h:
        for bad in ([1], "params", 3, {1: "x"}):
            with pytest.raises(pydantic.ValidationError, match="CallToolRequestParams"):
                h.call("list_runs", bad)
        assert h.call("list_runs", None).is_error is False  # no arguments at all is {}
        unknown = h.call("no_such_tool", {})
        assert unknown.is_error and unknown.content[0].text == "Unknown tool: no_such_tool"
        assert h.ok("list_runs", {})["runs"] == []


def test_a_tool_crash_would_be_caught_by_these_checks(
    settings: ServerSettings, monkeypatch: pytest.MonkeyPatch
):
    """The crash detector itself works: make list_runs fail with something unexpected."""

    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("an unexpected bug")

    with serving(settings) as h:
        monkeypatch.setattr(h.research.store, "list_runs", explode)
        crash = h.call("list_runs", {})
        assert crash.is_error and crash.content[0].text == "Error executing tool list_runs"
        assert [r.getMessage() for r in h.errors.records] == [
            "Tool 'list_runs' raised an unexpected exception"
        ]
        h.errors.records.clear()
        with pytest.raises(AssertionError, match="crashed"):
            h.answered("list_runs", {})
