"""A task folder (a user's script + autoresearch.toml) through MCP: registered by the operator, started
by name, run in the sandbox as it is, scored by the metric line it prints; the folder is never written."""

import json
import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.contract.errors import REFUSAL_META, ResearchError
from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.tasks.folder.child import TRACED_EVENTS, booted
from autoresearch_mcp.server.tasks.folder.spec import load_folder
from autoresearch_mcp.server.tasks.folder.task import folder_task_class, parse_metrics
from autoresearch_mcp.server.tasks.profiles import exception_line, failing_line
from folder_fixture import folder_files, make_folder


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return make_folder(tmp_path / "outside-the-repository")


@asynccontextmanager
async def connected(settings: ServerSettings, *folders: Path):
    settings = settings.model_copy(update={"task_dirs": [str(f) for f in folders]})
    with Research(settings) as research:  # closed: its job workers stop
        async with Client(build_server(research), raise_exceptions=True) as client:
            yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def refusal(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return (result.meta or {}).get(REFUSAL_META) or {"kind": None, "message": result.content[0].text}


@pytest.mark.asyncio
async def test_a_folder_task_runs_the_script_and_records_its_metric_and_secondary_lines(settings, folder):
    before = folder_files(folder)
    async with connected(settings, folder) as client:
        answer = await client.call_tool("start_run", {"task": "bowl", "budget": 4})
        started = answer.structured_content
        run_id = started["run_id"]
        # a categorical param's choices in the words a model reads
        assert "shape (one of bowl|crash, default bowl)" in answer.content[0].text
        assert started["metric"] == "loss" and "lower loss is better" in started["summary"]
        result = await call(client, "run_experiment", {"run_id": run_id, "params": {"x": 0.3}})
        exp = result["experiment"]
        assert exp["status"] == "ok" and exp["metric"] == pytest.approx(2 * 0.2**2)
        assert exp["metrics"] == {"loss": exp["metric"], "steps": 3.0}
        assert exp["params"] == {"x": 0.3, "y": 0.0, "shape": "bowl"}  # defaults filled in
        summary = (await call(client, "get_run_summary", {"run_id": run_id}))["summary"]
        assert "Best loss=0.08 (#1; steps 3)" in summary  # with its secondary metric
    assert folder_files(folder) == before  # scratch.txt went to the experiment's own directory


@pytest.mark.asyncio
async def test_out_of_range_unknown_and_repeated_params_are_refused_without_cost(settings, folder):
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 3}))["run_id"]
        out = await refusal(client, "run_experiment", {"run_id": run_id, "params": {"x": 5}})
        assert out["kind"] == "invalid_params" and "less than or equal to 1" in out["message"]
        unknown = await refusal(client, "run_experiment", {"run_id": run_id, "params": {"lr": 0.1}})
        assert unknown["kind"] == "invalid_params" and "unknown parameter 'lr'" in unknown["message"]
        bad_choice = await refusal(client, "run_experiment", {"run_id": run_id, "params": {"shape": "cone"}})
        assert bad_choice["kind"] == "invalid_params"
        await call(client, "run_experiment", {"run_id": run_id, "params": {"x": 0.1}})
        again = await refusal(client, "run_experiment", {"run_id": run_id, "params": {"x": 0.1, "y": 0.0}})
        assert again["kind"] == "exact_repeat"
        history = await call(client, "get_experiment_history", {"run_id": run_id})
    assert history["total"] == 1


@pytest.mark.asyncio
async def test_a_failing_script_is_a_crash_with_its_stderr_tail_and_no_absolute_path(settings, folder):
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 3}))["run_id"]
        crashed = await call(client, "run_experiment", {"run_id": run_id, "params": {"shape": "crash"}})
    exp = crashed["experiment"]
    assert exp["status"] == "crash" and "exited with status 1" in exp["error_tail"]
    assert "the shape 'crash' always fails" in exp["error_tail"]
    assert str(folder) not in exp["error_tail"] and "/tmp/" not in exp["error_tail"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("print('loss: nan')", "not a finite number"),
        ("print('accuracy: 0.9')", "printed no `loss: <number>` line"),
    ],
)
async def test_no_usable_metric_line_is_a_crash_that_says_so(settings, tmp_path, body: str, expected: str):
    folder = make_folder(tmp_path, script=body + "\n")
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 1}))["run_id"]
        exp = (await call(client, "run_experiment", {"run_id": run_id, "params": {}}))["experiment"]
    assert exp["status"] == "crash" and expected in exp["error_tail"]


