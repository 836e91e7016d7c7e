"""The optimiser's suggestion (start_run's `suggest`): one summary line with the configuration an Optuna
TPE sampler would try next, fed the run's history, beside whatever the model proposes.

The model brings priors; TPE brings careful local search around what scored well. It reads the search
space from the task's params (bounds, choices, the params a task searches on a log scale), every
recorded experiment (ok ones as complete trials, crashes, timeouts and incorrect ones as failed trials)
and the ones still running (pending trials, so it suggests something else). The same history and seed
give the same line: the sampler's seed is the run's, moved on by the number of experiments, so that
each turn's draw is new while the run is replayable. Params work only: code work has no params to
suggest. Optuna is imported only for a run that asked for it.
"""

import math
import threading
import warnings
from typing import Any, Literal, get_args, get_origin

from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.contract.models import Experiment, Run
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.tasks.base import Task

SUGGESTERS = ("tpe",)
HISTORY = 500  # the most recent experiments the sampler is fed: TPE's own cost grows with its trials
DIGITS = 3  # significant digits of a suggested float: a value the model can copy exactly
TRIES = 5  # draws before settling for one that repeats a tried configuration
_drawn: dict[tuple[Any, ...], dict[str, Any]] = {}
_drawn_lock = threading.Lock()
DRAWN_KEPT = 64  # suggestions remembered, by the history they were drawn from
PREFIX_WORDS = "optimiser suggests: "  # the line's start, as the client reads it (client/suggestion.py)
# TPE draws at random until it has this many results to model (Optuna's default, named here so the
# line can say which phase a suggestion comes from: a random draw is no advice on where to go).
STARTUP = 10


def refuse_unless_params_work(task: Task, suggest: str) -> None:
    """One line for a suggestion no run could show: code work, or no param with a range or choices."""
    if task.experiment_tool != ToolName.RUN_EXPERIMENT:
        raise ResearchError(
            f"suggest={suggest!r} is for params work: task {task.name} is code work (run_benchmark), "
            "with no params for an optimiser to suggest; start it without suggest",
            kind="bad_argument",
        )
    if not search_space(task):
        raise ResearchError(
            f"suggest={suggest!r}: task {task.name} has no param with a range or choices to search; "
            "start it without suggest",
            kind="bad_argument",
        )


