"""The real-model table leads with what the provider billed, read from results.json where `compare`
recorded it and, for folders written before it did, from each call's reported usage in the transcripts."""

import gzip
import json
import re
import sys
from pathlib import Path

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import real_model_table

from autoresearch_mcp.contract.transcript import load_transcript, totals

SEED_42 = ROOT / "benchmarks" / "results" / "hpo-15-qwen2.5-coder-1.5b" / "seed-42"


def test_a_folder_without_billed_totals_is_billed_from_the_providers_usage_in_its_transcripts():
    table = real_model_table.table([SEED_42])
    header = next(line for line in table.splitlines() if line.startswith("| mode | seed |"))
    assert header.split(" | ")[6] == "billed"
    for mode in ("stateless", "stateful"):
        records = load_transcript(SEED_42 / "transcripts" / f"{mode}-42.jsonl.gz")
        spent = totals(records)
        assert spent.billed_source == "provider"  # llama.cpp reported every call's usage
        (row,) = [line for line in table.splitlines() if line.startswith(f"| {mode} | 42 |")]
        assert row.split(" | ")[6] == f"{spent.billed:,.0f}"
        assert spent.billed != spent.full  # Qwen's tokenizer and chat template, not cl100k_base


def test_the_billed_table_in_the_benchmarks_page_is_what_its_command_prints_from_the_committed_runs():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    block = page.split("<!-- billed-hpo-table -->\n")[1].split("<!-- /billed-hpo-table -->")[0]
    before = page.split("<!-- billed-hpo-table -->")[0]
    command = [line for line in before.splitlines() if "real_model_table.py" in line][-1]
    # `.../billed/{a,b}/seed-*`: the folders the page names, expanded as the shell would.
    prefix, names = re.fullmatch(r".*?(\S+/)\{([^}]+)\}/seed-\*", command.strip()).groups()
    folders = [p for name in names.split(",") for p in sorted((ROOT / prefix / name).glob("seed-*"))]
    assert len(folders) == 6
    assert block == real_model_table.table(folders) + "\n"


def test_a_study_with_the_optimisers_line_says_how_often_the_model_took_it(tmp_path: Path) -> None:
    counted = {"refusals": {}, "best_metric": 0.75, "billed_tokens": 100.0}
    for measure in ("experiments", "llm_calls", "context_tokens", "symmetric_tokens", "full_tokens"):
        counted[measure] = 3.0
    counted |= {"output_tokens": 1.0, "wall_s": 1.0}
    runs = [{"mode": "stateful", "seed": seed, "totals": counted, "stop_reason": "budget"} for seed in (1, 2)]
    study = {"task": "bowl", "iterations": 3, "llm": "openai", "suggest": "tpe", "runs": runs}
    (tmp_path / "results.json").write_text(json.dumps(study))
    (tmp_path / "transcripts").mkdir()
    for seed, said in ((1, ["took", "changed"]), (2, ["took", "ignored", None])):
        calls = [{"suggestion": s} if s else {} for s in said]
        text = "".join(json.dumps({"call": n, **call}) + "\n" for n, call in enumerate(calls, 1))
        (tmp_path / "transcripts" / f"stateful-{seed}.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    last = real_model_table.table([tmp_path]).splitlines()[-1]
    assert last == "The optimiser's suggestion, over 4 turns that offered one: took 2, changed 1, ignored 1."


ISSUE_48_STUDIES = [
    "hpo-15-qwen2.5-coder-1.5b/suggest-tpe/stateful-2591170",
    "digits-hgb-15-qwen2.5-coder-1.5b/suggest-tpe/*-2591170",
    "cancer-rf-15-qwen2.5-coder-1.5b/suggest-tpe/*-2591170",
    "cancer-rf-15-qwen2.5-coder-1.5b/plain/stateful-c7bf007",
]


def test_the_issue_48_tables_in_the_benchmarks_page_are_what_the_command_prints_from_the_committed_runs():
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    results = ROOT / "benchmarks" / "results"
    for study in ISSUE_48_STUDIES:
        folders = sorted(results.glob(f"{study}/seed-*"))
        assert len(folders) in (3, 6), study  # three seeds, of one mode or two
        printed = real_model_table.table(folders)
        rows = [
            line for line in printed.splitlines() if line.startswith(("| stateful |", "| stateless-strong |"))
        ]
        uptake = [line for line in printed.splitlines() if line.startswith("The optimiser's suggestion")]
        assert rows and all(row in page for row in rows + uptake), study