@pytest.mark.asyncio
async def test_a_script_past_its_timeout_is_a_timeout(settings, tmp_path):
    folder = make_folder(tmp_path, script="import time\ntime.sleep(30)\n", timeout=1)
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 1}))["run_id"]
        exp = (await call(client, "run_experiment", {"run_id": run_id, "params": {}}))["experiment"]
    assert exp["status"] == "timeout" and "timeout_s of 1 s" in exp["error_tail"]


@pytest.mark.asyncio
async def test_a_script_cannot_write_into_the_users_folder(settings, tmp_path):
    # params work without [evaluate] edits nothing (its script prints the metric), so the folder's own
    # script is the hostile one here: the sandbox, not the edit refusal, keeps the folder as it was
    target = tmp_path / "bowl" / "data" / "weight.txt"
    hostile = (
        "import os\n"
        f"target = {str(target)!r}\n"
        "for path in (target, 'data/weight.txt', os.path.realpath('train.py')):\n"
        "    try:\n"
        "        open(path, 'w').write('0')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', type(exc).__name__)\n"
        "print('loss: 1')\n"
    )
    folder = make_folder(tmp_path, script=hostile)
    before = folder_files(folder)
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 3}))["run_id"]
        exp = (await call(client, "run_experiment", {"run_id": run_id, "params": {}}))["experiment"]
    assert exp["status"] == "ok"
    assert folder_files(folder) == before


@pytest.mark.asyncio
async def test_a_model_names_tasks_never_paths(settings, folder):
    async with connected(settings, folder) as client:
        result = await client.call_tool("start_run", {"task": str(folder)})
        tasks = json.loads((await client.read_resource("autoresearch://tasks")).contents[0].text)
    assert result.is_error and "bowl" in result.content[0].text
    assert "bowl" in [task["name"] for task in tasks["tasks"]]


@pytest.mark.asyncio
async def test_in_code_work_the_agent_edits_the_declared_file_and_reverts_it(settings, tmp_path):
    folder = make_folder(tmp_path, extra='work = "code"')
    async with connected(settings, folder) as client:
        started = await call(client, "start_run", {"task": "bowl", "budget": 3})
        run_id = started["run_id"]
        assert started["experiment_tool"] == "run_benchmark"
        first = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
        edits = [{"search": "float(weight) *", "replace": "0.5 * float(weight) *"}]
        await call(client, "modify_train_py", {"run_id": run_id, "description": "halve", "edits": edits})
        second = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
        broken = await refusal(
            client, "modify_train_py", {"run_id": run_id, "description": "x", "source": "def (:\n"}
        )
        reverted = await call(client, "revert_train_py", {"run_id": run_id, "version": 1})
    assert second["metric"] == pytest.approx(first["metric"] / 2) and second["artifact_version"] == 2
    assert broken["kind"] == "rejected_edit" and "train.py line 1" in broken["message"]
    assert reverted["version"] == 3


def test_each_mistake_in_autoresearch_toml_is_one_message_naming_the_key(tmp_path):
    cases = {
        'direction = "down"': "task.direction",
        "timeout_s = -1": "task.timeout_s",
        'name = "Has Space"': "task.name",
    }
    for line, key in cases.items():
        folder = make_folder(tmp_path / key.replace(".", "-") / line[:4])
        toml = folder / "autoresearch.toml"
        field = line.split(" = ")[0]
        text = "\n".join(
            line if row.startswith(field + " ") else row for row in toml.read_text().splitlines()
        )
        toml.write_text(text)
        with pytest.raises(ResearchError, match=key.replace(".", r"\.")) as error:
            load_folder(folder)
        assert "\n" not in str(error.value) and "autoresearch.toml" in str(error.value)


def test_a_float_param_without_a_range_or_with_a_default_outside_it_is_refused(tmp_path):
    folder = make_folder(tmp_path)
    toml = folder / "autoresearch.toml"
    toml.write_text(toml.read_text().replace("default = 0.0\ndescription", "default = 3.0\ndescription"))
    with pytest.raises(ResearchError, match="outside"):
        load_folder(folder)