def search_space(task: Task) -> dict[str, Any]:
    """The task's params as Optuna distributions: ints and floats with both bounds (log where the task
    says), booleans and fixed choices as categorical; a param without bounds is left to the model."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    log = task.log_scaled()
    space: dict[str, Any] = {}
    for name, field in task.params_model.model_fields.items():
        annotation = field.annotation
        if annotation is bool:
            space[name] = CategoricalDistribution([False, True])
        elif get_origin(annotation) is Literal:
            space[name] = CategoricalDistribution(list(get_args(annotation)))
        elif annotation in (int, float):
            low = next((m.ge for m in field.metadata if getattr(m, "ge", None) is not None), None)
            high = next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)
            if low is None or high is None or not low < high:
                continue
            on_log = name in log and low > 0
            if annotation is int:
                space[name] = IntDistribution(int(low), int(high), log=on_log)
            else:
                space[name] = FloatDistribution(float(low), float(high), log=on_log)
    return space


def suggestion(store: Store, run: Run, task: Task) -> dict[str, Any] | None:
    """The configuration TPE would try next, or None for a run that did not ask for one."""
    drawn = _suggestion(store, run, task)
    return None if drawn is None else drawn[0]


def _suggestion(store: Store, run: Run, task: Task) -> tuple[dict[str, Any], int] | None:
    """The configuration and how many results TPE modelled it from (below STARTUP: a random draw)."""
    if run.config.get("suggest") != "tpe" or run.status != "running":
        return None
    space = search_space(task)
    if not space:
        return None
    history, total = store.experiments(run.id, last=HISTORY)
    # The summary is read several times per experiment (each turn, the dashboard, hosts); TPE over
    # hundreds of trials takes a second on a busy core. The same history gives the same line.
    state = (run.id, run.seed, repr(space), total, tuple((exp.id, exp.status) for exp in history))
    with _drawn_lock:
        known = _drawn.get(state)
    if known is None:
        known = _draw(history, total, run, space)
        with _drawn_lock:
            _drawn[state] = known
            while len(_drawn) > DRAWN_KEPT:
                del _drawn[next(iter(_drawn))]
    params, results = known
    return dict(params), results


def _draw(
    history: list[Experiment], total: int, run: Run, space: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    tried = {_key(exp.params, space) for exp in history}
    with warnings.catch_warnings():  # the sampler's options are fixed here, not the user's
        warnings.simplefilter("ignore")
        sampler = optuna.samplers.TPESampler(
            seed=run.seed + total, constant_liar=True, n_startup_trials=STARTUP
        )
        study = optuna.create_study(
            direction="maximize" if run.direction == "max" else "minimize", sampler=sampler
        )
        fed = trials(history, space)
        study.add_trials(fed)
        results = sum(trial.state == optuna.trial.TrialState.COMPLETE for trial in fed)
        for _ in range(TRIES):
            asked = study.ask(space)
            params = {name: _fitted(space[name], value) for name, value in asked.params.items()}
            study.tell(asked, state=optuna.trial.TrialState.FAIL)  # a draw, not a measurement
            if _key(params, space) not in tried:
                break
    return params, results


def suggestion_line(store: Store, run: Run, task: Task) -> str | None:
    """`optimiser suggests: max_depth=7 learning_rate=0.05 ...` (every searched param), or None; in
    the random start-up phase it says so after the params (the client reads the `name=value` words)."""
    drawn = _suggestion(store, run, task)
    if drawn is None:
        return None
    params, results = drawn
    line = PREFIX_WORDS + task.format_params(params)
    if results < STARTUP:
        line += f" (random start-up, {results} of {STARTUP} results before TPE models them)"
    return line


def trials(history: list[Experiment], space: dict[str, Any]) -> list[Any]:
    """The experiments as the sampler learns from them: ok ones complete, failed ones failed, running
    ones pending; interrupted ones (they measured nothing) and values outside the space left out."""
    return [trial for exp in history if (trial := _trial(exp, space)) is not None]


def _trial(exp: Experiment, space: dict[str, Any]) -> Any:
    from optuna.trial import TrialState, create_trial

    params = {name: exp.params[name] for name in space if name in exp.params}
    if not all(_inside(space[name], value) for name, value in params.items()):
        return None  # a value outside the space (the space was narrowed since): nothing to learn from
    distributions = {name: space[name] for name in params}
    if exp.status == "ok" and exp.metric is not None and math.isfinite(exp.metric):
        return create_trial(params=params, distributions=distributions, value=exp.metric)
    if exp.status in ("crash", "timeout", "incorrect"):
        return create_trial(params=params, distributions=distributions, state=TrialState.FAIL)
    if exp.status == "running":
        return create_trial(params=params, distributions=distributions, state=TrialState.RUNNING)
    return None  # interrupted: it measured nothing


def _inside(distribution: Any, value: Any) -> bool:
    choices = getattr(distribution, "choices", None)
    if choices is not None:
        return value in choices
    return isinstance(value, int | float) and distribution.low <= value <= distribution.high


def _fitted(distribution: Any, value: Any) -> Any:
    """A suggested value as the model reads it: floats to DIGITS significant digits, within bounds."""
    if not isinstance(value, float):
        return value
    return min(max(_rounded(value), distribution.low), distribution.high)


def _rounded(value: Any) -> Any:
    if isinstance(value, float) and value != 0:
        return float(f"{value:.{DIGITS}g}")
    return value


def _key(params: dict[str, Any], space: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(_rounded(params.get(name)) for name in space)


def optimiser_available(suggest: str) -> None:
    """One line when the optimiser is not installed (it is a dependency; a trimmed install may lack it)."""
    try:
        import optuna  # noqa: F401
    except ImportError:
        raise ResearchError(
            f"suggest={suggest!r} needs Optuna, which this server's installation lacks: pip install optuna",
            kind="unavailable",
        ) from None
