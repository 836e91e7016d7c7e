"""The run logic: plain, synchronous, testable without MCP. The MCP glue (build.py, tools/) only calls
this; whoever watches runs (notify.py, for hosts) hears about them through `events` (events.py).

Long work (training, benchmarks) runs in a sandboxed child process; the calling thread waits for it,
so the MCP server (which runs sync tools on worker threads) keeps answering other calls meanwhile.
"""

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from autoresearch_mcp.contract.edits import EditError, apply_edits, unfence
from autoresearch_mcp.contract.errors import RefusalKind, RefusedError, ResearchError, error_headline
from autoresearch_mcp.contract.functions import replace_function
from autoresearch_mcp.contract.models import (
    ArtifactVersion,
    Experiment,
    ExperimentResult,
    ExperimentStatus,
    HistoryPage,
    Note,
    NoteKind,
    ParamsBase,
    Run,
    RunStatus,
)
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.sandbox.isolation import weaker_guarantees
from autoresearch_mcp.sandbox.resources import sweep_stale_sandboxes
from autoresearch_mcp.server.events import ResearchEvents
from autoresearch_mcp.server.reeval import MAX_REEVAL_SEEDS, reevaluate
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import KeepRule, Store
from autoresearch_mcp.server.summary import render_summary
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, execute_safely
from autoresearch_mcp.server.tasks.recorded import recorded_task
from autoresearch_mcp.server.tasks.registry import make_task
from autoresearch_mcp.server.text import check_text, scrub_paths

log = logging.getLogger(__name__)

MAX_NOTE_CHARS = 2000
# get_experiment_history without `last` answers one page of this many, with next_offset; `last` takes
# at most HISTORY_MAX. Unpaged, the history of a 100k-experiment run was 54 MB and 33 s in one answer.
HISTORY_PAGE = 100
HISTORY_MAX = 1000


@dataclass(frozen=True)
class PreparedExperiment:
    """A reserved experiment and everything needed to execute it (here, or on a job worker)."""

    experiment: Experiment
    task: Task
    params: BaseModel
    source: str
    ctx: ExecContext