def test_the_last_metric_line_counts_and_other_number_lines_are_secondary():
    out = "epoch 1\nloss: 0.9\nval_acc = 0.5\nloss: 0.4\nnote: fine\nlr: 1e-3\n"
    metric, secondary, problem = parse_metrics(out, "loss")
    assert (metric, secondary, problem) == (0.4, {"val_acc": 0.5, "lr": 0.001}, None)


@pytest.mark.asyncio
async def test_jobs_from_run_reeval_and_query_results_work_for_a_folder_task(settings, folder):
    async with connected(settings, folder) as client:
        first = (await call(client, "start_run", {"task": "bowl", "budget": 4, "reeval_seeds": 1}))["run_id"]
        job = await call(client, "submit_training_job", {"run_id": first, "params": {"x": 0.2}})
        done = await call(client, "get_job", {"job_id": job["job"]["id"], "wait_seconds": 60})
        assert done["job"]["status"] == "done" and done["result"]["experiment"]["status"] == "ok"
        # a job takes the same route: its would-be best was re-evaluated before it was kept
        history = await call(client, "get_experiment_history", {"run_id": first})
        assert [e["note"] for e in history["experiments"]] == [None, "re-evaluation 1/1 of #1 (seed 43)"]
        assert done["result"]["is_new_best"] and done["result"]["best"]["mean"] is not None
        # run_experiment re-evaluates a would-be best on one more seed (each its own experiment)
        result = await call(client, "run_experiment", {"run_id": first, "params": {"x": 0.3, "y": -0.2}})
        assert len(result["reevaluations"]) == 1 and result["is_new_best"]
        await call(client, "finish_run", {"run_id": first, "reason": "enough"})
        later = await call(client, "start_run", {"task": "bowl", "budget": 2, "from_run": first})
        remeasured = await call(client, "get_experiment_history", {"run_id": later["run_id"]})
        rows = await call(
            client,
            "query_results",
            {"sql": "SELECT task, COUNT(*) FROM v_experiments GROUP BY task"},
        )
    assert remeasured["experiments"][0]["params"] == {"x": 0.3, "y": -0.2, "shape": "bowl"}
    assert remeasured["experiments"][0]["metric"] == pytest.approx(0.0)
    # the job and the experiment, each with its re-evaluation, and the re-measure
    assert rows["rows"] == [["bowl", 5]]


@pytest.mark.asyncio
async def test_a_script_that_does_not_declare_processes_cannot_start_one_and_one_that_does_can(
    settings, tmp_path
):
    script = (
        "import subprocess\n"
        "try:\n"
        "    subprocess.run(['true'], check=True)\n"
        "    print('started: 1')\n"
        "except OSError as exc:\n"
        "    print('started: 0')\n"
        "print('loss: 1')\n"
    )
    quiet = make_folder(tmp_path / "a", name="quiet", script=script)
    loud = make_folder(tmp_path / "b", name="loud", script=script, extra="processes = true")
    async with connected(settings, quiet, loud) as client:
        started = {}
        for name in ("quiet", "loud"):
            run_id = (await call(client, "start_run", {"task": name, "budget": 1}))["run_id"]
            exp = (await call(client, "run_experiment", {"run_id": run_id, "params": {}}))["experiment"]
            started[name] = exp["metrics"]["started"]
    assert started == {"quiet": 0.0, "loud": 1.0}


def test_a_command_that_is_not_python_must_declare_processes(tmp_path):
    folder = make_folder(tmp_path)
    toml = folder / "autoresearch.toml"
    toml.write_text(
        toml.read_text().replace('command = ["python", "train.py"]', 'command = ["bash", "run.sh"]')
    )
    with pytest.raises(ResearchError, match="declare `processes = true`"):
        load_folder(folder)
    toml.write_text(toml.read_text().replace("timeout_s =", "processes = true\ntimeout_s ="))
    assert load_folder(folder).spec.task.processes


PROFILED_SCRIPT = """\
import json
import os


def slow_sum(n):
    total = 0
    for i in range(n):
        total += sum(range(i % 100))
    return total


def quick_scale(value):
    return value / 1000.0


params = json.loads(os.environ["AUTORESEARCH_PARAMS"])
print(f"loss: {quick_scale(slow_sum(100_000)) + params['x'] ** 2:.6f}")
"""


