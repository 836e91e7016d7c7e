"""The tools on the mutable artifact, each named like its logic in research.train_py
(server/train_py.py)."""

from autoresearch_mcp.contract.arguments import (
    GetCurrentTrainPyArgs,
    ModifyTrainPyArgs,
    ProfileTrainPyArgs,
    ReplaceFunctionArgs,
    RevertTrainPyArgs,
)
from autoresearch_mcp.contract.models import ArtifactInfo, ArtifactVersion, Run, line_count
from autoresearch_mcp.contract.profile import ProfileResult
from autoresearch_mcp.server.research import Research


def artifact_info(version: ArtifactVersion, with_source: bool) -> ArtifactInfo:
    return ArtifactInfo(
        run_id=version.run_id,
        version=version.version,
        sha256=version.sha256,
        description=version.description,
        source=version.source if with_source else None,
        lines=line_count(version.source),
    )


def get_current_train_py(research: Research, run: Run, args: GetCurrentTrainPyArgs) -> ArtifactInfo:
    """The source goes to the model as the answer's plain text (answers.py), not twice: programs read
    it from autoresearch://runs/{run_id}/train.py, or from the text."""
    return artifact_info(research.train_py.get_current_train_py(run), with_source=True)


def modify_train_py(research: Research, run: Run, args: ModifyTrainPyArgs) -> ArtifactInfo:
    edits = None if args.edits is None else [(edit.search, edit.replace) for edit in args.edits]
    version = research.train_py.modify_train_py(run, args.description, args.source, edits)
    return artifact_info(version, with_source=False)


def revert_train_py(research: Research, run: Run, args: RevertTrainPyArgs) -> ArtifactInfo:
    return artifact_info(research.train_py.revert_train_py(run, args.version), with_source=False)


def replace_function(research: Research, run: Run, args: ReplaceFunctionArgs) -> ArtifactInfo:
    version = research.train_py.replace_function(run, args.name, args.source, args.description)
    return artifact_info(version, with_source=False)


def profile_train_py(research: Research, run: Run, args: ProfileTrainPyArgs) -> ProfileResult:
    current = research.train_py.get_current_train_py(run)
    found = research.train_py.profile_train_py(run)
    note = (
        None if found is not None else "no profile: this task does not profile, or this version does not run"
    )
    return ProfileResult(run_id=run.id, version=current.version, profile=found, note=note)
