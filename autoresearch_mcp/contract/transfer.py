"""A run as one JSON document: what `autoresearch-mcp export --format json` writes and `autoresearch-mcp
import` reads, so that a run can move between databases and machines.

The run and its experiments are the records the tools return; `train_py` holds every version of the
run's train.py (source included) and `notes` its notes. Older exports without `train_py` and `notes`
still import when the run never changed its train.py (the task's original is taken as v1).
"""

from typing import Any

from pydantic import BaseModel, Field

from autoresearch_mcp.contract.models import ArtifactVersion, Experiment, Note, Run


class RunDocument(BaseModel):
    run: Run
    note: str | None = Field(default=None, description="e.g. that the scripted test double drove the run")
    experiments: list[Experiment] = Field(default_factory=list, description="in iteration order")
    train_py: list[ArtifactVersion] = Field(default_factory=list, description="every version, v1 first")
    notes: list[Note] = Field(default_factory=list, description="in the order they were written")


def run_documents(data: Any) -> list[RunDocument]:
    """The runs in an exported file: one document, or a list of them."""
    items = data if isinstance(data, list) else [data]
    return [RunDocument.model_validate(item) for item in items]
