"""Tools on the mutable artifact: get_current_train_py, modify_train_py, replace_function,
revert_train_py, and profile_train_py (where the current version spends its time)."""

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field

from autoresearch_mcp.contract.models import ArtifactInfo, ArtifactVersion, line_count
from autoresearch_mcp.contract.profile import ProfileResult
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.tools.common import ADDITIVE, READ_ONLY, RunId, RunResolver, refusals


class Edit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: str = Field(min_length=1, max_length=20_000, description="exact text, occurring once in train.py")
    replace: str = Field(max_length=20_000, description="its replacement")


def artifact_info(version: ArtifactVersion, with_source: bool) -> ArtifactInfo:
    return ArtifactInfo(
        run_id=version.run_id,
        version=version.version,
        sha256=version.sha256,
        description=version.description,
        source=version.source if with_source else None,
        lines=line_count(version.source),
    )


def register(mcp: MCPServer, research: Research, run_for: RunResolver) -> None:
    service = research.runs

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    def get_current_train_py(ctx: Context, run_id: RunId = None) -> ArtifactInfo:
        """Any task: the current train.py (source, version, sha256). Read it before editing it. Code tasks
        (codeopt-records) are worked by editing it; params tasks may change their model setup in it too."""
        return artifact_info(service.current_artifact(run_for(ctx, run_id)), with_source=True)

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    def modify_train_py(
        ctx: Context,
        description: Annotated[
            str, Field(min_length=1, max_length=500, description="what the change does and why, one line")
        ],
        source: Annotated[
            str | None, Field(max_length=200_000, description="the whole new file (or give edits)")
        ] = None,
        edits: Annotated[
            list[Edit] | None,
            Field(max_length=50, description="search/replace edits applied in order (or give source)"),
        ] = None,
        run_id: RunId = None,
    ) -> ArtifactInfo:
        """Any task (the main tool of code tasks such as codeopt-records): change train.py with exactly one
        of `source` or `edits`, keeping the entry points and harness calls it has. Guardrails check it
        first; a rejected edit changes nothing and says why. Every version is kept."""
        pairs = None if edits is None else [(e.search, e.replace) for e in edits]
        version = service.modify_artifact(run_for(ctx, run_id), description, source, pairs)
        return artifact_info(version, with_source=False)

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    def replace_function(
        ctx: Context,
        name: Annotated[str, Field(min_length=1, max_length=200, description="the function's name")],
        source: Annotated[
            str,
            Field(
                min_length=1,
                max_length=100_000,
                description="its new def, same name and parameters (imports before it go to the top)",
            ),
        ],
        description: Annotated[
            str | None, Field(max_length=500, description="what the change does and why, one line")
        ] = None,
        run_id: RunId = None,
    ) -> ArtifactInfo:
        """Code tasks: replace one top-level function of train.py with a new definition, checked by the
        AST (one def, the same name and parameters); everything else in the file stays as it was. The
        guardrails check the result; a refused one changes nothing and says why. Every version is kept."""
        version = research.runs.replace_function(run_for(ctx, run_id), name, source, description)
        return artifact_info(version, with_source=False)

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    def profile_train_py(ctx: Context, run_id: RunId = None) -> ProfileResult:
        """Code tasks: where the current train.py spends its time on the task's own input: each function's
        share, and the slowest lines of the hottest one. The profile its benchmark took, or one taken now
        in the sandbox (no budget used; apart from any timing, so it decides nothing)."""
        run = run_for(ctx, run_id)
        current = service.current_artifact(run)
        found = service.profile(run)
        note = (
            None
            if found is not None
            else "no profile: this task does not profile, or this version does not run"
        )
        return ProfileResult(run_id=run, version=current.version, profile=found, note=note)

    @mcp.tool(annotations=ADDITIVE)
    @refusals
    def revert_train_py(
        ctx: Context,
        version: Annotated[
            int, Field(ge=1, le=1_000_000, description="the version to restore; 1 = the original")
        ],
        run_id: RunId = None,
    ) -> ArtifactInfo:
        """Any task: restore an earlier version of train.py (as a new version)."""
        return artifact_info(service.revert_artifact(run_for(ctx, run_id), version), with_source=False)
