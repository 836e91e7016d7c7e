"""The issue's four reproductions, run against an older checkout: what tests/server/test_boundary_through_mcp.py
checks, with the same payloads, through the same MCP tools, printed instead of asserted.

Run it with the Python of the other checkout's environment (its `autoresearch_mcp` is the one measured;
the payloads are read from the test file beside this script), e.g. main at dcf55fd, from a checkout of
a6f24f2, which ran it so (421e464 turned codeopt-records into a task folder and dropped reproduction 1's
payloads; from a later checkout the script stops at once and says so):

    git archive dcf55fd | tar -x -C /tmp/main-src && python3 -m venv /tmp/main-venv
    /tmp/main-venv/bin/pip install -e "/tmp/main-src[dev]"
    git worktree add /tmp/at-a6f24f2 a6f24f2
    cd /tmp && /tmp/main-venv/bin/python /tmp/at-a6f24f2/benchmarks/reproductions_on_main.py

2 and 3 run with the Python layers off the way that checkout allows: its codeopt harness entry swapped for
tests/escaped_entry.py (real builtins and modules) and no guard.
"""

import asyncio
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

if "# -- 1." not in (ROOT / "tests" / "server" / "test_boundary_through_mcp.py").read_text():
    sys.exit(
        "reproductions_on_main.py needs the checkout of a6f24f2, which ran it (421e464 removed the codeopt "
        "plugin task and reproduction 1's payloads): git worktree add /tmp/at-a6f24f2 a6f24f2, then run "
        "/tmp/at-a6f24f2/benchmarks/reproductions_on_main.py with dcf55fd's Python, as its .md says"
    )

from mcp import Client  # noqa: E402

from autoresearch_mcp.sandbox.runner import allow_entry  # noqa: E402
from autoresearch_mcp.server.build import build_server  # noqa: E402
from autoresearch_mcp.server.research import Research  # noqa: E402
from autoresearch_mcp.server.settings import ServerSettings  # noqa: E402
from autoresearch_mcp.server.tasks.codeopt_records import task as codeopt_task  # noqa: E402
from autoresearch_mcp.server.tasks.codeopt_records.task import CodeOptTask  # noqa: E402
from autoresearch_mcp.server.tasks.registry import register  # noqa: E402

ESCAPED = "escaped_entry:run_escaped"


def payloads() -> dict[str, Any]:
    """The test file's payloads and helpers, without its imports of this checkout's new modules."""
    text = (ROOT / "tests" / "server" / "test_boundary_through_mcp.py").read_text()
    namespace: dict[str, Any] = {}
    exec(  # the test file is this repository's own code
        "import asyncio, os\nfrom pathlib import Path\nfrom typing import Any\nfrom mcp import Client\n"
        "from autoresearch_mcp.server.tasks.codeopt_records import rewrites\n"
        "from autoresearch_mcp.server.tasks.codeopt_records.records import REFERENCE_SOURCE\n"
        "from autoresearch_mcp.server.tasks.hpo_covertype.task import TRAIN_PY\n",
        namespace,
    )
    # Each part runs from its start to the next test or decorator (tests gain markers, e.g. slow).
    for start in ("async def call(", "# -- 1.", "# -- 2.", "# -- 3.", "SPINNER = "):
        first = text.index(start)
        end = re.compile(r"^(?:@pytest|async def test_|# -- \d)", re.MULTILINE).search(text, first + 1)
        exec(text[first : end.start() if end else len(text)], namespace)
    return namespace


class Escaped(CodeOptTask):
    name = "codeopt-escaped"

    def check_artifact(self, source: str) -> list[str]:
        return []


async def main() -> None:
    p = payloads()
    call, benchmark = p["call"], p["benchmark"]
    allow_entry(ESCAPED)
    register(Escaped.name, Escaped)
    db = Path(tempfile.mkdtemp()) / "runs.db"
    settings = ServerSettings(
        db_path=db,
        covtype_path=str(ROOT / "tests" / "data" / "covtype_2k.csv.gz"),
        hpo_threads=2,
        codeopt_records=3000,
        codeopt_repeats=10,
    )
    async with Client(build_server(Research(settings))) as client:
        for task, source in [("codeopt-records", p["CODEOPT_ESCAPE"]), ("hpo-covertype", p["HPO_ESCAPE"])]:
            run_id = (await call(client, "start_run", {"task": task, "budget": 3}))["run_id"]
            result = await client.call_tool(
                "modify_train_py", {"run_id": run_id, "description": "escape", "source": source}
            )
            print(f"1 {task}: the escape was {'refused' if result.is_error else 'accepted'}")
            if task == "codeopt-records" and not result.is_error:
                experiment = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
                print(f"  and benchmarked: {experiment['status']} (it reached os.fork on every call)")
        entry = codeopt_task.ENTRY
        codeopt_task.ENTRY = ESCAPED  # main's codeopt task reads its entry from this global
        run_id = (await call(client, "start_run", {"task": Escaped.name, "budget": 3}))["run_id"]
        experiment = await benchmark(client, run_id, p["SIX_FORKS_OF_400_MB"], "six forks")
        print("2", experiment["status"], (experiment["error_tail"] or "").strip().splitlines()[-1])
        run_id = (await call(client, "start_run", {"task": Escaped.name, "budget": 4}))["run_id"]
        await call(client, "run_benchmark", {"run_id": run_id})
        best = await benchmark(client, run_id, p["rewrites"].source_after(3), "a real rewrite, about 2x")
        attack = await benchmark(client, run_id, p["BURNERS"], "burners")
        keys = ("speedup", "vs_best", "vs_best_low", "vs_best_high")
        print("3 best kept:", best["kept"], {k: best["metrics"].get(k) for k in keys})
        print("3 attack kept:", attack["kept"], {k: attack["metrics"].get(k) for k in keys})
        codeopt_task.ENTRY = entry
        ids = [
            (await call(client, "start_run", {"task": "codeopt-records", "budget": 3}))["run_id"]
            for _ in "abc"
        ]
        for run_id in ids[1:]:
            await call(
                client, "modify_train_py", {"run_id": run_id, "description": "spin", "source": p["SPINNER"]}
            )
        spinning = [asyncio.create_task(call(client, "run_benchmark", {"run_id": r})) for r in ids[1:]]
        for _ in range(400):
            if p["busy_descendants"]() >= 2:
                break
            await asyncio.sleep(0.05)
        await call(client, "run_benchmark", {"run_id": ids[0]})
        await asyncio.gather(*spinning)
        start = "def process_records(records):\n"
        comment = p["REFERENCE_SOURCE"].replace(start, start + "    # same code\n")
        quiet = await benchmark(client, ids[0], comment, "a comment, nothing else")
        print(
            "4 comment-only, after the load:",
            {k: quiet["metrics"].get(k) for k in ("speedup", "speedup_low")},
        )


if __name__ == "__main__":
    asyncio.run(main())
