"""codeopt-records, the task folder shipped in the package: its inputs, its reference, the catalogue of
rewrites the scripted double plays, and its benchmark (the trusted [benchmark] harness), including the
attacks a candidate could try on the timer, the inputs and the correctness check."""

import gc
import json
import math
import time
from pathlib import Path
from statistics import median
from typing import Any

import codeopt_rewrites as rewrites
import pytest
from codeopt_rewrites import FOLDER, REFERENCE_SOURCE, codeopt_folder, load_reference, make_records

from autoresearch_mcp.contract.functions import functions_in
from autoresearch_mcp.contract.models import ScriptedPlan
from autoresearch_mcp.contract.profile import ProfileResult
from autoresearch_mcp.sandbox.runner import Limits
from autoresearch_mcp.server.tasks.base import ExecContext, NoParams, Outcome, Task
from autoresearch_mcp.server.tasks.folder.task import FolderTask
from autoresearch_mcp.server.tasks.outputs import first_difference
from autoresearch_mcp.server.tasks.registry import make_task

RECORDS, CALLS = 1500, 3
REFERENCE_AS_HELPER = REFERENCE_SOURCE.replace("def process_records(records):", "def _reference(records):")


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped folder at a test's size, in the shipped one's place."""
    return codeopt_folder(tmp_path_factory.mktemp("codeopt") / "codeopt-records", RECORDS, CALLS)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same at 200 records, for a test about what a version's output is judged to be, not its time:
    the reference's sort is quadratic, and its time beside each candidate is most of a benchmark's CPU."""
    return codeopt_folder(tmp_path_factory.mktemp("codeopt-tiny") / "codeopt-records", 200, CALLS)


def small_task(folder: Path) -> Task:
    return make_task("codeopt-records", {"task_dirs": [str(folder)]})


def benchmark(folder: Path, source: str, *, iteration: int = 1, **options: Any) -> Outcome:
    task = small_task(folder)
    ctx = ExecContext(run_id="r-test", seed=42, iteration=iteration, options={**task.options(), **options})
    return task.execute(NoParams(), source, ctx)


def load(source: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(source, "candidate.py", "exec"), namespace)
    return namespace["process_records"]


# -- data, reference and comparison rule ---------------------------------------------------------


def test_records_are_plain_json_and_the_same_for_the_same_seed() -> None:
    records = make_records(200, 7)
    assert records == make_records(200, 7) != make_records(200, 8)
    assert json.loads(json.dumps(records)) == records
    assert {type(r["active"]) for r in records} == {bool} and {type(r["rating"]) for r in records} == {float}


def test_the_reference_output_is_a_few_kilobytes_and_does_not_touch_its_input() -> None:
    records = make_records(10_000, 3)
    before = json.dumps(records)
    output = load_reference()(records)
    assert 2_000 < len(json.dumps(output)) < 8_000
    assert json.dumps(records) == before


def test_the_comparison_rule_tolerates_float_noise_but_not_type_or_value_changes() -> None:
    assert first_difference({"a": [1, 0.1 + 0.2]}, {"a": [1.0, 0.3]}) is None
    assert first_difference({"a": True}, {"a": 1}) == "output['a']: expected True, got 1"
    assert first_difference({"a": 1.0}, {"a": 1.001}) == "output['a']: expected 1.0, got 1.001"
    assert first_difference({"a": 1}, {"b": 1}) == "output: keys differ (missing ['a'], unexpected ['b'])"
    assert first_difference(["x"], ("x",)) == "output: expected a list, got ('x',)"


@pytest.mark.slow  # a measured CPU time: the default suite asserts no timing
def test_the_baseline_takes_tens_of_ms_of_cpu_on_10000_records() -> None:
    # Long enough to time above the noise, short enough for 20 timed calls per benchmark. CPU speed
    # differs between machines (70 ms here, 107 ms on a CI machine), so the bound leaves room for that.
    reference = load_reference()
    times = []
    for seed in range(3):
        records = make_records(10_000, seed)
        gc.collect()
        start = time.process_time()  # CPU time: other processes on the machine do not inflate it
        reference(records)
        times.append(time.process_time() - start)
    assert 0.01 <= min(times) <= 0.3


# -- the rewrite catalogue ------------------------------------------------------------------------


