"""Long runs in a second: a run of n toy-quadratic experiments written through the import path
(store.transfer), for the tests that compare a short run with a long one. Deterministic: the same n
gives the same run, and every n ends the same way (the last experiments, the best, the streak)."""

from autoresearch_mcp.contract.models import BestResult, Experiment, Run
from autoresearch_mcp.contract.transfer import RunDocument
from autoresearch_mcp.server.store import Store
from autoresearch_mcp.server.store.transfer import import_run
from toy_task import SOURCE, ToyTask


def toy_document(n: int, run_id: str = "r-0000000001", budget: int | None = None) -> RunDocument:
    """n experiments: metrics rising slowly with noise, every 7th a crash, and the best at #n-3 (so
    the last three lines and the failure streak read the same for every n >= 4)."""
    experiments = []
    for i in range(1, n + 1):
        crash = i % 7 == 0 and i != n - 3
        metric = None if crash else -1.0 + i / (n + 1) * 0.5 + ((i * 7919) % 101) / 10_000
        if i == n - 3:
            metric = 0.0
        # the golden-ratio sequence never repeats a value (no two experiments are the same repeat)
        params = {
            "x": round(-10 + 20 * ((i * 0.6180339887) % 1), 6),
            "y": round(i % 20 - 10.0, 1),
            "sleep": 0.0,
        }
        experiments.append(
            Experiment(
                id=i,
                run_id=run_id,
                iteration=i,
                params=params,
                artifact_version=1,
                status="crash" if crash else "ok",
                metrics={} if crash else {"score": metric},
                metric=metric,
                kept=i == n - 3,
                note=None,
                error_tail="Traceback ...\nValueError: x=9 always crashes" if crash else None,
                started_at=f"2026-01-01T00:00:00.{i:09d}+00:00",
                finished_at=f"2026-01-01T00:00:01.{i:09d}+00:00",
                duration_s=0.01,
            )
        )
    best = experiments[n - 4] if n >= 4 else None
    run = Run(
        id=run_id,
        name="bulk",
        task="toy-quadratic",
        status="running",
        budget=budget or n + 100,
        used=n,
        target=None,
        seed=42,
        metric_name="score",
        direction="max",
        best=None
        if best is None or best.metric is None
        else BestResult(iteration=best.iteration, metric=best.metric, params=best.params, artifact_version=1),
        created_at="2026-01-01T00:00:00.000+00:00",
        config={"metric": "score", "direction": "max", "options": ToyTask({}).options()},
    )
    return RunDocument(run=run, experiments=experiments)


def bulk_run(store: Store, n: int, run_id: str = "r-0000000001", budget: int | None = None) -> str:
    return import_run(store, toy_document(n, run_id, budget), lambda task: SOURCE)
