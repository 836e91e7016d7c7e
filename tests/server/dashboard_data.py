"""A realistic run for the dashboard tests, written through the store API and the client's transcript writer,
and a uvicorn server in a thread for the browser tests.

The run looks like an HPO run: 20 experiments (two crashes and a timeout among them), three versions of
train.py, strategy and failed-approach notes, and a stateful client transcript with one call per iteration.
The metric values come from a fixed formula with seeded noise, not from training.
"""

import random
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from autoresearch_mcp.client.llm.base import LLMRequest, LLMResponse, Message
from autoresearch_mcp.client.meter import Transcript
from autoresearch_mcp.contract.models import Experiment
from autoresearch_mcp.server.store import Store
from conftest import scripted_llm

TRAIN_V1 = """\
from harness import evaluate, load_data

X_train, X_val, y_train, y_val = load_data()


def train(params):
    import xgboost as xgb

    model = xgb.XGBClassifier(**params, tree_method="hist")
    model.fit(X_train, y_train)
    return evaluate(model, X_val, y_val)
"""
TRAIN_V2 = TRAIN_V1.replace('tree_method="hist"', 'tree_method="hist", max_bin=512')
TRAIN_V3 = TRAIN_V2.replace(
    "    model.fit(X_train, y_train)\n",
    "    weights = balanced_weights(y_train)\n    model.fit(X_train, y_train, sample_weight=weights)\n",
).replace(
    "from harness import evaluate, load_data", "from harness import balanced_weights, evaluate, load_data"
)


def record(store: Store, run_id: str, iteration: int, rng: random.Random, version: int) -> Experiment:
    """Reserve and complete one experiment the way the run service does."""
    params = {
        "learning_rate": round(rng.uniform(0.02, 0.4), 3),
        "max_depth": rng.randint(3, 12),
        "n_estimators": rng.choice([100, 200, 300, 400]),
    }
    exp = store.reserve_experiment(run_id, params, version, f"try {iteration}")
    if iteration in (5, 13):
        return store.complete_experiment(
            exp.id,
            status="crash",
            metrics={},
            metric=None,
            error_tail="xgboost.core.XGBoostError: out of memory",
            duration_s=1.2,
        )
    if iteration == 17:
        return store.complete_experiment(
            exp.id, status="timeout", metrics={}, metric=None, error_tail="killed after 60 s", duration_s=60.0
        )
    depth_fit = -((params["max_depth"] - 9) ** 2) / 200
    f1 = 0.70 + 0.02 * version + depth_fit - abs(params["learning_rate"] - 0.2) / 10 + rng.gauss(0, 0.008)
    metrics = {"macro_f1": round(f1, 4), "accuracy": round(f1 + 0.1, 4)}
    return store.complete_experiment(
        exp.id,
        status="ok",
        metrics=metrics,
        metric=metrics["macro_f1"],
        error_tail=None,
        duration_s=4 + version,
    )


def write_transcript(path: Path, run_id: str, iterations: int, token_budget: int | None = None) -> None:
    """One client session's calls, one per iteration; each line carries `token_budget`."""
    llm = scripted_llm("hpo-covertype")
    transcript = Transcript(run_id, "stateful", llm=llm, path=path, token_budget=token_budget)
    for i in range(1, iterations + 1):
        request = LLMRequest(
            system="You tune a model autonomously.",
            messages=[Message(role="user", text=f"summary after {i - 1} experiments: " + "best 0.74. " * i)],
        )
        response = LLMResponse(
            text=f"run experiment {i}", tool_calls=[], stop_reason="end_turn", usage=None, model="scripted"
        )
        transcript.record(iteration=i, request=request, response=response, latency_s=0.5)


def build_run(store: Store, transcripts: Path, experiments: int = 20, seed: int = 7) -> str:
    rng = random.Random(seed)
    run = store.create_run(
        task="hpo-covertype",
        budget=30,
        target=0.80,
        seed=42,
        name="hpo demo (synthetic metrics)",
        config={"metric": "macro_f1", "direction": "max", "options": {}},
        initial_source=TRAIN_V1,
    )
    store.notes.add(run.id, "strategy", "Start from the defaults, then search depth and learning rate.")
    version = 1
    for i in range(1, experiments + 1):
        if i == 8:
            version = store.artifacts.add(run.id, TRAIN_V2, "more histogram bins").version
            store.notes.add(run.id, "failed", "Depth above 11 crashes with out-of-memory: keep it lower.")
        if i == 15:
            version = store.artifacts.add(run.id, TRAIN_V3, "balance the classes").version
            store.notes.add(run.id, "strategy", "Class weights help the rare classes: keep them.")
        record(store, run.id, i, rng, version)
    write_transcript(transcripts / f"{run.id}-stateful.jsonl", run.id, experiments)
    return run.id


def make_run(tmp_path: Path) -> tuple[Store, Path, str]:
    store = Store(tmp_path / "runs.db")
    transcripts = tmp_path / "transcripts"
    transcripts.mkdir(exist_ok=True)
    return store, transcripts, build_run(store, transcripts)


@contextmanager
def serving(app: ASGIApp) -> Iterator[str]:
    """Serve the app on a free 127.0.0.1 port in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", ws="none"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the dashboard server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
