"""What becomes of a model's first codeopt-records edit? A probe of the stateful agent's text protocol.

The real StatefulAgent builds its first request (`--code-replies text`) on a fresh codeopt-records run,
the model is sampled several times on it, and each reply goes the way the agent would send it: read
as edits, a whole file, REVERT or DONE; sent to modify_train_py; benchmarked by the real sandbox when
the edit applied. After each, train.py goes back to v1, so every sample starts from the same file.
The outcome counts say whether the model can write a correct faster version at all, and where its
attempts fail (an unreadable reply, an edit that does not apply, a crash, a wrong output).

    LOCAL_LLM_THREADS=2 local-llm start 8088   # the model server of docs/benchmarks.md
    python benchmarks/code_probe.py --base-url http://127.0.0.1:8088/v1 --samples 10

Prints one line per sample and the totals; `--out FILE.json` keeps every reply and result.
"""

import argparse
import asyncio
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client
from repeat_probe import Sampler

from autoresearch_mcp.client.check import AgentConfig
from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.llm.openai_backend import OpenAILLM
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.client.replies import describe_reply, read_text_reply
from autoresearch_mcp.client.stateful import StatefulAgent
from autoresearch_mcp.contract.arguments import RevertTrainPyArgs, RunBenchmarkArgs, StartRunArgs
from autoresearch_mcp.contract.errors import error_headline
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings


async def outcome_of(rc: ResearchClient, run_id: str, text: str, current: str) -> dict[str, Any]:
    """Send one reply the way the agent does, benchmark it, and put train.py back to v1."""
    reply = read_text_reply(text, current, used=0)
    if reply.action in ("refused", "done", "revert"):
        return {"outcome": reply.action if reply.action != "refused" else f"refused:{reply.kind}"}
    arguments: dict[str, Any] = {"description": describe_reply(text), "run_id": run_id}
    if reply.edits is not None:
        arguments["edits"] = [{"search": s, "replace": r} for s, r in reply.edits]
    else:
        arguments["source"] = reply.source
    changed = await rc.call_tool(ToolName.MODIFY_TRAIN_PY, arguments)
    if not changed.ok:
        kind = changed.refusal.kind if changed.refusal else "error"
        return {"outcome": f"edit_refused:{kind}", "why": changed.text[:300]}
    measured = await rc.call(RunBenchmarkArgs(run_id=run_id))
    await rc.call(RevertTrainPyArgs(version=1, run_id=run_id))
    if not measured.ok:
        return {"outcome": "benchmark_refused", "why": measured.text[:300]}
    exp = (measured.data or {}).get("experiment", {})
    result: dict[str, Any] = {
        "outcome": exp.get("status"),
        "speedup": (exp.get("metrics") or {}).get("speedup"),
    }
    if exp.get("error_tail"):
        result["why"] = error_headline(exp["error_tail"])[:300]
    return result


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--base-url", default="http://127.0.0.1:8088/v1")
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=1800)
    parser.add_argument("--seed", type=int, default=7, help="sampling seed (each call derives its own)")
    parser.add_argument("--out", type=Path, help="write every reply and result here as JSON")
    args = parser.parse_args(argv)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    llm = OpenAILLM(
        base_url=args.base_url,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        seed=args.seed,
        timeout=900,
    )
    sampler = Sampler(llm, args.samples)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = ServerSettings(db_path=Path(tmp) / "probe.db")
        with Research(settings) as research:
            async with Client(build_server(research), raise_exceptions=True) as client:
                rc = ResearchClient(client)
                run_id = (await rc.result(StartRunArgs(task="codeopt-records", budget=1000, seed=1))).run_id
                task = await rc.task("codeopt-records")
                config = AgentConfig(
                    task=task,
                    iterations=1000,
                    max_failures=10,
                    max_tokens=args.max_tokens,
                    code_replies="text",
                )
                transcript = Transcript(run_id, "stateful", llm=sampler, path=Path(tmp) / "t.jsonl")
                await StatefulAgent(rc, transcript, run_id, config).run()
                # The agent finished the run when the sampler stopped it; a new run takes the edits.
                run_id = (await rc.result(StartRunArgs(task="codeopt-records", budget=1000, seed=1))).run_id
                current = await rc.train_py(run_id)
                totals: dict[str, int] = {}
                for i, reply in enumerate(sampler.replies, 1):
                    result = await outcome_of(rc, run_id, reply.text, current)
                    results.append({"reply": reply.text, **result})
                    totals[result["outcome"]] = totals.get(result["outcome"], 0) + 1
                    speed = f" {result['speedup']:.2f}x" if result.get("speedup") else ""
                    print(f"{i}: {result['outcome']}{speed} {result.get('why', '')}", flush=True)
    print("totals: " + ", ".join(f"{k} {v}" for k, v in sorted(totals.items())))
    if args.out:
        settings_out = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
        assert sampler.request is not None
        prompt = {"system": sampler.request.system, "turn": sampler.request.messages[0].text}
        args.out.write_text(
            json.dumps(
                {"args": settings_out, "prompt": prompt, "totals": totals, "results": results}, indent=1
            )
        )
    await llm.aclose()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
