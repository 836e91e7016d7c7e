"""train.py, the run's mutable artifact: get_current_train_py, modify_train_py, replace_function,
revert_train_py, and profile_train_py (where the current version spends its time).

Every version is kept (append-only, each with its parent). Edits of one run are serialised by a lock,
so concurrent sessions of this server never interleave a read-modify-write; the store's parent check
refuses the rest (another server on the same file).
"""

import threading

from autoresearch_mcp.contract.edits import EditError, apply_edits, unfence
from autoresearch_mcp.contract.errors import ResearchError, error_headline
from autoresearch_mcp.contract.functions import replace_function
from autoresearch_mcp.contract.models import ArtifactVersion, Run
from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.contract.tools import ToolName
from autoresearch_mcp.server.experiments import ExperimentService
from autoresearch_mcp.server.store import RunRef
from autoresearch_mcp.server.store.artifacts import version_name
from autoresearch_mcp.server.tasks.base import ExecContext, Task
from autoresearch_mcp.server.text import check_text

SCRIPT_JUDGED = (
    "edit rejected, train.py unchanged: this task's metric is printed by its own script (params work "
    "without [evaluate]), so its files are not edited; change params, or declare [evaluate] in its "
    "autoresearch.toml to let the code change"
)


class TrainPyService:
    def __init__(self, experiments: ExperimentService) -> None:
        self.experiments = experiments
        self.store = experiments.store
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def run_lock(self, run_id: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(run_id, threading.Lock())

    def get_current_train_py(self, run: RunRef) -> ArtifactVersion:
        return self.store.artifacts.get(self.store.run(run).id)

    def modify_train_py(
        self,
        run: RunRef,
        description: str,
        source: str | None = None,
        edits: list[tuple[str, str]] | None = None,
    ) -> ArtifactVersion:
        """A new version from the whole `source` or from search/replace `edits` (exactly one), checked
        by the task's guardrails first; a refusal changes nothing and says why."""
        record = self.store.run(run)
        tool, refuse = ToolName.MODIFY_TRAIN_PY, self.experiments.refuse
        with self.run_lock(record.id):
            self._check_editable(record, tool)
            # Grammar-constrained models fill every property of the schema, so one they mean to leave
            # out arrives empty: an empty file or an empty edit list is "not given", never a change.
            if source is not None and not source.strip():
                source = None
            if edits is not None and not edits:
                edits = None
            if (source is None) == (edits is None):
                raise refuse(
                    record.id,
                    tool,
                    "give exactly one of `source` (the whole file) or `edits`, not both"
                    if source is not None
                    else "give `source` (the whole file) or `edits` (search/replace pairs); both were empty",
                )
            check_text(description, "the description", multiline=True)
            current = self.store.artifacts.get(record.id)
            try:
                new_source = (
                    unfence(source) if source is not None else apply_edits(current.source, edits or [])
                )
            except EditError as exc:
                raise refuse(record.id, tool, str(exc), "rejected_edit") from None
            return self._add_version(record, tool, current, new_source, description)

    def replace_function(
        self, run: RunRef, name: str, source: str, description: str | None = None
    ) -> ArtifactVersion:
        """train.py with one top-level function replaced by a new definition (contract/functions.py):
        the same name and parameters, everything else as it was. Refused, with why, like an edit."""
        record = self.store.run(run)
        tool, refuse = ToolName.REPLACE_FUNCTION, self.experiments.refuse
        with self.run_lock(record.id):
            self._check_editable(record, tool)
            description = description or f"a new {name}"
            check_text(description, "the description", multiline=True)
            current = self.store.artifacts.get(record.id)
            task = self.experiments.tasks(record.task)
            try:
                new_source = replace_function(current.source, name, source, task.editable())
            except (EditError, ValueError) as exc:
                raise refuse(
                    record.id, tool, f"edit rejected, train.py unchanged: {exc}", "rejected_edit"
                ) from None
            return self._add_version(record, tool, current, new_source, description)

    def _check_editable(self, record: Run, tool: ToolName) -> None:
        """Before anything in the call is read: a run that has ended, or a task whose files are never
        edited, refuses every edit, and a fixed call would only be refused again."""
        status = self.store.status_of(record.id)  # now, under the lock
        if status != "running":
            raise self.experiments.refuse(
                record.id, tool, f"run {record.id} is {status}; its train.py is frozen", "run_finished"
            )
        if self.experiments.tasks(record.task).judged_by == "script":
            # its metric is what the script prints: an edit could print any
            raise self.experiments.refuse(record.id, tool, SCRIPT_JUDGED, "rejected_edit")

    def _add_version(
        self, record: Run, tool: ToolName, current: ArtifactVersion, new_source: str, description: str
    ) -> ArtifactVersion:
        """`new_source` as the next version, once it is a change and the task's guardrails pass it."""
        refuse = self.experiments.refuse
        task = self.experiments.tasks(record.task)
        if new_source == current.source:
            raise refuse(record.id, tool, self._no_change(record.id, task, current.version), "no_change")
        problems = task.check_artifact(new_source)
        if problems:
            raise refuse(
                record.id,
                tool,
                f"edit rejected, {version_name(task.editable(), current.version)} unchanged:\n- "
                + "\n- ".join(problems),
                "rejected_edit",
            )
        return self.store.artifacts.add(record.id, new_source, description, expected_parent=current.version)

    def profile_train_py(self, run: RunRef) -> Profile | None:
        """Where the current train.py spends its time: the profile its benchmark took, else one taken
        now in the sandbox (no budget: it records no experiment). None for a task that does not
        profile, or a version that does not run."""
        record = self.store.run(run)
        task = self.experiments.tasks(record.task)
        current = self.store.artifacts.get(record.id)
        found = self.store.profiles.get(record.id, current.sha256)
        if found is not None:
            return found
        ctx = ExecContext(
            run_id=record.id, seed=record.seed, iteration=record.used + 1, options=record.config["options"]
        )
        try:
            found = task.profile(task.params_model(), current.source, ctx)
        except ResearchError:  # e.g. the task folder's data went missing: no profile, not a failure
            return None
        if found is not None:
            self.store.profiles.put(record.id, found)
        return found

    def _no_change(self, run_id: str, task: Task, version: int) -> str:
        """Resending the current file unchanged: say how that version ended when it did not run, and
        what would help (a model that resends a crashed version unchanged is stuck on it)."""
        message = f"no change: this is already {version_name(task.editable(), version)}"
        last, _ = self.store.experiments(run_id, last=1)
        if last and last[0].artifact_version == version and last[0].status != "ok":
            why = error_headline(last[0].error_tail or "") or "no reason recorded"
            message += (
                f", which ended {last[0].status} in #{last[0].iteration} ({why[:200]}): fix that, "
                "or go back to a version that ran"
            )
        return message

    def revert_train_py(self, run: RunRef, version: int) -> ArtifactVersion:
        """Version `version` again, as a new version."""
        record = self.store.run(run)
        tool, refuse = ToolName.REVERT_TRAIN_PY, self.experiments.refuse
        with self.run_lock(record.id):
            status = self.store.status_of(record.id)
            if status != "running":
                raise refuse(
                    record.id, tool, f"run {record.id} is {status}; its train.py is frozen", "run_finished"
                )
            try:
                old = self.store.artifacts.get(record.id, version)
            except ResearchError as exc:
                raise refuse(record.id, tool, str(exc), exc.kind) from None
            current = self.store.artifacts.get(record.id)
            if old.source == current.source:
                raise refuse(
                    record.id, tool, f"train.py v{current.version} already equals v{version}", "no_change"
                )
            return self.store.artifacts.add(
                record.id, old.source, f"revert to v{version}", expected_parent=current.version
            )
