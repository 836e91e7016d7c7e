"""benchmarks/batch.py's table: what a real model's batch half alone reads like, and the kept files."""

import gzip
import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import batch


def _row(setup: str, seed: int, refused: int) -> batch.Measured:
    return batch.Measured(
        setup=setup, seed=seed, experiments=16, calls=5, billed=1600, wall_s=320.0, best=0.75,
        proposed=16 + refused, refused=refused,
    )  # fmt: skip


def test_the_batch_half_alone_names_the_model_flags_and_counts_refusals_per_item() -> None:
    run_args = ["--llm", "openai", "--temperature", "1.0"]
    table = batch.table(
        [_row("batch", 42, 2), _row("batch", 123, 0)], 16, "hpo-covertype", [42, 123], run_args
    )
    assert "`run --llm openai --temperature 1.0`" in table and "Scripted double" not in table
    assert "| batch | `--batch 4 --workers 2` | 32 | 10 | 2/34 | 100 | 20.00 | 0.7500 (0.0000) |" in table
    assert "sequential" not in table and "Batch against sequential" not in table  # no half to compare
    assert "| batch | 123 | 16 | 5 | 16 | 0 | 1600 | 320 | 0.7500 |" in table


def test_the_scripted_table_compares_the_two_halves() -> None:
    table = batch.table([_row("sequential", 42, 0), _row("batch", 42, 0)], 16, "hpo-covertype", [42], [])
    assert table.startswith("# A batch per turn") and "Scripted double" in table
    assert "billed tokens per experiment 100%, wall per experiment 100%" in table


def test_kept_transcripts_are_gzipped_in_place(tmp_path: Path) -> None:
    (tmp_path / "batch-42.jsonl").write_text('{"billed": {"input": 1, "output": 2}}\n')
    batch.gzip_transcripts(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch-42.jsonl.gz"]
    assert gzip.decompress((tmp_path / "batch-42.jsonl.gz").read_bytes()).startswith(b'{"billed"')


def test_the_real_model_batch_tables_in_the_benchmarks_page_are_the_committed_ones() -> None:
    committed = ROOT / "benchmarks" / "results" / "hpo-16-batch4-qwen2.5-coder-1.5b" / "batch-3cf83aa"
    rows = [
        line for line in (committed / "table.md").read_text().splitlines() if line.startswith("| batch |")
    ]
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(rows) == 4 and all(row in page for row in rows)  # the whole and one row a seed
    assert sorted(p.name for p in committed.glob("*.jsonl.gz")) == [
        f"batch-{s}.jsonl.gz" for s in (123, 42, 456)
    ]


def test_the_scripted_batch_tables_in_the_benchmarks_page_are_the_committed_ones() -> None:
    committed = (ROOT / "benchmarks" / "batch.md").read_text()
    rows = [line for line in committed.splitlines() if line.startswith(("| sequential |", "| batch |"))]
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert len(rows) == 8 and all(row in page for row in rows)  # two setups, then three seeds of each
    assert "Batch against sequential: billed tokens per experiment 39%, wall per experiment 71%." in committed