def test_every_cumulative_rewrite_compiles_and_matches_the_reference() -> None:
    task = make_task("codeopt-records", {})
    reference = load_reference()
    inputs = [make_records(n, seed) for n, seed in [(0, 1), (3, 2), (40, 3), (3000, 4)]]
    assert len(rewrites.REWRITES) >= 6
    for step in range(len(rewrites.REWRITES) + 1):
        source = rewrites.source_after(step)
        assert task.check_artifact(source) == [], f"step {step}"
        candidate = load(source)
        for records in inputs:
            assert first_difference(reference(records), candidate(records)) is None, f"step {step}"


def test_each_rewrite_changes_one_function_with_edits_found_once_or_a_whole_new_definition() -> None:
    for step, rewrite in enumerate(rewrites.REWRITES):
        source = rewrites.source_after(step)
        assert bool(rewrite.edits) != (rewrite.function is not None), f"step {step + 1}"
        for search, _ in rewrite.edits:
            assert source.count(search) == 1, f"step {step + 1}: {search[:60]!r}"
        changed = rewrites.changed_functions(source, rewrites.source_after(step + 1))
        assert len(changed) == 1, f"step {step + 1} changed {changed}"


def test_apply_edits_refuses_a_search_text_that_is_missing_or_repeated() -> None:
    with pytest.raises(ValueError, match="was not found"):
        rewrites.apply_edits("a = 1\n", [("b", "c")])
    with pytest.raises(ValueError, match="occurs 2 times"):
        rewrites.apply_edits("a = a\n", [("a", "b")])


def test_the_scripted_doubles_plan_shipped_in_the_folder_is_the_catalogue() -> None:
    shipped = ScriptedPlan.model_validate_json((FOLDER / "scripted.json").read_bytes())
    assert shipped == rewrites.plan() == make_task("codeopt-records", {}).scripted_plan()


def test_the_words_say_what_the_harness_checks_every_timed_output_against_the_originals() -> None:
    """No check on a small input runs at once after an edit: the benchmark checks each call's output."""
    profile = make_task("codeopt-records", {}).agent_profile()
    for words in (profile.system_prompt, profile.text_system_prompt, profile.how):
        assert "small input" not in words and "each output" in words and "against the original's" in words


def test_the_wrong_rewrite_loads_but_changes_the_output() -> None:
    source = rewrites.apply_edits(rewrites.source_after(2), rewrites.WRONG_REWRITE.edits)
    assert make_task("codeopt-records", {}).check_artifact(source) == []
    records = make_records(500, 1)
    assert first_difference(load_reference()(records), load(source)(records)) is not None


@pytest.mark.slow  # a timing on 10,000 records: on a loaded machine, a ratio near its bound
def test_the_last_rewrite_is_several_times_faster_than_the_reference() -> None:
    reference, fastest = load_reference(), load(rewrites.source_after(len(rewrites.REWRITES)))
    best: dict[str, float] = {"reference": 1e9, "fastest": 1e9}
    for seed in range(5):
        records = make_records(10_000, seed)
        for name, function in (("reference", reference), ("fastest", fastest)):
            start = time.perf_counter()
            function(records)
            best[name] = min(best[name], time.perf_counter() - start)
    assert best["reference"] / best["fastest"] > 2.5  # about 6.5 on an idle machine


# -- the task -----------------------------------------------------------------------------------


def test_the_task_is_the_shipped_folder_judged_by_its_benchmark() -> None:
    task = make_task("codeopt-records", {})
    assert isinstance(task, FolderTask) and task.judged_by == "benchmark"
    assert (task.metric, task.direction, task.experiment_tool) == ("speedup", "max", "run_benchmark")
    assert (
        task.title
        == "Speed up process_records(records), a slow summary of employee records, keeping its output"
    )
    assert task.initial_artifact() == REFERENCE_SOURCE and task.check_artifact(REFERENCE_SOURCE) == []
    assert task.editable() == ["train.py"]
    assert task.agent_profile().stateless.intro == "You are optimizing Python code for speed."


def test_a_copy_of_the_shipped_folder_given_as_a_task_folder_runs_in_its_place(small: Path) -> None:
    task = small_task(small)
    assert isinstance(task, FolderTask) and task.folder == small.resolve()
    assert make_task("codeopt-records", {}).folder != task.folder  # type: ignore[attr-defined]


