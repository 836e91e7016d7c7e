"""Experiments: run_experiment, run_benchmark, get_experiment_history, and the one lifecycle every
experiment goes through, wherever it is measured.

    ask      validate the params, refuse (free) or reserve the row: it counts against the budget now
    measure  run it in the sandbox, here (or on a job worker: jobs/)
    tell     record the outcome; a would-be best with reeval_seeds is measured again on more seeds
             first (reeval.py)
    keep     the task's rule decides against the best of the moment; then the run may converge or be
             exhausted

A direct call (run_experiment, run_benchmark), from_run's re-measure and a background job all take
this route; the records are frozen and handed from step to step, never read again by id. Plain and
synchronous: the MCP glue (tools/) only calls it, and whoever watches hears of it through `events`.
One module on purpose: the lifecycle reads top to bottom in one place.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from autoresearch_mcp.contract.arguments import HISTORY_MAX, HISTORY_PAGE
from autoresearch_mcp.contract.errors import RefusalKind, RefusedError, ResearchError
from autoresearch_mcp.contract.models import (
    Experiment,
    ExperimentResult,
    ExperimentStatus,
    HistoryPage,
    ParamsBase,
    Run,
    RunStatus,
)
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.events import ResearchEvents
from autoresearch_mcp.server.reeval import reevaluate
from autoresearch_mcp.server.store import BestChanged, Incumbent, Keep, RunRef, Store
from autoresearch_mcp.server.store.db import sha256
from autoresearch_mcp.server.tasks.base import ExecContext, Outcome, Task, Verdict, execute_safely
from autoresearch_mcp.server.tasks.intervals import LEVEL
from autoresearch_mcp.server.tasks.registry import Tasks
from autoresearch_mcp.server.tasks.speed import pooled_verdict
from autoresearch_mcp.server.text import check_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Trial:
    """An experiment asked for: its row reserved, and everything needed to measure it (here, or on a
    job worker). `run` is the run as it was when asked."""

    run: Run
    task: Task
    experiment: Experiment
    params: BaseModel
    source: str
    ctx: ExecContext


@dataclass(frozen=True)
class Measured:
    outcome: Outcome
    duration_s: float


@dataclass(frozen=True)
class Recorded:
    """An experiment as stored, and why it was or was not kept, in words."""

    experiment: Experiment
    why: str


# How a trial is measured: here, in this process's sandbox, or on the executor a job runs on.
Measure = Callable[[Trial], Measured]


class ExperimentService:
    def __init__(self, store: Store, tasks: Tasks, events: ResearchEvents) -> None:
        self.store = store
        self.tasks = tasks
        self.events = events

    # -- the tools ---------------------------------------------------------------------------------
    def run_experiment(
        self,
        run: RunRef,
        params: dict[str, Any],
        note: str | None = None,
        base: ParamsBase = "defaults",
        tool: ToolName = ToolName.RUN_EXPERIMENT,
        remeasure: bool = False,
    ) -> ExperimentResult:
        trial = self.ask(run, params, note, tool, base, remeasure=remeasure)
        return self.tell(trial, self.measure(trial))

    def run_benchmark(self, run: RunRef, remeasure: bool = False) -> ExperimentResult:
        record = self.store.run(run)
        task = self.tasks(record.task)
        if task.experiment_tool != ToolName.RUN_BENCHMARK:
            raise self.refuse(
                record.id,
                ToolName.RUN_BENCHMARK,
                f"task {task.name} is evaluated with run_experiment(params), not run_benchmark",
                "wrong_tool",
            )
        return self.run_experiment(record, {}, tool=ToolName.RUN_BENCHMARK, remeasure=remeasure)

    def get_experiment_history(
        self,
        run: RunRef,
        last: int | None = None,
        offset: int = 0,
        order: Literal["iteration", "metric"] = "iteration",
        status: ExperimentStatus | None = None,
    ) -> HistoryPage:
        """A page: the most recent `last` (at most HISTORY_MAX), or HISTORY_PAGE from `offset`."""
        if last is not None and not 1 <= last <= HISTORY_MAX:
            raise ResearchError(f"last must be 1 to {HISTORY_MAX}, got {last!r}")
        record = self.store.run(run)
        page, total = self.store.experiments(
            record.id,
            last=last,
            offset=offset,
            order=order,
            status=status,
            direction=record.direction,
            limit=HISTORY_PAGE,
        )
        end = offset + len(page)
        more = last is None and end < total
        return HistoryPage(experiments=page, total=total, offset=offset, next_offset=end if more else None)

    def refuse(
        self, run_id: str | None, tool: str, message: str, kind: RefusalKind = "bad_argument"
    ) -> RefusedError:
        """Log a refusal (no budget spent) and return the error to raise."""
        self.store.events.log(run_id, "refusal", tool, message)
        self.events.refused(run_id, tool, kind, message)
        return RefusedError(message, kind=kind)

    # -- the lifecycle -----------------------------------------------------------------------------
    def ask(
        self,
        run: RunRef,
        params: dict[str, Any],
        note: str | None,
        tool: str,
        base: ParamsBase = "defaults",
        *,
        remeasure: bool = False,
    ) -> Trial:
        """Validate and reserve: the experiment row exists (and counts against the budget) from here on.

        `base`: what the params not given take: the task's defaults, or the best experiment's values
        (so a caller sends only what it changes). Invalid params and exact repeats are refused, logged,
        and cost nothing; `remeasure` asks for an exact repeat on purpose, where the task is noisy."""
        check_text(note, "the note", multiline=True)
        record = self.store.run(run)
        task = self.tasks(record.task)
        if remeasure and not task.noisy:
            raise self.refuse(
                record.id,
                tool,
                f"remeasure is for tasks whose metric is a timing; {task.name} measures the same params on "
                "the same train.py the same way every time",
            )
        if base == "best" and record.best is not None and isinstance(params, dict):
            params = {**record.best.params, **params}
        try:
            validated = task.params_model.model_validate(params)
        except ValidationError as exc:
            raise self.refuse(record.id, tool, params_error(exc, task), "invalid_params") from None
        artifact = self.store.artifacts.get(record.id)
        try:
            exp = self.store.reserve_experiment(
                record.id,
                validated.model_dump(),
                artifact.version,
                note,
                repeat_ok=remeasure,
                # a script that prints its own metric is never edited (train_py.py): only params change
                files=[] if task.judged_by == "script" else task.editable(),
                noisy=task.noisy,
            )
        except ResearchError as exc:  # a repeat (logged as a refusal), a finished run, no budget left
            if isinstance(exc, RefusedError):
                self.store.events.log(record.id, "refusal", tool, str(exc))
            self.events.refused(record.id, tool, exc.kind, str(exc))
            raise
        self.events.experiment_started(record, exp)
        best = record.best
        ctx = ExecContext(
            run_id=record.id,
            seed=record.seed,
            iteration=exp.iteration,
            options=record.config["options"],
            best_iteration=None if best is None else best.iteration,
            best_source=None
            if best is None
            else self.store.artifacts.get(record.id, best.artifact_version).source,
            profiled=self.store.profiles.get(record.id, artifact.sha256) is not None,
        )
        return Trial(run=record, task=task, experiment=exp, params=validated, source=artifact.source, ctx=ctx)

    def ask_again(self, trial: Trial, seed: int, note: str) -> Trial:
        """The same experiment on another seed (a re-evaluation): an exact repeat by design, reserved as
        its own row with the run's options as they are now (an earlier outcome may have added to them)."""
        original = trial.experiment
        exp = self.store.reserve_experiment(
            original.run_id, original.params, original.artifact_version, note, repeat_ok=True
        )
        run = self.store.get_run(original.run_id)
        self.events.experiment_started(run, exp)
        ctx = trial.ctx.model_copy(
            update={"seed": seed, "iteration": exp.iteration, "options": run.config["options"]}
        )
        return Trial(
            run=run, task=trial.task, experiment=exp, params=trial.params, source=trial.source, ctx=ctx
        )

    def measure(self, trial: Trial) -> Measured:
        """In this process: the sandboxed child runs train.py while this thread waits."""
        started = time.monotonic()
        outcome = execute_safely(trial.task, trial.params, trial.source, trial.ctx)
        return Measured(outcome, round(time.monotonic() - started, 3))

    def tell(self, trial: Trial, measured: Measured, measure: Measure | None = None) -> ExperimentResult:
        """Record the outcome and decide whether it is kept; with reeval_seeds, a would-be best is first
        measured again on more seeds (by `measure`, by default here) and kept on the mean."""
        seeds = int(trial.run.config.get("reeval_seeds", 0))
        if seeds and measured.outcome.status == "ok" and self._would_keep(trial, measured.outcome):
            return reevaluate(self, trial, measured, seeds, measure or self.measure)
        done = self.record(trial, measured, lambda best: self._verdict(trial, measured.outcome, best))
        result = self.conclude(trial.run, done.experiment, self._profile(trial, measured.outcome))
        return result.model_copy(update={"message": done.why + self._where_edits_go(trial, result)})

    def _where_edits_go(self, trial: Trial, result: ExperimentResult) -> str:
        """After a code task's version that is not the best's code: the next edit changes it, not the
        best (an edit built on a rejected version, unknowingly, carries its faults into the next ones)."""
        exp, best = result.experiment, result.best
        if trial.task.experiment_tool != ToolName.RUN_BENCHMARK:
            return ""
        if result.is_new_best or best is None or exp.artifact_version == best.artifact_version:
            return ""
        if result.run_status != "running" or result.budget_left == 0:  # nothing left to build
            return ""
        # By content: a revert to the best makes a new version with the best's very code.
        if self.store.artifacts.get(trial.run.id, best.artifact_version).sha256 == sha256(trial.source):
            return ""
        return (
            f". Your next edit applies to v{exp.artifact_version}; the best is v{best.artifact_version} "
            "(revert_train_py to build on it)"
        )

    def _verdict(self, trial: Trial, outcome: Outcome, best: Incumbent | None) -> Verdict:
        """The task's rule, except for a timed re-measurement of the best itself (the same params on
        the same code): compared with itself it could only be "not surely faster"; its samples are
        pooled with the best's instead (pooled_verdict)."""
        if trial.task.noisy and best is not None and trial.experiment.params == best.experiment.params:
            bests = self.store.artifacts.get(trial.run.id, best.experiment.artifact_version)
            if bests.sha256 == sha256(trial.source):
                return pooled_verdict(best, outcome.samples, LEVEL)
        return trial.task.verdict(outcome, best)

    def _profile(self, trial: Trial, outcome: Outcome) -> Profile | None:
        """The profile to return with an experiment: the one just measured, or, for a version that ran
        well and was profiled before in this run (so not measured again), the one on record."""
        if outcome.profile is not None or outcome.status != "ok" or not trial.ctx.profiled:
            return outcome.profile
        return self.store.profiles.get(trial.run.id, sha256(trial.source))

    def _would_keep(self, trial: Trial, outcome: Outcome) -> bool:
        try:
            return trial.task.verdict(outcome, self.store.incumbent(trial.run.id, trial.run.config)).kept
        except Exception:  # the boundary: `record` asks again, and records a failing rule as a crash
            log.exception("the keep rule failed for experiment %d", trial.experiment.id)
            return False

    def record(
        self, trial: Trial, measured: Measured, decide: Callable[[Incumbent | None], Verdict]
    ) -> Recorded:
        """Store the outcome, kept as the rule `decide` says against the best of the moment (decided
        again when another experiment became the best meanwhile), with the reason in words; the run's
        status is left to conclude."""
        outcome, exp_id = measured.outcome, trial.experiment.id
        try:
            if outcome.state_update:
                self.store.update_run_options(trial.run.id, outcome.state_update)
            if outcome.profile is not None:
                self.store.profiles.put(trial.run.id, outcome.profile)
            while True:
                best = self.store.incumbent(trial.run.id, trial.run.config)
                if outcome.status == "ok" and outcome.metric is not None:
                    verdict = decide(best)
                else:
                    verdict = Verdict(False, f"not kept: it ended {outcome.status}")
                keep = Keep(kept=bool(verdict.kept), over=None if best is None else best.experiment.id)
                try:
                    done = self.store.complete_experiment(
                        exp_id,
                        status=outcome.status,
                        metrics=outcome.metrics,
                        metric=outcome.metric,
                        error_tail=outcome.error_tail,
                        duration_s=measured.duration_s,
                        samples=outcome.samples,
                        keep=keep,
                    )
                    return Recorded(done, verdict.why)
                except BestChanged:
                    continue
        except Exception as exc:  # the boundary: an experiment whose process ended never stays running
            log.exception("recording experiment %d failed", exp_id)
            failed = self.store.complete_experiment(
                exp_id,
                status="crash",
                metrics={},
                metric=None,
                error_tail=f"the result could not be recorded ({type(exc).__name__})",
                duration_s=measured.duration_s,
            )
            return Recorded(failed, "not kept: the result could not be recorded")

    def record_interrupted(self, trial: Trial, reason: str, duration_s: float) -> ExperimentResult:
        """An experiment that could not finish for a reason outside it (its worker died)."""
        exp = self.store.complete_experiment(
            trial.experiment.id,
            status="interrupted",
            metrics={},
            metric=None,
            error_tail=reason,
            duration_s=duration_s,
        )
        return self.conclude(trial.run, exp)

    def conclude(self, run: Run, exp: Experiment, profile: Profile | None = None) -> ExperimentResult:
        """After an experiment is recorded: the run converges (a kept metric reaches the target) or is
        exhausted (no budget left and nothing still running); watchers hear of it. `profile`: where the
        measured version spends its time, returned with the result (code tasks)."""
        after = self.store.get_run(run.id)  # the one read after the write: its budget and best
        status: RunStatus | None = None
        if after.status == "running":
            if exp.kept and exp.metric is not None and after.reaches_target(exp.metric):
                status = "converged"
            elif after.used >= after.budget and not self.store.status_counts(run.id).get("running"):
                status = "exhausted"
            if status is not None:
                after = self.store.set_run_status(
                    run.id, status, f"{status} after experiment #{exp.iteration}"
                )
        self.events.experiment_ended(after, exp)
        if status is not None:
            self.events.run_finished(after)
        return experiment_result(after, exp, profile)


def experiment_result(run: Run, exp: Experiment, profile: Profile | None = None) -> ExperimentResult:
    return ExperimentResult(
        experiment=exp,
        is_new_best=exp.kept,
        best=run.best,
        budget_left=max(run.budget - run.used, 0),
        run_status=run.status,
        profile=profile,
    )


def params_error(exc: ValidationError, task: Task) -> str:
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
