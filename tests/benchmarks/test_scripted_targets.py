"""CI's quick check of the per-turn token shape: it compares a rerun with the committed runs of seed 42
iteration by iteration, and a change anywhere in the shape is a difference it names."""

import copy
import json
import sys
from typing import Any

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import scripted_targets

COMMITTED = json.loads((ROOT / "benchmarks" / "results" / "hpo-15" / "results.json").read_text())


def rows(results: dict[str, Any], mode: str = "stateful") -> list[dict[str, Any]]:
    return scripted_targets._per_iteration(results, mode, 42, 15)


def test_the_committed_runs_of_seed_42_match_themselves():
    assert scripted_targets._row_differences("hpo-15", rows(COMMITTED), rows(COMMITTED), True, 0.02) == []


@pytest.mark.parametrize("iteration", [1, 8, 15])
def test_a_few_more_tokens_per_turn_from_any_iteration_on_are_a_difference_named_by_where_they_start(
    iteration: int,
):
    fresh = copy.deepcopy(rows(COMMITTED))
    for row in fresh[iteration - 1 :]:
        row["context_tokens"] += 40  # one more line in the summary
    (found,) = scripted_targets._row_differences("hpo-15", fresh, rows(COMMITTED), True, 0.02)
    assert f"context_tokens at iteration {iteration}:" in found


def test_a_different_best_f1_or_a_missing_iteration_is_a_difference():
    fresh = copy.deepcopy(rows(COMMITTED))
    fresh[-1]["best_metric"] += 0.01
    assert "best_metric" in scripted_targets._row_differences("s", fresh, rows(COMMITTED), True, 0.02)[0]
    assert (
        "14 iterations" in scripted_targets._row_differences("s", fresh[:-1], rows(COMMITTED), True, 0.02)[0]
    )


def test_a_code_turns_profile_lines_and_quoted_functions_are_left_out_of_both_sides_and_the_rest_still_compared() -> (
    None
):
    """The profile's measured lines move with the load, and so does the function it makes hottest (the
    turn quotes that one); what else a code turn sends must still match."""
    folder = ROOT / "benchmarks" / "results" / "codeopt-40"
    results = json.loads((folder / "results.json").read_text())
    whole = scripted_targets._per_iteration(results, "stateful", 42, 8)
    trimmed = copy.deepcopy(whole)
    scripted_targets._without_measured_parts(trimmed, folder / "transcripts" / "stateful-42.jsonl.gz")
    removed = [w["context_tokens"] - t["context_tokens"] for w, t in zip(whole, trimmed, strict=True)]
    assert all(0 < r < 1500 for r in removed)
    assert max(removed) > 300  # a quoted function (department_stats: ~500 tokens), not just two lines
    assert all(w["output_tokens"] == t["output_tokens"] for w, t in zip(whole, trimmed, strict=True))
    moved = copy.deepcopy(trimmed)
    moved[3]["context_tokens"] += 40  # a line more in what is not the profile
    assert scripted_targets._row_differences("codeopt", moved, trimmed, False, 0.02)
