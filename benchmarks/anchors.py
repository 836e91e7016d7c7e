"""Quality anchors for hpo-covertype: random search and Optuna's TPE sampler on the same split, metric,
sandbox and search space as the agents, so an agent's best F1 can be read against what a user would
otherwise run.

Every trial is a real experiment through the server's run logic (RunService: same sandboxed train.py,
same scoring), recorded in a run of its own. The search space is the practitioner's prior the scripted
backend draws from (inside HPOParams' hard bounds; learning_rate on a log scale). TPE and random search
choose trial k from trials 1..k-1 only, so the best of the first 15 trials of a 50-trial study *is* a
15-trial study: one 50-trial study per method and seed gives both budgets.

    python benchmarks/anchors.py --seeds 42,123,456 --trials 50

--jobs N runs N studies at once, each in its own process; on a small machine pair it with --threads 1
so that N single-threaded trainings share the cores without oversubscription.
"""

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import optuna

from autoresearch_mcp.client.llm.scripted_params import ParamSpace
from autoresearch_mcp.server.research import Research
from autoresearch_mcp.server.settings import ServerSettings
from autoresearch_mcp.server.store import Store

LOG_SCALE = {"learning_rate"}


def suggest(trial: optuna.Trial, space: ParamSpace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for name in space.names:
        lo, hi = space.prior(name)
        if space.kinds[name] is int:
            params[name] = trial.suggest_int(name, int(lo), int(hi))
        else:
            params[name] = trial.suggest_float(name, lo, hi, log=name in LOG_SCALE)
    return params


def run_study(service: Research, method: str, seed: int, trials: int) -> dict[str, Any]:
    sampler = (
        optuna.samplers.TPESampler(seed=seed) if method == "tpe" else optuna.samplers.RandomSampler(seed=seed)
    )
    study = optuna.create_study(direction="maximize", sampler=sampler)
    run, _ = service.runs.start_run(
        "hpo-covertype", budget=trials, target=None, seed=seed, name=f"anchor {method} {seed}"
    )
    info = service.tasks("hpo-covertype").info()
    space = ParamSpace(info.params_schema, info.scripted)
    curve: list[float] = []
    started = time.monotonic()
    for _ in range(trials):
        trial = study.ask()
        params = suggest(trial, space)
        exp = service.experiments.run_experiment(run.id, params, f"{method} trial {trial.number}").experiment
        value = exp.metric if exp.status == "ok" and exp.metric is not None else 0.0
        study.tell(trial, value)
        curve.append(max(curve[-1], value) if curve else value)
        print(
            f"{method} seed {seed}: trial {len(curve)}/{trials} F1 {value:.4f}, best {curve[-1]:.4f}",
            flush=True,
        )
    return {
        "method": method,
        "seed": seed,
        "run_id": run.id,
        "best_curve": curve,
        "wall_s": round(time.monotonic() - started, 1),
    }


def study_in_process(
    db: Path, data: str, threads: int | None, method: str, seed: int, trials: int
) -> dict[str, Any]:
    """One study with its own store connection (SQLite in WAL takes the writers in turn)."""
    settings = ServerSettings(db_path=db, covtype_path=data, hpo_threads=threads)
    store = Store(settings.db_path)
    try:
        return run_study(Research(settings, store).open(), method, seed, trials)
    finally:
        store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="Covertype CSV")
    parser.add_argument("--seeds", default="42,123,456")
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--report", default="15,50", help="budgets to report (each <= --trials)")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "anchors")
    parser.add_argument("--jobs", type=int, default=1, help="studies run at once, each in its own process")
    parser.add_argument("--threads", type=int, help="XGBoost threads per training (default: every core)")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    budgets = [int(b) for b in args.report.split(",")]
    if args.jobs < 1 or (args.threads is not None and args.threads < 1):
        sys.exit("--jobs and --threads must be at least 1")
    if any(not 1 <= b <= args.trials for b in budgets):
        sys.exit("every --report budget must be between 1 and --trials")
    db, data = args.out / "anchors.db", str(Path(args.data).resolve())
    Store(db).close()  # apply the migrations once, before the workers open the file
    plan = [(method, seed) for seed in seeds for method in ("random", "tpe")]
    pool = ProcessPoolExecutor(max_workers=args.jobs)
    try:
        futures = [pool.submit(study_in_process, db, data, args.threads, m, s, args.trials) for m, s in plan]
        studies = [f.result() for f in futures]
    finally:
        pool.shutdown(cancel_futures=True)  # a failed study stops the queued ones instead of waiting for them
    rows = []
    for method in ("random", "tpe"):
        for budget in budgets:
            bests = [s["best_curve"][budget - 1] for s in studies if s["method"] == method]
            rows.append(
                {
                    "method": method,
                    "trials": budget,
                    "seeds": seeds,
                    "best_f1_mean": round(statistics.fmean(bests), 4),
                    "best_f1_std": round(statistics.pstdev(bests), 4),
                    "best_f1_per_seed": bests,
                }
            )
    (args.out / "anchors.json").write_text(json.dumps({"rows": rows, "studies": studies}, indent=2))
    lines = ["| method | trials | best macro F1 (mean ± sd over seeds) | per seed |", "|---|---|---|---|"]
    for r in rows:
        per_seed = ", ".join(f"{v:.4f}" for v in r["best_f1_per_seed"])
        lines.append(
            f"| {r['method']} | {r['trials']} | {r['best_f1_mean']:.4f} ± {r['best_f1_std']:.4f} | {per_seed} |"
        )
    (args.out / "anchors.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
