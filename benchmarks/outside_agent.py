"""An outside framework with a small local model: does it record its experiments? (issue 31, point 6)

Runs examples/openai_agents_agent.py unchanged (the OpenAI Agents SDK, a server focused on the task with
`--tools-for`, unless `--all-tools`), with its hooks extended to write a transcript: each model call's
tokens and what it answered, each tool call with its arguments and the first line of its result. Then
reads the run's experiments from the database.

    flock /tmp/llm.lock python benchmarks/outside_agent.py --out DIR -- \\
        --task hpo-covertype --budget 3 --base-url http://127.0.0.1:8088/v1 --model qwen2.5-coder \\
        --tool-choice run_experiment --string-content

Writes DIR/transcript.jsonl, DIR/results.json (the experiments, the tokens, the wall time), also when
the example fails. llama-cpp-python's server needs the example's `--string-content`.
"""

import argparse
import importlib.util
import json
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

import agents

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "openai_agents_agent.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("openai_agents_agent", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recording_hooks(base: type, events: list[dict[str, Any]]) -> type:
    class Recorded(base):  # type: ignore[misc, valid-type]
        async def on_llm_end(self, context: Any, agent: Any, response: agents.ModelResponse) -> None:
            said = [item.model_dump(exclude_none=True) for item in response.output]
            usage = response.usage
            events.append({"model": {"in": usage.input_tokens, "out": usage.output_tokens, "output": said}})

        async def on_tool_start(self, context: Any, agent: Any, tool: agents.Tool) -> None:
            await super().on_tool_start(context, agent, tool)
            events.append({"tool": tool.name, "arguments": getattr(context, "tool_arguments", None)})

        async def on_tool_end(self, context: Any, agent: Any, tool: agents.Tool, result: object) -> None:
            events.append({"tool_result": tool.name, "text": str(result)[:2000]})

    return Recorded


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("example_args", nargs=argparse.REMAINDER, help="after --: the example's arguments")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.out / "runs.db"
    db.unlink(missing_ok=True)
    example_args = [a for a in args.example_args if a != "--"] + ["--db", str(db)]
    example = load_example()
    events: list[dict[str, Any]] = []
    example.PrintTools = recording_hooks(example.PrintTools, events)
    started = time.monotonic()
    error = None
    try:
        code = example.main(example_args)
    except SystemExit as exc:  # the example's one-line failure: kept with the rest
        code, error = 1, str(exc)
    wall_s = round(time.monotonic() - started, 1)
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT iteration, status, params_json, metric FROM experiments ORDER BY iteration"
        )
        experiments = [
            {"iteration": i, "status": s, "params": json.loads(p), "metric": m} for i, s, p, m in rows
        ]
        [(budget, status, reason)] = conn.execute("SELECT budget, status, finish_reason FROM runs").fetchall()
    finally:
        conn.close()
    calls = [e["model"] for e in events if "model" in e]
    results = {
        "example_args": example_args[:-2],
        "string_content": "--string-content" in example_args,
        "exit_code": code,
        "error": error,
        "run": {"budget": budget, "status": status, "finish_reason": reason},
        "experiments": experiments,
        "recorded_ok": sum(e["status"] == "ok" for e in experiments),
        "model_calls": len(calls),
        "input_tokens": [c["in"] for c in calls],
        "output_tokens": [c["out"] for c in calls],
        "wall_s": wall_s,
    }
    (args.out / "transcript.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (args.out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    db.unlink()
    print(
        json.dumps({k: results[k] for k in ("run", "recorded_ok", "model_calls", "input_tokens", "wall_s")})
    )
    return code


if __name__ == "__main__":
    sys.exit(main())
