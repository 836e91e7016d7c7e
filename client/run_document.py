"""A run as one document (contract.transfer.RunDocument), read through MCP: what `export --format json`
writes and `autoresearch-mcp import` reads back.

The experiments come from get_experiment_history; the train.py versions and notes from query_results'
views (v_artifacts, v_notes), which cap a cell at 20,000 characters, so a longer train.py is read in
slices of that size and joined.
"""

import hashlib
import math
import re

from autoresearch_mcp.client.connect import ResearchClient
from autoresearch_mcp.contract.arguments import QueryResultsArgs
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import ArtifactVersion, Experiment, Note, Run
from autoresearch_mcp.contract.transfer import RunDocument

RUN_ID = re.compile(r"^r-[0-9a-f]{10}$")  # what start_run makes: safe to write into a query
SLICE = 20_000  # query_results' cell cap
SLICES_PER_QUERY = 12  # and its 500,000 characters per answer
ROWS = 1000  # query_results' row cap


async def run_document(rc: ResearchClient, run: Run, experiments: list[Experiment]) -> RunDocument:
    if not RUN_ID.match(run.id):
        raise ResearchError(f"cannot export run {run.id!r}: not a run id start_run makes")
    return RunDocument(
        run=run,
        experiments=experiments,
        train_py=await train_py_versions(rc, run.id),
        notes=await notes(rc, run.id),
    )


async def _rows(rc: ResearchClient, sql: str) -> list[list[object]]:
    """Every row of `sql` (which must end with ORDER BY ...), a thousand at a time."""
    rows: list[list[object]] = []
    while True:
        page = f"{sql} LIMIT {ROWS} OFFSET {len(rows)}"
        result = await rc.result(QueryResultsArgs(sql=page, max_rows=ROWS))
        rows += result.rows
        if len(result.rows) < ROWS:
            return rows


async def train_py_versions(rc: ResearchClient, run_id: str) -> list[ArtifactVersion]:
    heads = await _rows(
        rc,
        "SELECT version, parent_version, description, sha256, length(source), created_at FROM v_artifacts"
        f" WHERE run_id = '{run_id}' ORDER BY version",
    )
    versions = []
    for version, parent, description, digest, chars, created in heads:
        parts: list[str] = []
        starts = [1 + i * SLICE for i in range(math.ceil(int(str(chars)) / SLICE))]
        for i in range(0, len(starts), SLICES_PER_QUERY):
            columns = ", ".join(f"substr(source, {s}, {SLICE})" for s in starts[i : i + SLICES_PER_QUERY])
            sql = f"SELECT {columns} FROM v_artifacts WHERE run_id = '{run_id}' AND version = {int(str(version))}"
            result = await rc.result(QueryResultsArgs(sql=sql, max_rows=1))
            parts += [str(cell) for cell in result.rows[0]]
        source = "".join(parts)
        if hashlib.sha256(source.encode()).hexdigest() != digest:
            raise ResearchError(f"train.py v{version} of {run_id} did not read back whole; nothing written")
        fields = {"version": version, "parent_version": parent, "description": description}
        versions.append(
            ArtifactVersion.model_validate(
                {**fields, "run_id": run_id, "source": source, "sha256": digest, "created_at": created}
            )
        )
    return versions


async def notes(rc: ResearchClient, run_id: str) -> list[Note]:
    rows = await _rows(
        rc, f"SELECT note_id, kind, text, created_at FROM v_notes WHERE run_id = '{run_id}' ORDER BY note_id"
    )
    return [
        Note.model_validate(
            {"id": note_id, "run_id": run_id, "kind": kind, "text": text, "created_at": created}
        )
        for note_id, kind, text, created in rows
    ]