def test_every_benchmark_times_the_reference_beside_the_candidate_and_keeps_no_baseline(small: Path) -> None:
    # Where the numbers come from and go; how much faster a rewrite is, is the slow set's to measure
    # (below, and in-process above) and benchmarks/noise_load.py's.
    first = benchmark(small, REFERENCE_SOURCE)
    assert first.status == "ok" and first.state_update == {}  # nothing carried to later benchmarks
    assert first.metrics["correct"] == 1.0 and first.metrics["inputs"] == 4
    assert first.metrics["speedup_low"] <= first.metric <= first.metrics["speedup_high"]
    assert len(first.samples) == 3  # the candidate's timed calls (after the warm-up)
    fastest = benchmark(small, rewrites.source_after(len(rewrites.REWRITES)), iteration=2)
    assert fastest.status == "ok" and fastest.metric == fastest.metrics["speedup"]
    assert fastest.metrics["speedup_low"] <= fastest.metric <= fastest.metrics["speedup_high"]
    # Its own reference, timed beside it in the same run, and the candidate's median call.
    assert fastest.metrics["baseline_ms"] > 0
    assert fastest.metrics["time_ms"] == pytest.approx(median(fastest.samples), abs=1e-4)
    if "cpu_ms" in fastest.metrics:  # the candidate cgroup's CPU time, recorded beside the wall time
        assert fastest.metrics["cpu_ms"] > 0 and fastest.metrics["baseline_cpu_ms"] > 0
        assert fastest.metrics["speedup_cpu"] > 0


@pytest.mark.slow  # a measured speedup: on a loaded machine, a ratio near its bound
def test_the_fastest_rewrite_benchmarks_faster_than_its_reference_in_wall_and_cpu_time(small: Path) -> None:
    fastest = benchmark(small, rewrites.source_after(len(rewrites.REWRITES)), iteration=2)
    assert fastest.status == "ok"
    assert fastest.metrics["baseline_ms"] > fastest.metrics["time_ms"]  # its own reference, timed beside it
    if "cpu_ms" in fastest.metrics:
        assert fastest.metrics["speedup_cpu"] > 1


def test_the_best_is_timed_beside_the_candidate_or_is_the_reference_itself(small: Path) -> None:
    fastest = rewrites.source_after(len(rewrites.REWRITES))
    task = small_task(small)
    for best_source in (REFERENCE_SOURCE, rewrites.source_after(2)):
        ctx = ExecContext(
            run_id="r-test",
            seed=42,
            iteration=3,
            options=task.options(),
            best_iteration=2,
            best_source=best_source,
        )
        outcome = task.execute(NoParams(), fastest, ctx)
        assert outcome.status == "ok" and outcome.metrics["vs_best_iteration"] == 2
        assert outcome.metrics["vs_best_low"] <= outcome.metrics["vs_best"] <= outcome.metrics["vs_best_high"]
        if best_source == REFERENCE_SOURCE:  # the same calls: vs_best is the speedup
            assert outcome.metrics["vs_best"] == outcome.metrics["speedup"]


def test_a_wrong_rewrite_fails_on_the_small_check_with_the_first_difference_and_its_input(
    small: Path,
) -> None:
    source = rewrites.apply_edits(rewrites.source_after(2), rewrites.WRONG_REWRITE.edits)
    outcome = benchmark(small, source)
    assert outcome.status == "incorrect" and outcome.metric is None and outcome.metrics == {"correct": 0.0}
    assert outcome.error_tail is not None
    assert outcome.error_tail.startswith(f"wrong output (call 1 of {CALLS + 1}, the inputs of seed ")
    assert "['top_earners'][0]['id']: expected" in outcome.error_tail


def test_a_version_right_on_the_small_check_but_wrong_on_the_benchmark_input_says_which_call(
    small: Path,
) -> None:
    source = REFERENCE_AS_HELPER + (
        "\n\ndef process_records(records):\n    out = _reference(records)\n"
        "    if len(records) > 1000:\n        out['total'] = -1\n    return out\n"
    )
    outcome = benchmark(small, source)
    assert outcome.status == "incorrect" and outcome.error_tail is not None
    assert outcome.error_tail.startswith(f"wrong output (call 1 of {CALLS + 1}, the inputs of seed ")
    assert "output['total']: expected 1500, got -1" in outcome.error_tail


def test_an_exception_in_the_candidate_is_a_crash_that_quotes_its_failing_line(small: Path) -> None:
    outcome = benchmark(small, "def process_records(records):\n    return records[0]['no such field']\n")
    assert outcome.status == "crash" and outcome.error_tail is not None
    headline = outcome.error_tail.splitlines()[0]
    assert headline == (
        "the function raised an exception at line 2 (process_records): return records[0]['no such field']:"
    )
    assert "KeyError: 'no such field'" in outcome.error_tail


