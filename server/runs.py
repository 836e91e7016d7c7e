"""Runs: start_run, list_runs, get_run_summary, add_note, finish_run, and which run a call means when
it names none. Plain and synchronous: the MCP glue (tools/) only calls it; whoever watches runs
(notify.py, for hosts) hears of them through `events` (events.py).
"""

import logging
import math
import re
from typing import Any

from pydantic import ValidationError

from autoresearch_mcp.contract.arguments import MAX_NOTE_CHARS, MAX_REEVAL_SEEDS
from autoresearch_mcp.contract.errors import AmbiguousRunDetail, ResearchError
from autoresearch_mcp.contract.models import Note, NoteKind, Run, RunStatus
from autoresearch_mcp.sandbox.isolation import weaker_guarantees
from autoresearch_mcp.sandbox.resources import sweep_stale_sandboxes
from autoresearch_mcp.server.experiments import ExperimentService, params_error
from autoresearch_mcp.server.store import RunRef
from autoresearch_mcp.server.suggest import SUGGESTERS, optimiser_available, refuse_unless_params_work
from autoresearch_mcp.server.summary import LAST_EXPERIMENTS, Words, listed_last, render_summary
from autoresearch_mcp.server.tasks.base import Task
from autoresearch_mcp.server.text import check_text, scrub_paths

log = logging.getLogger(__name__)
# The reason the server gives a run it ended itself (experiments.py, conclude).
SERVER_ENDED = re.compile(r"^(?:exhausted|converged) after experiment #\d+")


class RunService:
    def __init__(self, experiments: ExperimentService) -> None:
        self.experiments = experiments
        self.store = experiments.store
        self.tasks = experiments.tasks
        self.events = experiments.events

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
        suggest: str | None = None,
    ) -> tuple[Run, str]:
        """Start a run; returns it with its summary. With `from_run` (a run id, or "latest": the newest
        run of the same task), the new run remembers that run: its summary shows the earlier best,
        notes and failed approaches, and the earlier best is measured again here as experiment #1 (one
        unit of budget): on the earlier best's train.py, with its params. Its result is a new
        measurement, never a copy."""
        check_text(name, "the run name")
        check_text(llm, "the llm label")
        if target is not None and not math.isfinite(target):
            raise ResearchError(f"target must be a finite number, got {target!r}")
        if not 0 <= reeval_seeds <= MAX_REEVAL_SEEDS:
            raise ResearchError(f"reeval_seeds must be 0 to {MAX_REEVAL_SEEDS}, got {reeval_seeds!r}")
        spec = self.tasks(task)
        if suggest is not None:
            if suggest not in SUGGESTERS:
                raise ResearchError(f"suggest is one of {', '.join(SUGGESTERS)}, not {suggest!r}")
            optimiser_available(suggest)
            refuse_unless_params_work(spec, suggest)
        earlier = None if from_run is None else self._earlier_run(task, from_run)
        start = None if earlier is None else self._earlier_start(spec, earlier)
        config: dict[str, Any] = {
            "metric": spec.metric,
            "direction": spec.direction,
            "options": spec.options(),
            "judged_by": spec.judged_by,
        }
        if reeval_seeds:
            config["reeval_seeds"] = reeval_seeds
        if llm:
            config["llm"] = llm
        if suggest:
            config["suggest"] = suggest
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
            run = self.store.get_run(run.id)
        return run, self.get_run_summary(run)

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
                + params_error(exc, spec),
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
        """Experiment #1 of a run started from `earlier`: its best, on its train.py, measured again
        through the same lifecycle as any experiment."""
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
        tool = self.tasks(run.task).experiment_tool
        self.experiments.run_experiment(run, params, note, tool=tool)

    def list_runs(self, status: RunStatus | None = None) -> list[Run]:
        """Every run, newest first, as a model may see them: no absolute paths in their options (runs
        started before the options stopped holding the data path still have it stored)."""
        return [_without_paths(run) for run in self.store.list_runs(status)]

    def get_run(self, run_id: str) -> Run:
        """One run, as list_runs shows it."""
        return _without_paths(self.store.get_run(run_id))

    def resolve(self, run_id: str | None) -> Run:
        """The run a call means: the one it names (or the connection's), else the only running run.
        With several running and none named (the default protocol has no sessions), refuse with the
        list: never a silent guess."""
        if run_id is not None:
            return self.store.get_run(run_id)  # unknown -> unknown_run
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
                detail=AmbiguousRunDetail(running=[r.id for r in running]),
            )
        return running[0]

    def get_run_summary(self, run: RunRef, words: Words = "neutral", last: int = LAST_EXPERIMENTS) -> str:
        """The run's summary, in neutral words, or a small model's (summary.py), listing the `last`
        experiments."""
        record = self.store.run(run)
        return render_summary(self.store, record, self.tasks.of_run(record), words, listed_last(last))

    def add_note(self, run: RunRef, text: str, kind: NoteKind = "strategy") -> Note:
        record = self.store.run(run)
        text = text.strip()
        if not text:
            raise ResearchError("the note is empty")
        check_text(text, "the note", multiline=True)
        if len(text) > MAX_NOTE_CHARS:
            raise ResearchError(
                f"notes are at most {MAX_NOTE_CHARS} characters (got {len(text)}); summarise it"
            )
        return self.store.notes.add(record.id, kind, text)

    def finish_run(self, run: RunRef, reason: str) -> tuple[Run, str]:
        """End a running run: converged when its best reaches the target, else stopped. A finished run
        keeps its status; where the server ended it (its budget, its target), the reason is kept after
        the server's (said twice, once). Returns it with its final summary."""
        check_text(reason, "the reason", multiline=True)
        record = self.store.run(run)
        if self.store.status_of(record.id) == "running":
            status: RunStatus = "stopped"
            if record.best is not None and record.reaches_target(record.best.metric):
                status = "converged"
            record = self.store.set_run_status(record.id, status, reason)
            self.events.run_finished(record)
        elif reason.strip() and SERVER_ENDED.match(record.finish_reason or ""):
            # The run ended by itself (its budget, its target), before anyone said why: kept after that.
            record = self.store.add_finish_reason(record.id, f"finish_run: {reason.strip()}")
        else:
            record = self.store.get_run(record.id)
        return record, self.get_run_summary(record)


def _without_paths(run: Run) -> Run:
    options = run.config.get("options")
    if not isinstance(options, dict):
        return run
    public = {key: scrub_paths(value) if isinstance(value, str) else value for key, value in options.items()}
    return run.model_copy(update={"config": {**run.config, "options": public}})