class RunService:
    def __init__(self, store: Store, settings: ServerSettings, events: ResearchEvents | None = None) -> None:
        self.store = store
        self.settings = settings
        self.events = events or ResearchEvents()
        self._tasks: dict[str, Task] = {}
        self._run_locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def run_lock(self, run_id: str) -> threading.Lock:
        """Serialises read-modify-write of a run's train.py between concurrent sessions of this server."""
        with self._locks_guard:
            return self._run_locks.setdefault(run_id, threading.Lock())

    def task(self, name: str) -> Task:
        if name not in self._tasks:
            self._tasks[name] = make_task(name, self.settings.task_settings())
        return self._tasks[name]

    def recover(self) -> int:
        """On start-up: experiments a dead server left running are marked interrupted; and what the
        sandbox cannot enforce on this machine is said, once, with what holds instead."""
        if missing := weaker_guarantees():
            log.warning("the sandbox gives weaker guarantees here: %s", "; ".join(missing))
        count = self.store.mark_orphans_interrupted()
        if count:
            log.warning("marked %d experiment(s) interrupted: the server stopped while they ran", count)
        swept = sweep_stale_sandboxes()  # the working directories (and cgroups) a killed server left
        if swept:  # housekeeping, not news: a host's stderr shows warnings only
            log.info("removed %d sandbox directories or cgroups left by stopped processes", swept)
        return count

    # -- runs --------------------------------------------------------------------------------
    def start_run(
        self,
        task: str,
        budget: int,
        target: float | None,
        seed: int,
        name: str | None,
        reeval_seeds: int = 0,
        from_run: str | None = None,
        llm: str | None = None,
    ) -> tuple[Run, str]:
        """Start a run. With `from_run` (a run id, or "latest": the newest run of the same task), the new
        run remembers that run: its summary shows the earlier best, notes and failed approaches, and
        the earlier best is measured again here as experiment #1 (one unit of budget): on the earlier
        best's train.py, with its params. Its result is a new measurement, never a copy."""
        check_text(name, "the run name")
        check_text(llm, "the llm label")
        if target is not None and not math.isfinite(target):
            raise ResearchError(f"target must be a finite number, got {target!r}")
        if not 0 <= reeval_seeds <= MAX_REEVAL_SEEDS:
            raise ResearchError(f"reeval_seeds must be 0 to {MAX_REEVAL_SEEDS}, got {reeval_seeds!r}")
        spec = self.task(task)
        earlier = None if from_run is None else self._earlier_run(task, from_run)
        start = None if earlier is None else self._earlier_start(spec, earlier)
        config: dict[str, Any] = {
            "metric": spec.metric,
            "direction": spec.direction,
            "options": spec.options(),
        }
        if reeval_seeds:
            config["reeval_seeds"] = reeval_seeds
        if llm:
            config["llm"] = llm
        run = self.store.create_run(
            task=task,
            budget=budget,
            target=target,
            seed=seed,
            name=name,
            config=config,
            initial_source=spec.initial_artifact(),
            from_run=None if earlier is None else earlier.id,
        )
        self.events.run_started(run)
        if earlier is not None and start is not None:
            self._remeasure(run, earlier, *start)
        return self.store.get_run(run.id), self.summary(run.id)

    def _earlier_run(self, task: str, from_run: str) -> Run:
        """The run a new run starts from: an id, or "latest" (the newest run of the same task)."""
        if from_run == "latest":
            runs = [run for run in self.store.list_runs() if run.task == task]
            if not runs:
                raise ResearchError(
                    f'from_run="latest": there is no earlier {task} run to start from; start without from_run',
                    kind="unknown_run",
                )
            return runs[0]
        earlier = self.store.get_run(from_run)  # unknown -> unknown_run
        if earlier.task != task:
            raise ResearchError(
                f"from_run {from_run} is a {earlier.task} run: a {task} run can only start from a {task} "
                'run (pass one of those, or from_run="latest")',
                kind="bad_argument",
            )
        return earlier

    def _earlier_start(self, spec: Task, earlier: Run) -> tuple[dict[str, Any], str] | None:
        """The earlier best's params and train.py, checked before anything is created (None when the
        earlier run has no best): a best this server would now refuse is refused here, up front."""
        best = earlier.best
        if best is None:
            return None
        try:
            params = spec.params_model.model_validate(best.params).model_dump()
        except ValidationError as exc:
            raise ResearchError(
                f"the best of {earlier.id} (#{best.iteration}) no longer fits {spec.name}'s params: "
                + _params_error(exc, spec),
                kind="invalid_params",
            ) from None
        source = self.store.artifacts.get(earlier.id, best.artifact_version).source
        problems = spec.check_artifact(source)
        if problems:
            raise ResearchError(
                f"the train.py of {earlier.id}'s best (v{best.artifact_version}) no longer passes the "
                "guardrails:\n- " + "\n- ".join(problems),
                kind="rejected_edit",
            )
        return params, source

    def _remeasure(self, run: Run, earlier: Run, params: dict[str, Any], source: str) -> None:
        """Experiment #1 of a run started from `earlier`: its best, on its train.py, measured again."""
        best = earlier.best
        assert best is not None
        if source != self.store.artifacts.get(run.id).source:
            self.store.artifacts.add(
                run.id,
                source,
                f"train.py of {earlier.id}'s best (its v{best.artifact_version}, #{best.iteration})",
                expected_parent=1,
            )
        note = f"re-measure of {earlier.id}#{best.iteration} best"
        self.run_experiment(run.id, params, note, tool=self.task(run.task).experiment_tool)

    def list_runs(self, status: RunStatus | None = None) -> list[Run]:
        """Every run, newest first, as a model may see them: no absolute paths in their options (runs
        started before the options stopped holding the data path still have it stored)."""
        return [_without_paths(run) for run in self.store.list_runs(status)]

    def get_run(self, run_id: str) -> Run:
        """One run, as list_runs shows it."""
        return _without_paths(self.store.get_run(run_id))

    def default_run_id(self, preferred: str | None) -> str:
        """The session's run if it has one, else the only running run. With several running and no
        session (the default protocol has none), refuse with the list: never a silent guess."""
        if preferred is not None:
            return preferred
        running = self.store.list_runs("running")
        if not running:
            runs = self.store.list_runs()
            last = f" (the latest, {runs[0].id}, is {runs[0].status})" if runs else ""
            raise ResearchError(
                f"no run is running{last}: start one with start_run, or pass run_id", kind="no_running_run"
            )
        if len(running) > 1:
            listed = ", ".join(f"{r.id} ({r.task}{f', {r.name}' if r.name else ''})" for r in running[:10])
            raise ResearchError(
                f"{len(running)} runs are running: pass run_id, one of {listed}",
                kind="ambiguous_run",
                detail={"running": [r.id for r in running]},
            )
        return running[0].id

    def summary(self, run_id: str) -> str:
        run = self.store.get_run(run_id)
        try:
            task = self.task(run.task)
        except ResearchError as exc:  # e.g. a task folder another server registered: still readable
            if exc.kind != "unknown_task":
                raise
            task = recorded_task(run)
        return render_summary(self.store, run, task)

    def finish_run(self, run_id: str, reason: str) -> tuple[Run, str]:
        check_text(reason, "the reason", multiline=True)
        run = self.store.get_run(run_id)
        if run.status == "running":
            status: RunStatus = "stopped"
            if run.best is not None and run.target is not None and self._meets_target(run, run.best.metric):
                status = "converged"
            self.events.run_finished(self.store.set_run_status(run_id, status, reason))
        return self.store.get_run(run_id), self.summary(run_id)

    def _meets_target(self, run: Run, metric: float) -> bool:
        if run.target is None:
            return False
        return metric >= run.target if run.direction == "max" else metric <= run.target

    # -- experiments -------------------------------------------------------------------------
    def refuse(
        self, run_id: str | None, tool: str, message: str, kind: RefusalKind = "bad_argument"
    ) -> RefusedError:
        """Log a refusal (no budget spent) and return the error to raise."""
        self.store.events.log(run_id, "refusal", tool, message)
        self.events.refused(run_id, tool, kind, message)
        return RefusedError(message, kind=kind)

    def run_experiment(
        self,
        run_id: str,
        params: dict[str, Any],
        note: str | None,
        tool: str = "run_experiment",
        base: ParamsBase = "defaults",
    ) -> ExperimentResult:
        prepared = self.prepare_experiment(run_id, params, note, tool, base)
        started = time.monotonic()
        outcome = self.execute(prepared.task, prepared.params, prepared.source, prepared.ctx)
        duration = round(time.monotonic() - started, 3)
        seeds = int(self.store.get_run(run_id).config.get("reeval_seeds", 0))
        try:  # would it become the best? then it must hold up on more seeds first (reeval.py)
            confirm = (
                seeds
                and outcome.status == "ok"
                and prepared.task.keeps(outcome, self.store.incumbent(run_id))
            )
        except Exception:  # the boundary: record_outcome asks again, and records a failing rule as a crash
            log.exception("the keep rule failed for experiment %d", prepared.experiment.id)
            confirm = False
        if confirm:
            return reevaluate(self, prepared, outcome, duration, seeds)
        return self.record_outcome(prepared.experiment.id, outcome, duration)

    def prepare_experiment(
        self,
        run_id: str,
        params: dict[str, Any],
        note: str | None,
        tool: str,
        base: ParamsBase = "defaults",
    ) -> PreparedExperiment:
        """Validate and reserve: the experiment row exists (and counts against the budget) from here on.

        `base`: what the params not given take: the task's defaults, or the best experiment's values
        (so a caller sends only what it changes). Invalid params and exact repeats are refused, logged,
        and cost nothing."""
        check_text(note, "the note", multiline=True)
        run = self.store.get_run(run_id)
        task = self.task(run.task)
        if base == "best" and run.best is not None and isinstance(params, dict):
            params = {**run.best.params, **params}
        try:
            validated = task.params_model.model_validate(params)
        except ValidationError as exc:
            raise self.refuse(run_id, tool, _params_error(exc, task), "invalid_params") from None
        canonical = validated.model_dump()
        artifact = self.store.artifacts.get(run_id)
        try:
            exp = self.store.reserve_experiment(run_id, canonical, artifact.version, note)
        except ResearchError as exc:  # a repeat (logged as a refusal), a finished run, no budget left
            if isinstance(exc, RefusedError):
                self.store.events.log(run_id, "refusal", tool, str(exc))
            self.events.refused(run_id, tool, exc.kind, str(exc))
            raise
        self.events.experiment_started(run, exp)
        best = run.best
        ctx = ExecContext(
            run_id=run_id,
            seed=run.seed,
            iteration=exp.iteration,
            options=run.config["options"],
            best_iteration=None if best is None else best.iteration,
            best_source=None
            if best is None
            else self.store.artifacts.get(run_id, best.artifact_version).source,
        )
        return PreparedExperiment(
            experiment=exp, task=task, params=validated, source=artifact.source, ctx=ctx
        )

    def record_outcome(self, exp_id: int, outcome: Outcome, duration_s: float) -> ExperimentResult:
        """Store a reserved experiment's outcome; update the run (best, converged, exhausted). Whether it
        becomes the best is the task's rule (Task.keeps)."""
        exp = self.store.get_experiment(exp_id)
        task = self.task(self.store.get_run(exp.run_id).task)
        done = self.record(exp_id, outcome, duration_s, lambda best: task.keeps(outcome, best))
        return self.result(exp.run_id, done, outcome.profile)

    def record(self, exp_id: int, outcome: Outcome, duration_s: float, keep: KeepRule) -> Experiment:
        """Store the outcome, kept or not as `keep` says; the run's status is left to the caller."""
        try:
            if outcome.state_update:
                self.store.update_run_options(self.store.get_experiment(exp_id).run_id, outcome.state_update)
            if outcome.profile is not None:
                self.store.profiles.put(self.store.get_experiment(exp_id).run_id, outcome.profile)
            return self.store.complete_experiment(
                exp_id,
                status=outcome.status,
                metrics=outcome.metrics,
                metric=outcome.metric,
                error_tail=outcome.error_tail,
                duration_s=duration_s,
                samples=outcome.samples,
                keep=keep,
            )
        except Exception as exc:  # the boundary: an experiment whose process ended never stays running
            log.exception("recording experiment %d failed", exp_id)
            return self.store.complete_experiment(
                exp_id,
                status="crash",
                metrics={},
                metric=None,
                error_tail=f"the result could not be recorded ({type(exc).__name__})",
                duration_s=duration_s,
            )

    def record_interrupted(self, exp_id: int, reason: str, duration_s: float) -> ExperimentResult:
        """A reserved experiment that could not finish for a reason outside it (its worker died)."""
        exp = self.store.complete_experiment(
            exp_id, status="interrupted", metrics={}, metric=None, error_tail=reason, duration_s=duration_s
        )
        return self.result(exp.run_id, exp)

    def execute(self, task: Task, params: Any, source: str, ctx: ExecContext) -> Outcome:
        return execute_safely(task, params, source, ctx)

    def result(self, run_id: str, exp: Experiment, profile: Profile | None = None) -> ExperimentResult:
        run = self.store.get_run(run_id)
        status: RunStatus | None = None
        if run.status == "running":
            if exp.kept and exp.metric is not None and self._meets_target(run, exp.metric):
                status = "converged"
            elif run.used >= run.budget and not self.store.status_counts(run_id).get("running"):
                status = "exhausted"
            if status is not None:
                run = self.store.set_run_status(run_id, status, f"{status} after experiment #{exp.iteration}")
        self.events.experiment_ended(run, exp)
        if status is not None:
            self.events.run_finished(run)
        return ExperimentResult(
            experiment=exp,
            is_new_best=exp.kept,
            best=run.best,
            budget_left=max(run.budget - run.used, 0),
            run_status=run.status,
            profile=profile,
        )

    def run_benchmark(self, run_id: str) -> ExperimentResult:
        run = self.store.get_run(run_id)
        task = self.task(run.task)
        if task.experiment_tool != "run_benchmark":
            raise self.refuse(
                run_id,
                "run_benchmark",
                f"task {task.name} is evaluated with run_experiment(params), not run_benchmark",
                "wrong_tool",
            )
        return self.run_experiment(run_id, {}, None, tool="run_benchmark")

    def history(
        self,
        run_id: str,
        last: int | None,
        offset: int,
        order: Literal["iteration", "metric"],
        status: ExperimentStatus | None,
    ) -> HistoryPage:
        """A page: the most recent `last` (at most HISTORY_MAX), or HISTORY_PAGE from `offset`."""
        if last is not None and not 1 <= last <= HISTORY_MAX:
            raise ResearchError(f"last must be 1 to {HISTORY_MAX}, got {last!r}")
        run = self.store.get_run(run_id)
        page, total = self.store.experiments(
            run_id,
            last=last,
            offset=offset,
            order=order,
            status=status,
            direction=run.direction,
            limit=HISTORY_PAGE,
        )
        end = offset + len(page)
        more = last is None and end < total
        return HistoryPage(experiments=page, total=total, offset=offset, next_offset=end if more else None)

    def add_note(self, run_id: str, text: str, kind: NoteKind) -> Note:
        self.store.get_run(run_id)
        text = text.strip()
        if not text:
            raise ResearchError("the note is empty")
        check_text(text, "the note", multiline=True)
        if len(text) > MAX_NOTE_CHARS:
            raise ResearchError(
                f"notes are at most {MAX_NOTE_CHARS} characters (got {len(text)}); summarise it"
            )
        return self.store.notes.add(run_id, kind, text)

    # -- the artifact (train.py) -------------------------------------------------------------
    def current_artifact(self, run_id: str) -> ArtifactVersion:
        self.store.get_run(run_id)
        return self.store.artifacts.get(run_id)

    def modify_artifact(
        self,
        run_id: str,
        description: str,
        source: str | None,
        edits: list[tuple[str, str]] | None,
    ) -> ArtifactVersion:
        with self.run_lock(run_id):
            return self._modify_artifact(run_id, description, source, edits)

    def _modify_artifact(
        self,
        run_id: str,
        description: str,
        source: str | None,
        edits: list[tuple[str, str]] | None,
    ) -> ArtifactVersion:
        run = self.store.get_run(run_id)
        tool = "modify_train_py"
        if run.status != "running":
            raise self.refuse(
                run_id, tool, f"run {run_id} is {run.status}; its train.py is frozen", "run_finished"
            )
        # Grammar-constrained models fill every property of the schema, so one they mean to leave
        # out arrives empty: an empty file or an empty edit list is "not given", never a change.
        if source is not None and not source.strip():
            source = None
        if edits is not None and not edits:
            edits = None
        if (source is None) == (edits is None):
            raise self.refuse(
                run_id,
                tool,
                "give exactly one of `source` (the whole file) or `edits`, not both"
                if source is not None
                else "give `source` (the whole file) or `edits` (search/replace pairs); both were empty",
            )
        check_text(description, "the description", multiline=True)
        current = self.store.artifacts.get(run_id)
        try:
            new_source = unfence(source) if source is not None else apply_edits(current.source, edits or [])
        except EditError as exc:
            raise self.refuse(run_id, tool, str(exc), "rejected_edit") from None
        if new_source == current.source:
            raise self.refuse(run_id, tool, self._no_change(run_id, current.version), "rejected_edit")
        problems = self.task(run.task).check_artifact(new_source)
        if problems:
            raise self.refuse(
                run_id,
                tool,
                "edit rejected, train.py unchanged:\n- " + "\n- ".join(problems),
                "rejected_edit",
            )
        return self.store.artifacts.add(run_id, new_source, description, expected_parent=current.version)

    def _no_change(self, run_id: str, version: int) -> str:
        """Resending the current file unchanged: a small model did this with a version that had just
        crashed, then gave up; say how that version ended and what would help."""
        message = f"no change: this is already train.py v{version}"
        last, _ = self.store.experiments(run_id, last=1)
        if last and last[0].artifact_version == version and last[0].status != "ok":
            why = error_headline(last[0].error_tail or "") or "no reason recorded"
            message += (
                f", which ended {last[0].status} in #{last[0].iteration} ({why[:200]}): fix that, "
                "or go back to a version that ran"
            )
        return message

    def replace_function(
        self, run_id: str, name: str, source: str, description: str | None
    ) -> ArtifactVersion:
        """train.py with one top-level function replaced by a new definition (contract/functions.py):
        the same name and parameters, everything else as it was. Refused, with why, like an edit."""
        with self.run_lock(run_id):
            run = self.store.get_run(run_id)
            task = self.task(run.task)
            current = self.store.artifacts.get(run_id)
            try:
                new_source = replace_function(current.source, name, source, task.editable())
            except (EditError, ValueError) as exc:
                raise self.refuse(
                    run_id, "replace_function", f"edit rejected, train.py unchanged: {exc}", "rejected_edit"
                ) from None
            return self._modify_artifact(run_id, description or f"a new {name}", new_source, None)

    def profile(self, run_id: str) -> Profile | None:
        """Where the current train.py spends its time: the profile its benchmark took, else one taken
        now in the sandbox (no budget: it records no experiment). None for a task that does not
        profile, or a version that does not run."""
        run = self.store.get_run(run_id)
        task = self.task(run.task)
        current = self.store.artifacts.get(run_id)
        found = self.store.profiles.get(run_id, current.sha256)
        if found is not None:
            return found
        ctx = ExecContext(run_id=run_id, seed=run.seed, iteration=run.used + 1, options=run.config["options"])
        try:
            found = task.profile(task.params_model(), current.source, ctx)
        except ResearchError:  # e.g. the task folder's data went missing: no profile, not a failure
            return None
        if found is not None:
            self.store.profiles.put(run_id, found)
        return found

    def revert_artifact(self, run_id: str, version: int) -> ArtifactVersion:
        with self.run_lock(run_id):
            return self._revert_artifact(run_id, version)

    def _revert_artifact(self, run_id: str, version: int) -> ArtifactVersion:
        run = self.store.get_run(run_id)
        if run.status != "running":
            raise self.refuse(
                run_id,
                "revert_train_py",
                f"run {run_id} is {run.status}; its train.py is frozen",
                "run_finished",
            )
        try:
            old = self.store.artifacts.get(run_id, version)
        except ResearchError as exc:
            raise self.refuse(run_id, "revert_train_py", str(exc), exc.kind) from None
        current = self.store.artifacts.get(run_id)
        if old.source == current.source:
            raise self.refuse(
                run_id,
                "revert_train_py",
                f"train.py v{current.version} already equals v{version}",
                "rejected_edit",
            )
        return self.store.artifacts.add(
            run_id, old.source, f"revert to v{version}", expected_parent=current.version
        )


def _without_paths(run: Run) -> Run:
    options = run.config.get("options")
    if not isinstance(options, dict):
        return run
    public = {key: scrub_paths(value) if isinstance(value, str) else value for key, value in options.items()}
    return run.model_copy(update={"config": {**run.config, "options": public}})


def _params_error(exc: ValidationError, task: Task) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "params"
        if err["type"] == "extra_forbidden":
            problems.append(f"unknown parameter {where!r}")
        else:
            problems.append(f"{where}: {err['msg']} (got {err.get('input')!r})")
    return (
        f"invalid params for {task.name}: "
        + "; ".join(problems)
        + ". Nothing ran, no budget used. Allowed parameters:\n"
        + task.params_help()
    )
