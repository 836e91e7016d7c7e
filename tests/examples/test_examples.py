"""The examples in examples/, each driven end to end: the real stdio server on the toy task, the real LLM
SDK, and a fake model endpoint that plays a short research session. What counts is what landed in the
server's SQLite file."""

import importlib.util
import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from conftest import ROOT, TESTS_DIR, unused_port

EXAMPLES = ROOT / "examples"
RUN_ID = re.compile(r"r-[0-9a-f]{10}")

# What the fake model does, one tool call per turn, then a closing answer. The out-of-range x is
# refused by the server without cost, so two experiments land, not three.
SESSION: list[tuple[str, dict[str, Any]]] = [
    ("get_run_summary", {}),
    ("run_experiment", {"params": {"x": 50.0}, "note": "out of range"}),
    ("run_experiment", {"params": {"x": 1.0, "y": 0.0}, "note": "a first probe"}),
    ("run_experiment", {"params": {"x": 0.3, "y": -0.2}, "note": "the optimum"}),
    ("finish_run", {"reason": "reached the optimum"}),
]
FINAL_TEXT = "Finished: best score 0 at x=0.3, y=-0.2."


def load(name: str, path: Path) -> ModuleType:
    """Import a file by path (examples/ is not a package; fakes sits beside other tests)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# Loaded at collection, not inside a test: mcp.client.stdio binds sys.stderr when first imported, and a
# test's capture stream is closed once that test ends.
fakes = load("fakes", TESTS_DIR / "client" / "fakes.py")
anthropic_example = load("anthropic_mcp_agent_example", EXAMPLES / "anthropic_mcp_agent.py")
openai_agents_example = load("openai_agents_agent_example", EXAMPLES / "openai_agents_agent.py")


def scripted_model(reply: Callable[[str | None, tuple[str, dict[str, Any]] | None], dict[str, Any]]) -> Any:
    """A fake-endpoint handler that plays SESSION. The turn is the number of assistant messages already
    in the request (each request resends the history); the run id is read from the conversation, as a
    model would, and passed on every call."""

    def handler(body: dict[str, Any]) -> dict[str, Any]:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        found = RUN_ID.search(json.dumps(body["messages"]))
        run_id = found.group(0) if found else None
        if turn >= len(SESSION):
            return reply(FINAL_TEXT, None)
        name, args = SESSION[turn]
        return reply(None, (name, {**args, "run_id": run_id}))

    return handler


def anthropic_reply(text: str | None, call: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    return fakes.anthropic_message(text or "", [call] if call else None)


def openai_reply(text: str | None, call: tuple[str, dict[str, Any]] | None) -> dict[str, Any]:
    return fakes.chat_completion(text, [call] if call else None)


@pytest.fixture
def toy_server_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the spawned server inherits: the toy task plugin and quiet logs (the data dir is per test)."""
    monkeypatch.setenv("AUTORESEARCH_TASK_PLUGINS", "toy_task")
    monkeypatch.setenv("PYTHONPATH", str(TESTS_DIR))
    monkeypatch.setenv("AUTORESEARCH_LOG_LEVEL", "WARNING")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    for name in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def recorded(db: Path) -> tuple[list[tuple[str, str, str | None]], list[tuple[int, str, dict[str, Any]]]]:
    """(runs as (task, status, finish_reason), experiments as (iteration, status, params))."""
    conn = sqlite3.connect(db)
    try:
        runs = conn.execute("SELECT task, status, finish_reason FROM runs").fetchall()
        rows = conn.execute("SELECT iteration, status, params_json FROM experiments ORDER BY iteration")
        experiments = [(i, s, json.loads(p)) for i, s, p in rows.fetchall()]
    finally:
        conn.close()
    return runs, experiments


EXPECTED_EXPERIMENTS = [
    (1, "ok", {"x": 1.0, "y": 0.0, "sleep": 0.0}),
    (2, "ok", {"x": 0.3, "y": -0.2, "sleep": 0.0}),
]
TOY_ARGS = ["--task", "toy-quadratic", "--budget", "3"]