@pytest.mark.asyncio
async def test_a_text_already_profiled_in_the_run_is_not_profiled_again_and_its_profile_still_comes_back(
    settings, tmp_path
):
    """Only new text is worth a second run under the profiler: other params on the same files return
    the profile on record, to the last digit (a measured one never repeats its timings exactly)."""
    folder = make_folder(tmp_path, script=PROFILED_SCRIPT, extra='work = "code"')
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 3}))["run_id"]
        first = await call(client, "run_experiment", {"run_id": run_id, "params": {"x": 0.1}})
        second = await call(client, "run_experiment", {"run_id": run_id, "params": {"x": 0.2}})
    assert first["experiment"]["status"] == second["experiment"]["status"] == "ok"
    assert first["profile"] is not None and second["profile"] == first["profile"]


@pytest.mark.asyncio
async def test_profile_false_runs_a_code_task_once_per_experiment_and_returns_no_profile(settings, tmp_path):
    folder = make_folder(tmp_path, script=PROFILED_SCRIPT, extra='work = "code"\nprofile = false')
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 2}))["run_id"]
        first = await call(client, "run_benchmark", {"run_id": run_id})
        asked = await call(client, "profile_train_py", {"run_id": run_id})
    assert first["experiment"]["status"] == "ok" and first["profile"] is None
    assert asked["profile"] is None and asked["note"]


def test_a_profiled_run_of_a_script_traces_a_bounded_number_of_lines_and_samples_the_rest(tmp_path):
    """A script that loops in Python for millions of lines is traced for its first TRACED_EVENTS line
    events only (then it runs at full speed), while the sampler still sees the whole run."""
    script = tmp_path / "loop.py"
    script.write_text(
        "def spin(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n\nspin(2_000_000)\n"
    )
    out = tmp_path / "profile.json"
    command = booted([sys.executable, str(script)], sys.executable, deny=False, profile=True)
    spec = {"files": [str(script)], "out": str(out), "max_events": TRACED_EVENTS}
    env = {**os.environ, "AUTORESEARCH_PROFILE": json.dumps(spec)}
    subprocess.run(command, env=env, cwd=tmp_path, check=True, timeout=60)
    found = json.loads(out.read_text())
    assert TRACED_EVENTS <= sum(hits for _, _, _, hits in found["traced"]) <= TRACED_EVENTS + 10
    assert sum(seconds for _, _, seconds, _ in found["sampled"]) > 0


@pytest.mark.asyncio
async def test_in_code_work_the_script_is_profiled_and_one_function_taken_back_as_in_codeopt(
    settings, tmp_path
):
    """The same mechanism as codeopt-records: the folder's own command is profiled, the hottest function
    named with its slowest lines; replace_function changes that function alone; a crash names its line."""
    folder = make_folder(tmp_path, script=PROFILED_SCRIPT, extra='work = "code"')
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 3}))["run_id"]
        first = await call(client, "run_benchmark", {"run_id": run_id})
        broken = "def slow_sum(n):\n    return [0][n]\n"
        await call(client, "replace_function", {"run_id": run_id, "name": "slow_sum", "source": broken})
        crashed = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
        current = await client.call_tool("get_current_train_py", {"run_id": run_id})
    profile = first["profile"]
    assert first["experiment"]["status"] == "ok" and profile["hot"] == "slow_sum"
    assert profile["functions"][0]["name"] == "slow_sum" and profile["functions"][0]["share"] > 0.5
    # The loop's body does more than the tracer does per line: a cheaper line (`total += i % 7`) came
    # out at 0% once the tracer's calibrated cost was taken off, on a loaded machine.
    assert "total += sum(range(i % 100))" in {line["text"] for line in profile["lines"]}
    assert crashed["status"] == "crash"
    headline = crashed["error_tail"].splitlines()[0]
    assert headline.endswith("at line 6 (slow_sum): return [0][n]: IndexError: list index out of range")
    assert current.content[0].text.split("\n", 1)[1] == PROFILED_SCRIPT.replace(
        "    total = 0\n    for i in range(n):\n        total += sum(range(i % 100))\n    return total\n",
        "    return [0][n]\n",
    )


