"""`autoresearch-mcp import` reads what `export --format json` writes: a run moves to another database
with its experiments, train.py versions and notes, and reads the same there."""

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.cli import main
from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.client.run_document import run_document
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.transfer import export_run

pytestmark = pytest.mark.asyncio


def research_run(settings: ServerSettings) -> str:
    """A run with a bit of everything: a crash, a new train.py version (long enough to be read in
    slices), both kinds of note, and a best on v2."""
    with Research(settings) as research:
        service = research
        run, _ = service.runs.start_run("toy-quadratic", 10, None, 7, "to move")
        service.experiments.run_experiment(run.id, {"x": 1.0}, "first")
        service.experiments.run_experiment(run.id, {"x": 9.0}, None)  # crashes
        service.runs.add_note(run.id, "x near 0.3", "strategy")
        service.runs.add_note(run.id, "x=9 crashes", "failed")
        long_comment = "# " + "padding " * 5000 + "\n"  # 40,000 characters: three slices of 20,000
        service.train_py.modify_train_py(
            run.id, "a long comment", None, [("import time\n", "import time\n" + long_comment)]
        )
        service.experiments.run_experiment(run.id, {"x": 0.3, "y": -0.2}, "on v2")
        return run.id


async def exported(settings: ServerSettings, run_id: str) -> dict[str, Any]:
    """What `export --format json` writes, built over MCP as the command builds it."""
    with Research(settings) as research:
        async with Client(build_server(research)) as client:
            rc = ResearchClient(client)
            document = await run_document(rc, await rc.run(run_id), await rc.history(run_id))
    return json.loads(document.model_dump_json(exclude={"note"}))


def without_ids(document: dict[str, Any]) -> dict[str, Any]:
    """Experiment and note ids are each database's own."""
    return {
        **document,
        "experiments": [{k: v for k, v in e.items() if k != "id"} for e in document["experiments"]],
        "notes": [{k: v for k, v in n.items() if k != "id"} for n in document["notes"]],
    }


async def test_a_run_exported_and_imported_elsewhere_reads_the_same_there(tmp_path: Path):
    here = ServerSettings(db_path=tmp_path / "here.db")
    run_id = research_run(here)
    document = await exported(here, run_id)
    assert [v["version"] for v in document["train_py"]] == [1, 2] and len(document["notes"]) == 2
    assert len(document["train_py"][1]["source"]) > 40_000
    file = tmp_path / "run.json"
    file.write_text(json.dumps(document))

    there = tmp_path / "there.db"
    assert main(["import", str(file), "--db", str(there)]) == 0
    assert without_ids(await exported(ServerSettings(db_path=there), run_id)) == without_ids(document)
    with Research(ServerSettings(db_path=here.db_path)) as a, Research(ServerSettings(db_path=there)) as b:
        assert a.runs.get_run_summary(run_id) == b.runs.get_run_summary(
            run_id
        )  # the same best, counts and lines


async def test_importing_a_run_the_database_has_is_refused_unless_asked_for_new_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    settings = ServerSettings(db_path=tmp_path / "runs.db")
    run_id = research_run(settings)
    file = tmp_path / "run.json"
    store = Store(settings.db_path)
    file.write_text(export_run(store, run_id).model_dump_json())
    store.close()

    assert main(["import", str(file), "--db", str(settings.db_path)]) == 2
    assert f"run {run_id} is already in this database: nothing imported" in capsys.readouterr().err
    assert main(["import", str(file), "--db", str(settings.db_path), "--new-ids"]) == 0
    store = Store(settings.db_path)
    runs = store.list_runs()
    assert len(runs) == 2 and {r.used for r in runs} == {3}
    assert runs[0].best == runs[1].best
    store.close()


async def test_a_file_that_is_not_an_export_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    file = tmp_path / "other.json"
    file.write_text(json.dumps({"run": {"id": "r-1"}}))
    assert main(["import", str(file), "--db", str(tmp_path / "x.db")]) == 2
    assert "is not what `export --format json` writes: run.name: Field required" in capsys.readouterr().err