def test_a_correct_version_comes_back_with_its_profile_hottest_function_first(small: Path) -> None:
    outcome = benchmark(small, REFERENCE_SOURCE)
    assert outcome.status == "ok" and outcome.profile is not None
    profile = outcome.profile
    names = [f.name for f in profile.functions]
    assert set(names) <= {f.name for f in functions_in(REFERENCE_SOURCE)}
    assert profile.hot == names[0] in {"department_stats", "count_people", "copy_records"}
    assert abs(sum(f.share for f in profile.functions) - 1) < 0.01
    assert profile.lines and all(line.share >= 0.05 for line in profile.lines)
    hot = next(f for f in profile.functions if f.name == profile.hot)
    source_lines = REFERENCE_SOURCE.splitlines()
    for line in profile.lines:
        assert hot.first_line <= line.line <= hot.last_line
        assert source_lines[line.line - 1].strip() == line.text


def reference_profile(where: Path) -> ProfileResult | None:
    task = small_task(codeopt_folder(where / "codeopt-records", 4 * RECORDS, CALLS))
    ctx = ExecContext(run_id="r-p", seed=1, iteration=1, options=task.options())
    return task.profile(NoParams(), REFERENCE_SOURCE, ctx)


def test_the_profile_of_the_reference_names_the_function_that_holds_its_bubble_sort(tmp_path: Path) -> None:
    profile = reference_profile(tmp_path)
    assert profile is not None and profile.hot == "department_stats"


@pytest.mark.slow  # which lines clear the 5% floor is measured: a loaded machine can starve one
def test_the_profile_of_the_reference_finds_its_bubble_sorts_line(tmp_path: Path) -> None:
    # the sort's inner loop or its comparison: which of them leads depends on the input drawn
    bubble_sort = {
        "for j in range(len(top) - 1 - i):",
        'if a["salary"] < b["salary"] or (a["salary"] == b["salary"] and a["id"] > b["id"]):',
    }
    seen = []
    for attempt in range(3):  # a profile is advice measured on a shared machine: one of three must find it
        profile = reference_profile(tmp_path / str(attempt))
        assert profile is not None
        seen.append((profile.hot, [line.text for line in profile.lines]))
        if any(line.text in bubble_sort for line in profile.lines):
            return
    pytest.fail(f"no profile named the bubble sort's lines: {seen}")


def test_a_version_that_crashes_has_no_profile(small: Path) -> None:
    source = "def process_records(records):\n    return records[0]['no such field']\n"
    task = small_task(small)
    ctx = ExecContext(run_id="r-p", seed=1, iteration=1, options=task.options())
    assert task.profile(NoParams(), source, ctx) is None


def test_a_source_that_fails_to_load_is_a_crash_that_says_so(small: Path) -> None:
    outcome = benchmark(small, "import no_such_module\n\n\ndef process_records(records):\n    return {}\n")
    assert outcome.status == "crash" and outcome.error_tail is not None
    assert "the version failed to load" in outcome.error_tail
    assert "No module named 'no_such_module'" in outcome.error_tail


def test_a_candidate_that_never_returns_times_out(small: Path) -> None:
    limits = Limits(wall_s=1.5, cpu_s=10, memory_mb=512).model_dump()
    outcome = benchmark(
        small, "def process_records(records):\n    while True:\n        pass\n", limits=limits
    )
    assert outcome.status == "timeout" and "wall-clock limit of 1.5 s" in (outcome.error_tail or "")


def test_deep_recursion_in_the_candidate_is_a_crash(small: Path) -> None:
    source = "def process_records(records):\n    return process_records(records)\n"
    outcome = benchmark(small, source)
    assert outcome.status == "crash" and "RecursionError" in (outcome.error_tail or "")


# -- attacks on the measurement: each fails on its own merits, even with the guard skipped --------


def test_returning_a_dict_subclass_is_refused(small: Path) -> None:
    source = REFERENCE_AS_HELPER + (
        "\n\nclass Result(dict):\n    pass\n\n\ndef process_records(records):\n    return Result(_reference(records))\n"
    )
    outcome = benchmark(small, source)
    assert outcome.status == "crash" and (outcome.error_tail or "").endswith(
        "output is a Result; return only dict, list, str, int, float, bool and None"
    )