def test_a_crash_headline_names_the_exception_after_the_failing_line():
    stderr = (
        "Traceback (most recent call last):\n"
        '  File "/work/train.py", line 5, in <module>\n'
        "    from keras.models import Sequential\n"
        "ModuleNotFoundError: No module named 'keras'\n"
    )
    assert failing_line(stderr, ("train.py",)) == "line 5: from keras.models import Sequential"
    assert exception_line(stderr) == "ModuleNotFoundError: No module named 'keras'"
    assert exception_line("some output\nno exception here\n") is None


def test_an_unbound_local_crash_says_that_the_function_assigns_the_name(tmp_path):
    """The 1.5B model's own mistake, six versions in a row: a loop moved into a function that updates
    module-level weights. Python's message alone never led it to `global`."""
    script = tmp_path / "train.py"
    script.write_text("W2 = 1.0\n\ndef train_step(g):\n    h = W2 * g\n    W2 -= g\n\ntrain_step(0.5)\n")
    stderr = subprocess.run([sys.executable, str(script)], capture_output=True, text=True).stderr
    assert failing_line(stderr, ("train.py",)) == "line 4 (train_step): h = W2 * g"
    assert exception_line(stderr) == (
        "UnboundLocalError: cannot access local variable 'W2' where it is not associated with a value"
        " (the function assigns W2, so W2 is local in all of it: `global W2` for the module's)"
    )


@pytest.mark.parametrize(
    ("source", "meaning"),
    [
        (
            'params = json.loads("{}")\n',
            "(the file uses json without importing it: add `import json` at the top)",
        ),
        ("x = np.zeros(3)\n", "(the file uses np without importing it: add `import numpy as np` at the top)"),
        (
            "W1 = 0.5\nW1 -= LEARNING_RATE\n",
            "(no line that runs before this one defines LEARNING_RATE: define it, or use a name the file has)",
        ),
    ],
)
def test_a_name_error_crash_says_what_is_missing(tmp_path, source, meaning):
    """Seed 42 of digits-mlp: told only "name 'json' is not defined", the 1.5B model sent the same file,
    without `import json`, three times; seed 123 dropped LEARNING_RATE's definition twice."""
    script = tmp_path / "train.py"
    script.write_text(source)
    stderr = subprocess.run([sys.executable, str(script)], capture_output=True, text=True).stderr
    line = exception_line(stderr)
    assert line is not None and line.startswith("NameError: name ") and line.endswith(meaning)


@pytest.mark.asyncio
async def test_a_name_error_on_a_module_of_the_folder_says_to_import_it(settings, tmp_path):
    """A stateless digits-mlp run dropped `import prepare` (the folder's prepare.py) from seven versions;
    "no line defines prepare" sent it looking for a definition instead of the import."""
    folder = make_folder(tmp_path, script="x = prepare.load()\nprint('loss: 1')\n")
    (folder / "prepare.py").write_text("def load():\n    return 1\n")
    async with connected(settings, folder) as client:
        run_id = (await call(client, "start_run", {"task": "bowl", "budget": 1}))["run_id"]
        exp = (await call(client, "run_experiment", {"run_id": run_id, "params": {}}))["experiment"]
    assert exp["status"] == "crash"
    assert "at line 1: x = prepare.load(): NameError: name 'prepare' is not defined" in exp["error_tail"]
    assert (
        "(the file uses prepare without importing it: add `import prepare` at the top)" in exp["error_tail"]
    )


def test_a_code_folder_that_does_not_profile_asks_the_model_for_the_whole_file_not_for_edits(tmp_path):
    """No profile, no hot function: the file is the unit (offered functions, edits and whole files,
    Qwen2.5-Coder-1.5B mixed the three in one reply). A profiled folder keeps all three forms."""
    plain = folder_task_class(
        make_folder(tmp_path / "a", script=PROFILED_SCRIPT, extra='work = "code"\nprofile = false')
    )({})
    profiled = folder_task_class(make_folder(tmp_path / "b", script=PROFILED_SCRIPT, extra='work = "code"'))(
        {}
    )
    words = plain.agent_profile()
    assert "the whole new train.py in one ```python block" in words.text_system_prompt
    assert "SEARCH" not in words.text_system_prompt and "spends its time" not in words.text_system_prompt
    assert "profile_train_py" not in words.how
    assert "SEARCH" in profiled.agent_profile().text_system_prompt
    assert "profile_train_py" in profiled.agent_profile().how
