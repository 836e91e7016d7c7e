"""How often does a model's next HPO proposal repeat an experiment already run? A probe of the stateful
agent's per-turn request, cheaper and steadier than whole runs.

Each situation is a real run's history up to experiment k (read from a committed transcript: the
stateless baseline's last prompt lists every experiment with its params and F1). The probe writes that
history into a fresh run (real store, no training), lets the real StatefulAgent build its request
exactly as in a run, and samples the model's next call several times. Each sample is classified as the
server would take it: `new`, `repeat` (the same params as an earlier experiment: refused as an exact
repeat), `invalid` (refused by the params model) or `no_call`. The first proposal after an experiment is
where a small model copies (the refusals of the real-model runs are mostly that), so this measures the
request's design, not the search.

    LOCAL_LLM_THREADS=2 local-llm start 8088   # the model server of docs/benchmarks.md
    python benchmarks/repeat_probe.py --base-url http://127.0.0.1:8088/v1 \\
        benchmarks/results/hpo-15-qwen2.5-coder-1.5b/before-change-line/seed-*/transcripts/stateless-*.jsonl.gz

Prints one line per situation and the totals; `--out FILE.json` keeps every sample.
"""

import argparse
import asyncio
import json
import logging
import re
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client
from pydantic import ValidationError

from autoresearch_mcp.client.check import AgentConfig
from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.llm.base import (
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from autoresearch_mcp.client.llm.openai_backend import OpenAILLM
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.prompts import repeat_hint
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.client.window import Turn
from autoresearch_mcp.contract.arguments import RunExperimentArgs, StartRunArgs
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.contract.transcript import load_transcript
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.folder.task import folder_task_class
from autoresearch_mcp.server.tasks.registry import BUILTIN

HPOParams = folder_task_class(BUILTIN / "hpo-covertype").params_model

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "covtype_2k.csv.gz"
ITER = re.compile(r"^Iter (\d+): F1=([\d.]+), precision=([\d.]+), recall=([\d.]+), params=(\{.*\})$")


def history_of(source: Path) -> list[dict[str, Any]]:
    """Every ok experiment of a real run: from a compare folder's runs.db (its stateful run), or as the
    stateless baseline's last prompt lists them (a transcript)."""
    if source.suffix == ".db":
        conn = sqlite3.connect(source)
        try:
            rows = conn.execute(
                "SELECT e.params_json, e.metrics_json FROM experiments e JOIN runs r ON r.id = e.run_id"
                " WHERE r.name LIKE '%stateful%' AND e.status = 'ok' ORDER BY e.iteration"
            ).fetchall()
        finally:
            conn.close()
        return [{"params": json.loads(p), "metrics": json.loads(m)} for p, m in rows]
    last = load_transcript(source)[-1]
    text = last["request"]["messages"][0]["text"]
    rows = []
    for line in text.splitlines():
        match = ITER.match(line.strip())
        if match:
            f1, precision, recall = (float(match.group(i)) for i in (2, 3, 4))
            rows.append(
                {
                    "params": HPOParams(**json.loads(match.group(5))).model_dump(),
                    "metrics": {"macro_f1": f1, "precision": precision, "recall": recall},
                }
            )
    return rows


class Sampler:
    """Stands in for the agent's LLM: on its first call it asks the real model `samples` times with the
    agent's own request, keeps the replies, and ends the run (an LLMError, which the agent reports)."""

    scripted = False
    cache_min_tokens = None

    def __init__(self, inner: OpenAILLM, samples: int) -> None:
        self.inner, self.samples = inner, samples
        self.name = inner.name
        self.request: LLMRequest | None = None
        self.replies: list[LLMResponse] = []

    def wire_tools(self, tools: list[ToolSpec]) -> list[dict[str, Any]]:
        return self.inner.wire_tools(tools)

    async def complete(self, request: LLMRequest) -> LLMResponse:
        self.request = request
        for _ in range(self.samples):
            self.replies.append(await self.inner.complete(request))
        raise LLMError("probe: samples taken")

    async def aclose(self) -> None:
        return None


def at_a_bound(sent: Any, best: dict[str, Any]) -> bool:
    """Whether the sample sets a param it changes to that param's minimum or maximum."""
    if not isinstance(sent, dict):
        return False
    properties = HPOParams.model_json_schema()["properties"]
    return any(
        name in properties
        and value != best.get(name)
        and value in (properties[name].get("minimum"), properties[name].get("maximum"))
        for name, value in sent.items()
    )


def classify(reply: LLMResponse, best: dict[str, Any], tried: list[dict[str, Any]]) -> tuple[str, Any]:
    """What the server would make of the reply's run_experiment call (sent with base="best")."""
    call = next((c for c in reply.tool_calls if c.name == "run_experiment"), None)
    if call is None:
        return "no_call", reply.text[:200]
    sent = call.arguments.get("params")
    if not isinstance(sent, dict):
        return "invalid", call.arguments
    try:
        config = HPOParams(**{**best, **sent}).model_dump()
    except ValidationError:
        return "invalid", sent
    return ("repeat" if config in tried else "new"), sent


def last_turn(history: list[dict[str, Any]], k: int, best_iteration: int, best_f1: float) -> Turn:
    """The turn that recorded experiment k, as the agent keeps it: the model's call (its whole
    configuration, as the real model mostly sent) and the result text the agent gave back."""
    row = history[k - 1]
    f1 = row["metrics"]["macro_f1"]
    new_best = " NEW BEST" if best_iteration == k else ""
    text = f"#{k} ok {f1:.4f}{new_best}; best {best_f1:.4f} (#{best_iteration}); budget left {15 - k}"
    call = ToolCall(id=f"probe-{k}", name="run_experiment", arguments={"params": row["params"]})
    return Turn(
        assistant=Message(role="assistant", tool_calls=[call]),
        user=Message(role="user", tool_results=[ToolResult(tool_call_id=call.id, content=text)]),
        recorded_experiment=True,
    )


async def refused_copy(rc: ResearchClient, run_id: str, best: dict[str, Any], schema: dict[str, Any]) -> Turn:
    """The turn of a model that copied the best configuration: its call, refused by the real server,
    and the agent's hint, as the agent would hold it."""
    outcome = await rc.call(RunExperimentArgs(params=best, base="best", run_id=run_id))
    assert not outcome.ok, "the copy of the best was not refused"
    history = await rc.history(run_id)
    tried = {
        name: sorted({json.dumps(e.params[name]): e.params[name] for e in history}.values())
        for name in schema.get("properties", {})
    }
    text = f"{outcome.text} {repeat_hint(ToolName.RUN_EXPERIMENT, best, tried, 0, schema)}"
    call = ToolCall(id="probe-copy", name=ToolName.RUN_EXPERIMENT, arguments={"params": best})
    return Turn(
        assistant=Message(role="assistant", tool_calls=[call]),
        user=Message(
            role="user", tool_results=[ToolResult(tool_call_id=call.id, content=text, is_error=True)]
        ),
    )


async def probe(
    history: list[dict[str, Any]],
    k: int,
    llm: OpenAILLM,
    samples: int,
    data: Path,
    window: int | None,
    with_last_turn: bool,
    after_refusal: bool,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = ServerSettings(db_path=Path(tmp) / "probe.db", covtype_path=str(data), hpo_threads=1)
        with Research(settings) as research:
            async with Client(build_server(research), raise_exceptions=True) as client:
                rc = ResearchClient(client)
                run_id = (await rc.result(StartRunArgs(task="hpo-covertype", budget=15, seed=1))).run_id
                store = research.store
                for row in history[:k]:
                    exp = store.reserve_experiment(run_id, row["params"], 1, None)
                    store.complete_experiment(
                        exp.id,
                        status="ok",
                        metrics=row["metrics"],
                        metric=row["metrics"]["macro_f1"],
                        error_tail=None,
                        duration_s=1.0,
                    )
                best_exp = store.best_experiment(run_id, "max")
                best = best_exp.params if best_exp is not None else {}
                sampler = Sampler(llm, samples)
                task = await rc.task("hpo-covertype")
                config = AgentConfig(
                    task=task, iterations=15 - k, max_failures=10, window=window, max_tokens=300
                )
                transcript = Transcript(run_id, "stateful", llm=sampler, path=Path(tmp) / "t.jsonl")
                agent = StatefulAgent(rc, transcript, run_id, config)
                if with_last_turn and best_exp is not None and best_exp.metric is not None:
                    agent.turns.append(last_turn(history, k, best_exp.iteration, best_exp.metric))
                if after_refusal:
                    agent.turns.append(await refused_copy(rc, run_id, best, task.params_schema))
                    agent.repeats = agent.failures = 1
                await agent.run()
    tried = [row["params"] for row in history[:k]]
    outcomes = [classify(reply, best, tried) for reply in sampler.replies]
    assert sampler.request is not None
    return {
        "k": k,
        "prompt": sampler.request.messages[0].text,
        "samples": [{"outcome": o, "sent": s, "at_a_bound": at_a_bound(s, best)} for o, s in outcomes],
    }


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "transcripts",
        nargs="+",
        type=Path,
        help="stateless transcripts (.jsonl[.gz]) or compare runs.db files",
    )
    parser.add_argument("--at", default="2,5,8,11,14", help="history lengths k to probe (comma list)")
    parser.add_argument("--samples", type=int, default=3, help="replies sampled per situation")
    parser.add_argument("--base-url", default="http://127.0.0.1:8088/v1")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--tool-choice", default="run_experiment")
    parser.add_argument("--seed", type=int, default=7, help="sampling seed (each call derives its own)")
    parser.add_argument("--window", type=int, default=None, help="the agent's --window (default: its own)")
    parser.add_argument(
        "--last-turn", action="store_true", help="the agent holds the turn that recorded experiment k"
    )
    parser.add_argument(
        "--after-refusal",
        action="store_true",
        help="the model has just copied the best and been refused (with the agent's hint)",
    )
    parser.add_argument("--data", type=Path, default=FIXTURE, help="any Covertype CSV (nothing is trained)")
    parser.add_argument("--out", type=Path, help="write every sample here as JSON")
    parser.add_argument("--show-prompt", action="store_true", help="print each situation's turn message")
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the table
    llm = OpenAILLM(
        base_url=args.base_url,
        temperature=args.temperature,
        tool_choice=args.tool_choice,
        max_tokens=300,
        seed=args.seed,
        timeout=900,
    )
    totals: dict[str, int] = {}
    at_bound = 0  # samples that set a param they change to its minimum or maximum
    results = []
    for path in args.transcripts:
        history = history_of(path)
        for k in (int(x) for x in args.at.split(",")):
            if k > len(history):
                continue
            result = await probe(
                history, k, llm, args.samples, args.data, args.window, args.last_turn, args.after_refusal
            )
            result["source"] = str(path)
            results.append(result)
            kinds = [s["outcome"] for s in result["samples"]]
            for kind in kinds:
                totals[kind] = totals.get(kind, 0) + 1
            at_bound += sum(s["at_a_bound"] for s in result["samples"])
            print(
                f"{path.parent.name if path.suffix == '.db' else path.parent.parent.name} k={k}: {' '.join(kinds)}",
                flush=True,
            )
            if args.show_prompt:
                print("  " + result["prompt"].replace("\n", "\n  "))
            for s in result["samples"]:
                print(f"    {s['outcome']}: {json.dumps(s['sent'])[:160]}")
    n = sum(totals.values())
    print(
        f"totals over {n} samples: "
        + ", ".join(f"{k} {v}" for k, v in sorted(totals.items()))
        + f"; a param set to a bound in {at_bound}"
    )
    if n:
        print(f"repeat share: {totals.get('repeat', 0) / n:.0%}")
    if args.out:
        settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        settings["transcripts"] = [str(p) for p in args.transcripts]
        args.out.write_text(json.dumps({"args": settings, "totals": totals, "results": results}, indent=1))
    await llm.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
