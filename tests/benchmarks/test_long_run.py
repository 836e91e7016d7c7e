"""The long-run reader agrees with what `compare` recorded: per block and for the flatness check, the
billed tokens it sums from each call's transcript line are the per-iteration figures of results.json."""

import json
import statistics
import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import long_run

HPO_200 = ROOT / "benchmarks" / "results" / "hpo-200"


def test_the_flatness_check_is_the_mean_billed_cost_of_the_two_windows_that_compare_recorded(capsys):
    assert long_run.main([str(HPO_200), "--block", "50"]) == 0
    printed = capsys.readouterr().out
    runs = json.loads((HPO_200 / "results.json").read_text())["runs"]
    (stateful,) = [r for r in runs if r["mode"] == "stateful"]
    early, late = (
        statistics.fmean(
            row["billed_tokens"] for row in stateful["per_iteration"] if a <= row["iteration"] <= b
        )
        for a, b in long_run.FLAT
    )
    change = (late - early) / early
    line = next(ln for ln in printed.splitlines() if ln.startswith("stateful billed per iteration"))
    assert line.startswith(f"stateful billed per iteration: {early:,.1f} at 101-110, {late:,.1f} at 191-200")
    assert ("met" if abs(change) <= 0.10 else "missed") in line
    # One row per mode and block of 50 iterations, each mode's stop said.
    assert sum(1 for ln in printed.splitlines() if ln.startswith("| stateful | ")) == 1 + 4
    assert all(f"| {r['mode']} | {r['totals']['experiments']} |" in printed for r in runs)


def test_the_long_run_table_in_the_benchmarks_page_is_what_its_command_prints(capsys):
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    block = page.split("<!-- long-run-table -->\n")[1].split("<!-- /long-run-table -->")[0]
    folder = ROOT / "benchmarks" / "results" / "hpo-200-qwen2.5-coder-1.5b"
    assert long_run.main([str(folder / "stateless-strong-3532d1b"), str(folder / "stateful-3532d1b")]) == 0
    assert block == capsys.readouterr().out