def test_the_stdlibs_dict_subclasses_count_as_dicts_but_a_subclass_of_them_does_not(tiny: Path) -> None:
    """defaultdict is what a faster version naturally returns; it changes nothing about the items."""
    for make in (
        "collections.defaultdict(int, out)",
        "collections.OrderedDict(out)",
        "collections.Counter(out)",
    ):
        source = REFERENCE_AS_HELPER + (
            "\n\nimport collections\n\n\ndef process_records(records):\n"
            f"    out = _reference(records)\n    return {make}\n"
        )
        outcome = benchmark(tiny, source)
        assert outcome.status == "ok", (make, outcome.error_tail)
    subclass = REFERENCE_AS_HELPER + (
        "\n\nimport collections\n\n\nclass Result(collections.defaultdict):\n    pass\n\n\n"
        "def process_records(records):\n    return Result(int, _reference(records))\n"
    )
    outcome = benchmark(tiny, subclass)
    assert outcome.status == "crash" and "output is a Result" in (outcome.error_tail or "")


def test_returning_a_lazy_object_that_equals_anything_is_refused(small: Path) -> None:
    source = (
        "class Anything:\n    def __eq__(self, other):\n        return True\n\n\n"
        "def process_records(records):\n    return {'total': Anything()}\n"
    )
    outcome = benchmark(small, source)
    assert outcome.status == "crash" and "output['total'] is a Anything" in (outcome.error_tail or "")


def test_caching_the_first_answer_across_calls_gains_nothing_because_every_call_starts_fresh(
    small: Path,
) -> None:
    # Each call runs in a fresh fork of the harness: the cache is empty every time, so the candidate
    # computes (correctly) on every call, and nothing it kept can be handed to a later call.
    source = REFERENCE_AS_HELPER + (
        "\n\n_cache = []\n\n\ndef process_records(records):\n"
        "    if not _cache:\n        _cache.append(_reference(records))\n    return _cache[0]\n"
    )
    outcome = benchmark(small, source)
    assert outcome.status == "ok" and outcome.metrics["correct"] == 1.0


def test_special_casing_a_known_benchmark_input_is_incorrect(small: Path) -> None:
    # The exact answer for the input a candidate might expect (the run seed), returned instantly.
    known = repr(load_reference()(make_records(RECORDS, 42)))
    source = f"ANSWER = {known}\n\n\ndef process_records(records):\n    return ANSWER\n"
    outcome = benchmark(small, source)
    assert outcome.status == "incorrect" and "call 1 of" in (outcome.error_tail or "")


def test_mutating_the_input_to_make_the_work_trivial_is_incorrect(small: Path) -> None:
    source = REFERENCE_AS_HELPER + (
        "\n\ndef process_records(records):\n    del records[1:]\n    return _reference(records)\n"
    )
    outcome = benchmark(small, source)
    assert outcome.status == "incorrect" and f"output['total']: expected {RECORDS}, got 1" in (
        outcome.error_tail or ""
    )


def test_patching_the_clock_through_a_python_escape_changes_nothing(small: Path) -> None:
    """The 38x payload's Python part: with no guard at all, a version reaches the real `sys` through a
    standard-library class and patches every clock it can find. Its calls are timed by the harness, in
    another process, from the input's stamp to the arrival of the output: nothing it patches moves that."""
    escape = (
        "def _module(name):\n"
        "    for kind in ().__class__.__base__.__subclasses__():\n"
        "        if kind.__name__ == '_wrap_close':\n"
        "            return kind.__init__.__globals__['sys'].modules[name]\n\n\n"
        "_module('time').perf_counter = lambda: 0.0\n"
        "_module('time').monotonic = lambda: 0.0\n"
        "_module('autoresearch_mcp.sandbox.isolate').clock = lambda: 0.0\n"
        "assert _module('time').perf_counter() == 0.0  # the patch took: the escape works\n\n\n"
    )
    outcome = benchmark(small, escape + REFERENCE_SOURCE)
    # A patched clock would read 0 ms for every call (a speedup of infinity); each call takes longer, and
    # the unchanged reference is no surer than the original.
    assert outcome.status == "ok" and min(outcome.samples) > 0 and math.isfinite(outcome.metric or math.inf)
    # Whether the unchanged reference then reads "surely faster" than itself is timing noise (a fresh
    # clone's CI once read 1.196x [1.115, 1.449]): the slow set's measured checks judge that, not this.
