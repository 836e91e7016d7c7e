"""The four task folders in examples/tasks/, each registered with a real server and run through MCP, with
data that scikit-learn ships (no download)."""

import importlib.util
from contextlib import asynccontextmanager
from typing import Any

import pytest
from mcp import Client

from autoresearch_mcp.server.build import build_server
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from conftest import ROOT
from folder_fixture import FASTER_PAIRWISE_CLOSE

TASKS = ROOT / "examples" / "tasks"


@asynccontextmanager
async def serving(settings: ServerSettings):
    folders = [str(path) for path in sorted(TASKS.iterdir()) if (path / "autoresearch.toml").is_file()]
    with Research(settings.model_copy(update={"task_dirs": folders})) as research:
        async with Client(build_server(research), raise_exceptions=True) as client:
            yield client


async def call(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def one_params_experiment(settings, task: str, params: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A params folder's run started and one experiment run: the words start_run gave, the experiment."""
    async with serving(settings) as client:
        answer = await client.call_tool("start_run", {"task": task, "budget": 2})
        started = answer.structured_content
        assert started["experiment_tool"] == "run_experiment"
        run = {"run_id": started["run_id"], "params": params}
        return answer.content[0].text, (await call(client, "run_experiment", run))["experiment"]


@pytest.mark.asyncio
async def test_digits_hgb_tunes_params_of_a_scikit_learn_script(settings):
    words, exp = await one_params_experiment(settings, "digits-hgb", {"max_iter": 10, "learning_rate": 0.3})
    # a param searched on a log scale says so in the words a model reads
    assert "learning_rate (float >=0.001 <=1.0, log scale, default 0.1)" in words
    assert exp["status"] == "ok" and 0 < exp["metric"] < 1 and 0.8 < exp["metrics"]["val_accuracy"] <= 1


@pytest.mark.asyncio
async def test_cancer_rf_tunes_three_params_of_a_random_forest(settings):
    params = {"n_estimators": 20, "max_depth": 4, "max_features": 0.5}
    words, exp = await one_params_experiment(settings, "cancer-rf", params)
    assert "n_estimators (int >=10 <=500, log scale, default 100)" in words
    assert exp["status"] == "ok" and 0 < exp["metric"] < 1 and 0.8 < exp["metrics"]["val_accuracy"] <= 1
    assert exp["params"] == params


@pytest.mark.asyncio
async def test_digits_mlp_is_scored_by_its_evaluator_whatever_a_version_prints_or_hands_it(settings):
    async with serving(settings) as client:
        started = await call(client, "start_run", {"task": "digits-mlp", "budget": 4})
        run_id = started["run_id"]
        assert started["experiment_tool"] == "run_benchmark" and started["judged_by"] == "evaluator"
        first_result = await call(client, "run_benchmark", {"run_id": run_id})
        first = first_result["experiment"]
        # A version that trains without the Budget, then prints a val_loss line of its own.
        edits = [
            {"search": "while budget.left():", "replace": "while steps < 20:"},
            {
                "search": "prepare.save(forward(X_val)[1])",
                "replace": "prepare.save(forward(X_val)[1])\nprint('val_loss: 0.0')",
            },
        ]
        await call(client, "modify_train_py", {"run_id": run_id, "description": "own loop", "edits": edits})
        unbudgeted = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
        # The payload that scored 0.0 when prepare.load() gave train.py the labels: one-hot "probabilities"
        # built from y_val. There is no y_val in train.py's reach now; it tries the names it had.
        one_hot = {
            "search": "prepare.save(forward(X_val)[1])",
            "replace": "try:\n    y_val = prepare.load()[3]\nexcept IndexError:\n"
            "    y_val = np.load('secret/y_val.npy')\nprepare.save(np.eye(10)[y_val])",
        }
        await call(client, "revert_train_py", {"run_id": run_id, "version": 1})
        await call(
            client, "modify_train_py", {"run_id": run_id, "description": "one-hot", "edits": [one_hot]}
        )
        cheat = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
        # What a strong model did instead: look the held-out images up in scikit-learn's public copy.
        lookup = {
            "search": "prepare.save(forward(X_val)[1])",
            "replace": "from sklearn.datasets import load_digits\nX, y = load_digits(return_X_y=True)\n"
            "prepare.save(np.eye(10)[y[:len(X_val)]])",
        }
        await call(client, "revert_train_py", {"run_id": run_id, "version": 1})
        await call(client, "modify_train_py", {"run_id": run_id, "description": "look up", "edits": [lookup]})
        looked = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
    assert first["status"] == "ok" and first["metric"] > 0 and first["metrics"]["reported.steps"] > 0
    assert first_result["profile"] is None  # profile = false: the metric is a loss, not a time
    assert 0 < first["metrics"]["val_accuracy"] <= 1  # the evaluator's own second line
    # The Budget ends the loop only once TIME_BUDGET_S have passed: a floor the code sets, whatever
    # the load (how many steps fit in them, and how long 20 steps take, are the machine's).
    assert first["metrics"]["reported.train_s"] >= 3.0
    assert unbudgeted["status"] == "ok" and unbudgeted["metrics"]["reported.steps"] == 20
    assert unbudgeted["metric"] > 0 and unbudgeted["metrics"]["reported.val_loss"] == 0.0  # never counted
    assert cheat["status"] == "crash" and "secret/y_val.npy" in cheat["error_tail"]
    assert looked["status"] == "crash" and "PermissionError" in looked["error_tail"]
    assert (TASKS / "digits-mlp" / "prepare.py").read_text().count("TIME_BUDGET_S = 3.0") == 1


def test_digits_mlp_binds_its_budget_when_prepare_is_imported():
    """An edited train.py that sets prepare.TIME_BUDGET_S still trains for the fixed budget."""
    spec = importlib.util.spec_from_file_location("digits_mlp_prepare", TASKS / "digits-mlp" / "prepare.py")
    assert spec is not None and spec.loader is not None
    prepare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prepare)
    prepare.TIME_BUDGET_S = 0.0
    assert prepare.Budget().left()


def assert_judged_by_its_interval(result: dict[str, Any]) -> None:
    """What the code decides from the measurements: a run's first version is kept exactly when its
    interval against the original, at the keep rule's level (vs_best_*, not the speedup's wider one
    shown beside it), lies above 1; how fast it is, is the machine's."""
    metrics = result["experiment"]["metrics"]
    assert result["experiment"]["status"] == "ok" and metrics["inputs"] == 11  # one untimed first
    assert metrics["speedup_low"] <= metrics["speedup"] <= metrics["speedup_high"]
    assert metrics["vs_best_iteration"] == 0 and metrics["vs_best"] == metrics["speedup"]
    assert (
        metrics["speedup_low"] <= metrics["vs_best_low"] <= metrics["vs_best_high"] <= metrics["speedup_high"]
    )
    assert result["is_new_best"] == (metrics["vs_best_low"] > 1)


@pytest.mark.asyncio
async def test_slow_function_is_timed_beside_its_original_and_a_wrong_version_fails_the_check(settings):
    original = (TASKS / "slow-function" / "slow.py").read_text()
    async with serving(settings) as client:
        started = await call(client, "start_run", {"task": "slow-function", "budget": 3})
        run_id = started["run_id"]
        assert started["judged_by"] == "benchmark" and started["metric"] == "speedup"
        same = await call(client, "run_benchmark", {"run_id": run_id})
        wrong = original.replace("return sorted(pairs)", "return pairs[:1]")
        await call(client, "modify_train_py", {"run_id": run_id, "description": "wrong", "source": wrong})
        broken = (await call(client, "run_benchmark", {"run_id": run_id}))["experiment"]
    assert_judged_by_its_interval(same)
    assert broken["status"] == "incorrect" and "wrong output (call 1 of 11" in broken["error_tail"]


@pytest.mark.slow  # 22 timed calls of the 600-point original (test_folder_benchmark times this rewrite)
@pytest.mark.asyncio
async def test_a_faster_slow_function_is_kept_exactly_when_its_interval_says_so(settings):
    async with serving(settings) as client:
        run_id = (await call(client, "start_run", {"task": "slow-function", "budget": 2}))["run_id"]
        await call(
            client,
            "modify_train_py",
            {"run_id": run_id, "description": "half the pairs, no root", "source": FASTER_PAIRWISE_CLOSE},
        )
        assert_judged_by_its_interval(await call(client, "run_benchmark", {"run_id": run_id}))
