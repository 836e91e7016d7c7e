"""The real-model table leads with what the provider billed, read from results.json where `compare`
recorded it and, for folders written before it did, from each call's reported usage in the transcripts."""

import re
import sys

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