def test_the_anthropic_example_runs_a_research_session_through_the_sdk_mcp_helpers(
    tmp_path: Path, toy_server_env: None, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY")  # a local endpoint needs no key
    db = tmp_path / "runs.db"

    with fakes.FakeAnthropicServer(handler=scripted_model(anthropic_reply)) as fake:
        argv = [*TOY_ARGS, "--all-tools", "--db", str(db), "--base-url", fake.base_url]
        assert anthropic_example.main(argv) == 0

    assert recorded(db) == ([("toy-quadratic", "stopped", "reached the optimum")], EXPECTED_EXPERIMENTS)
    bodies = fake.bodies("/v1/messages")
    assert len(bodies) == len(SESSION) + 1
    first = json.dumps(bodies[0]["messages"][0])
    assert 'autonomous research loop on the task \\"toy-quadratic\\"' in first  # the server's prompt
    assert RUN_ID.search(first)  # the model is told which run is its own
    for body in bodies:  # thread=False: full history and every tool on each turn, no threads beta
        assert "thread" not in body and "run_experiment" in {t["name"] for t in body["tools"]}
    assert all("message-threads" not in r.headers.get("anthropic-beta", "") for r in fake.requests)
    refusal = bodies[2]["messages"][-1]["content"][0]
    assert refusal["type"] == "tool_result" and refusal["is_error"] is True
    assert "less than or equal to 10" in json.dumps(refusal["content"])  # the range, for the model
    out = capfd.readouterr().out
    assert FINAL_TEXT in out and "stopped, 2/3 used" in out


def test_the_openai_agents_example_runs_a_research_session_through_its_builtin_mcp_support(
    tmp_path: Path, toy_server_env: None, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("OPENAI_API_KEY")  # a local endpoint needs no key
    db = tmp_path / "runs.db"

    with fakes.FakeOpenAIServer(handler=scripted_model(openai_reply)) as fake:
        argv = [
            *TOY_ARGS,
            "--all-tools",
            "--db",
            str(db),
            "--base-url",
            fake.base_url,
            "--model",
            "qwen2.5-coder",
        ]
        assert openai_agents_example.main(argv) == 0

    assert recorded(db) == ([("toy-quadratic", "stopped", "reached the optimum")], EXPECTED_EXPERIMENTS)
    bodies = fake.bodies("/chat/completions")
    assert len(bodies) == len(SESSION) + 1
    system = bodies[0]["messages"][0]
    assert system["role"] == "system" and 'research loop on the task "toy-quadratic"' in system["content"]
    assert RUN_ID.search(bodies[0]["messages"][1]["content"])  # the model is told which run is its own
    tools = {t["function"]["name"] for t in bodies[0]["tools"]}
    assert {"start_run", "run_experiment", "finish_run"} <= tools
    refusal = bodies[2]["messages"][-1]
    assert refusal["role"] == "tool" and "less than or equal to 10" in json.dumps(refusal["content"])
    out = capfd.readouterr().out
    assert FINAL_TEXT in out and "stopped, 2/3 used" in out


# A session against a server focused on the task: the model is offered only what the bundled agent
# offers its model, and sends no run_id. Three experiments use the budget of three.
FOCUSED: list[dict[str, Any]] = [
    {"params": {"x": 1.0}},
    {"params": {"x": 0.3, "y": -0.2}},
    {"params": {"x": 0.5}},
]


def focused_model(reply: Callable[[str | None, tuple[str, dict[str, Any]] | None], dict[str, Any]]) -> Any:
    def handler(body: dict[str, Any]) -> dict[str, Any]:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn >= len(FOCUSED):
            return reply(FINAL_TEXT, None)
        return reply(None, ("run_experiment", FOCUSED[turn]))

    return handler


FOCUSED_EXPERIMENTS = [
    (1, "ok", {"x": 1.0, "y": 0.0, "sleep": 0.0}),
    (2, "ok", {"x": 0.3, "y": -0.2, "sleep": 0.0}),
    (3, "ok", {"x": 0.5, "y": -0.2, "sleep": 0.0}),  # sent as {"x": 0.5}: changed from the best
]
FOCUSED_TOOLS = {"run_experiment"}  # what every params task offers (server/system_prompt.py)


def test_the_openai_agents_example_offers_the_tasks_tools_as_our_agent_does_and_stops_when_the_run_ends(
    tmp_path: Path, toy_server_env: None, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("OPENAI_API_KEY")
    db = tmp_path / "runs.db"
    with fakes.FakeOpenAIServer(handler=focused_model(openai_reply)) as fake:
        argv = [*TOY_ARGS, "--db", str(db), "--base-url", fake.base_url, "--tool-choice", "run_experiment"]
        assert openai_agents_example.main(argv) == 0

    assert recorded(db) == (
        # The example's own finish_run, after the budget ended the run: its reason kept after the server's.
        [
            (
                "toy-quadratic",
                "exhausted",
                "exhausted after experiment #3; finish_run: the model answered without a tool call",
            )
        ],
        FOCUSED_EXPERIMENTS,
    )
    bodies = fake.bodies("/chat/completions")
    assert len(bodies) == 3  # forced each turn, and the run's end ended the loop
    assert all(
        b["tool_choice"] == {"type": "function", "function": {"name": "run_experiment"}} for b in bodies
    )
    tools = {t["function"]["name"]: t["function"] for t in bodies[0]["tools"]}
    assert set(tools) == FOCUSED_TOOLS
    schema = tools["run_experiment"]["parameters"]
    assert "run_id" not in schema["properties"]
    # The params flat, as the focused server offers every params task's: only what changes from the best.
    assert set(schema["properties"]) == {"x", "y", "sleep"}
    system = bodies[0]["messages"][0]["content"]
    assert (
        system.startswith("Maximise a quadratic (test-only task). Call run_experiment with only the params")
        and "\n\n0/3 used, higher score is better\n" in system
    )
    result = bodies[1]["messages"][-1]
    assert result["role"] == "tool" and "#1 ok -0.5300 NEW BEST" in json.dumps(result["content"])
    assert "\\n1/3 used, higher score is better" in json.dumps(result["content"])  # the summary, each turn
    assert "exhausted, 3/3 used" in capfd.readouterr().out


def test_with_string_content_the_openai_agents_example_sends_every_message_content_as_one_string(
    tmp_path: Path, toy_server_env: None, monkeypatch: pytest.MonkeyPatch
):
    """llama-cpp-python's server refuses a tool result as a list of parts and a tool-calling assistant
    message with null content (HTTP 500): --string-content sends the same text as strings."""
    monkeypatch.delenv("OPENAI_API_KEY")
    db = tmp_path / "runs.db"
    with fakes.FakeOpenAIServer(handler=focused_model(openai_reply)) as fake:
        argv = [*TOY_ARGS, "--db", str(db), "--base-url", fake.base_url, "--tool-choice", "run_experiment"]
        assert openai_agents_example.main([*argv, "--string-content"]) == 0
    assert recorded(db)[1] == FOCUSED_EXPERIMENTS
    messages = [m for body in fake.bodies("/chat/completions") for m in body["messages"]]
    assert {m["role"] for m in messages} == {"system", "user", "assistant", "tool"}
    assert all(isinstance(m["content"], str) for m in messages)
    calls = [m for m in messages if m["role"] == "assistant"]
    assert calls and all(m["content"] == "" and m["tool_calls"] for m in calls)
    result = next(m for m in messages if m["role"] == "tool")
    assert "#1 ok -0.5300 NEW BEST" in result["content"]


def test_the_anthropic_example_offers_the_tasks_tools_as_our_agent_does(
    tmp_path: Path, toy_server_env: None, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    db = tmp_path / "runs.db"
    with fakes.FakeAnthropicServer(handler=focused_model(anthropic_reply)) as fake:
        assert anthropic_example.main([*TOY_ARGS, "--db", str(db), "--base-url", fake.base_url]) == 0

    assert recorded(db)[1] == FOCUSED_EXPERIMENTS
    bodies = fake.bodies("/v1/messages")
    assert {t["name"] for t in bodies[0]["tools"]} == FOCUSED_TOOLS
    assert "run_id" not in json.dumps(bodies[0]["tools"])
    result = bodies[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "#1 ok -0.5300 NEW BEST" in json.dumps(result["content"])


@pytest.mark.parametrize("script", ["anthropic_mcp_agent.py", "openai_agents_agent.py"])
def test_each_example_runs_as_a_script_and_says_how_to_run_it_for_real(script: str):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Run it for real" in done.stdout and "--base-url" in done.stdout and "--db" in done.stdout
    # Read in one sitting; the OpenAI one carries a transport for llama-cpp-python's server as well.
    assert len((EXAMPLES / script).read_text().splitlines()) < 180


def run_script(script: str, *args: str, drop: str) -> subprocess.CompletedProcess:
    """The example as a user runs it, without the variables starting with `drop` (its key)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args], capture_output=True, text=True, timeout=180, env=env
    )


@pytest.mark.parametrize(
    ("example", "drop", "says"),
    [
        (anthropic_example, "ANTHROPIC_", "set ANTHROPIC_API_KEY"),
        (openai_agents_example, "OPENAI_", "set OPENAI_API_KEY"),
    ],
    ids=["anthropic_mcp_agent.py", "openai_agents_agent.py"],
)
def test_each_example_without_key_or_endpoint_says_so_in_one_line_before_starting(
    tmp_path: Path,
    toy_server_env: None,
    monkeypatch: pytest.MonkeyPatch,
    example: ModuleType,
    drop: str,
    says: str,
):
    # In this process: Python prints a SystemExit's message as the one line, with status 1 (the script
    # itself runs as one in test_each_example_runs_as_a_script_and_says_how_to_run_it_for_real).
    for name in [k for k in os.environ if k.startswith(drop)]:
        monkeypatch.delenv(name)
    with pytest.raises(SystemExit) as leaving:
        example.main([*TOY_ARGS, "--db", str(tmp_path / "runs.db")])
    message = leaving.value.code
    assert isinstance(message, str) and says in message and "--base-url" in message
    assert len(message.strip().splitlines()) == 1, message
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.slow  # an endpoint failing mid-run: the run's end is test_agents_e2e's provider failure
@pytest.mark.parametrize(
    ("script", "drop"), [("anthropic_mcp_agent.py", "ANTHROPIC_"), ("openai_agents_agent.py", "OPENAI_")]
)
def test_each_example_whose_endpoint_fails_says_so_in_one_line_and_finishes_its_run(
    tmp_path: Path, toy_server_env: None, script: str, drop: str
):
    with unused_port() as port:
        url = f"http://127.0.0.1:{port}/v1"
        done = run_script(script, *TOY_ARGS, "--db", str(tmp_path / "runs.db"), "--base-url", url, drop=drop)
    assert done.returncode == 1 and "the model endpoint failed" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    [(_task, status, reason)] = recorded(tmp_path / "runs.db")[0]
    assert status == "stopped" and reason.startswith("the model endpoint failed")
