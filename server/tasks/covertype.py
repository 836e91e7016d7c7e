"""The shipped hpo-covertype folder's data: the server's settings for it, and its prepared copy.

The folder (builtin/hpo-covertype) holds no split: train.py must not see the held-out labels, and which
rows are held out depends on the server's data setting (`--data`, else AUTORESEARCH_COVTYPE):
- nothing: the 20,000-row sample shipped in the folder (source/, with its provenance), so the task
  runs offline on a bare machine;
- `full`: the real set, through `sklearn.datasets.fetch_covtype` (downloaded once, then cached);
- a path: a CSV of the same format (54 feature columns + Cover_Type).

The split is the paper's (a stratified 20,000-row subsample, seed 42, if larger; then a stratified
80/20), made once per data source into a copy of the folder in the data directory: data/split.npz
(X_train, y_train, X_test), which train.py reads, and secret/y_test.npy, which only the evaluator may
read. The copy also takes the server's --hpo-threads and --hpo-wall-s. scikit-learn and pandas are
imported only when a copy is first made.
"""

import hashlib
import os
import re
import shutil
import threading
import warnings
from pathlib import Path

import numpy as np
from pydantic import Field

from autoresearch_mcp.contract.env import ENV_COVTYPE, ENV_HPO_THREADS, ENV_HPO_WALL_S, FULL_COVTYPE, data_dir
from autoresearch_mcp.contract.errors import ResearchError
from autoresearch_mcp.server.tasks.base import TaskSettings

SUBSAMPLE_ROWS = 20_000
SPLIT_SEED = 42
TEST_FRACTION = 0.2
N_FEATURES = 54
N_CLASSES = 7
SAMPLE = Path("source") / "covtype_20k.csv.gz"


class CovertypeSettings(TaskSettings):
    covtype_path: str | None = Field(
        default=None, description="the Covertype CSV, or 'full'", json_schema_extra={"env": ENV_COVTYPE}
    )
    hpo_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="threads per training",
        json_schema_extra={"env": ENV_HPO_THREADS},
    )
    # A training that runs longer is killed and recorded as a timeout.
    hpo_wall_s: int = Field(
        default=600,
        ge=1,
        le=86_400,
        description="seconds per training",
        json_schema_extra={"env": ENV_HPO_WALL_S},
    )


def unavailable(detail: str) -> ResearchError:
    """The data cannot be read: what went wrong and which setting fixes it, for the server's operator."""
    return ResearchError(
        f"Covertype data is unavailable ({detail}): give the server --data PATH (a CSV of 54 feature "
        f"columns + Cover_Type) or --data {FULL_COVTYPE} (the real set through sklearn's fetch_covtype, "
        f"downloaded once), or set {ENV_COVTYPE}; with neither, it uses the 20,000-row sample it ships",
        kind="unavailable",
    )


def prepared(shipped: Path, settings: dict[str, object]) -> Path:
    """The shipped folder's copy for these settings, made once per data source, threads and wall time:
    the folder's files, its split, and its toml with the server's threads and wall time."""
    own = CovertypeSettings.model_validate(settings)
    threads = own.hpo_threads or os.cpu_count() or 1
    data = own.covtype_path or str(shipped / SAMPLE)
    source = data if data == FULL_COVTYPE else f"{data}:{_stamp(Path(data))}"
    files = sorted(p for p in shipped.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    key = hashlib.sha256(
        "\n".join(
            [source, str(threads), str(own.hpo_wall_s), *(p.read_text("latin-1") for p in files)]
        ).encode()
    ).hexdigest()[:16]
    copy = data_dir() / "tasks" / f"hpo-covertype-{key}"
    if (copy / "secret" / "y_test.npy").is_file():
        return copy
    X_train, y_train, X_test, y_test = split(data)
    # One building folder per thread: two servers in one process (or two calls of one) may prepare at once.
    building = copy.with_name(f"{copy.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.rmtree(building, ignore_errors=True)
    shutil.copytree(shipped, building, ignore=shutil.ignore_patterns("__pycache__"))
    toml = building / "autoresearch.toml"
    text = re.sub(r"(?m)^threads = \d+$", f"threads = {threads}", toml.read_text())
    toml.write_text(re.sub(r"(?m)^timeout_s = 600$", f"timeout_s = {own.hpo_wall_s}", text, count=1))
    (building / "data").mkdir()
    np.savez(building / "data" / "split.npz", X_train=X_train, y_train=y_train, X_test=X_test)
    (building / "secret").mkdir(exist_ok=True)
    np.save(building / "secret" / "y_test.npy", y_test)
    try:
        os.replace(building, copy)
    except OSError:  # another process or thread made it first
        shutil.rmtree(building, ignore_errors=True)
    return copy


def source_name(settings: dict[str, object]) -> str:
    """Where the data came from, without a directory (a run's options show it to models)."""
    data = CovertypeSettings.model_validate(settings).covtype_path
    if data == FULL_COVTYPE:
        return "sklearn.fetch_covtype"
    return f"csv:{Path(data).name if data else SAMPLE.name}"


def _stamp(path: Path) -> str:
    try:
        status = path.stat()
    except OSError:
        return "missing"
    return f"{status.st_size}:{status.st_mtime_ns}"


def split(data: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The paper's protocol: stratified 20,000-row subsample (seed 42) if larger, stratified 80/20."""
    from sklearn.model_selection import train_test_split

    X, y = _fetch_full() if data == FULL_COVTYPE else _load_csv(Path(data))
    if len(y) > SUBSAMPLE_ROWS:
        X, _, y, _ = train_test_split(X, y, train_size=SUBSAMPLE_ROWS, stratify=y, random_state=SPLIT_SEED)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_FRACTION, stratify=y, random_state=SPLIT_SEED
    )
    return X_train, y_train, X_test, y_test


def _fetch_full() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import fetch_covtype

    try:
        with warnings.catch_warnings():  # its "Retry downloading" warnings would reach a host's stderr
            warnings.simplefilter("ignore", UserWarning)
            bunch = fetch_covtype()
    except OSError as exc:  # URLError and friends: no network, no cache
        raise unavailable(f"fetch_covtype failed ({type(exc).__name__}): it needs the network once") from exc
    return bunch.data.astype(np.float32), bunch.target.astype(np.int64) - 1


def _load_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    if not path.is_file():
        raise unavailable(f"no file {path.name!r} where its data setting points")
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise unavailable(f"{path.name} cannot be read as a CSV: {type(exc).__name__}") from exc
    if "Cover_Type" not in frame.columns or frame.shape[1] != N_FEATURES + 1:
        raise unavailable(
            f"{path.name} has {frame.shape[1]} columns starting {list(frame.columns)[:3]}; expected "
            f"{N_FEATURES} features + Cover_Type"
        )
    y = frame.pop("Cover_Type").to_numpy(dtype=np.int64) - 1
    if y.min() < 0 or y.max() >= N_CLASSES:
        raise unavailable(f"{path.name}: Cover_Type must be 1..{N_CLASSES}")
    return frame.to_numpy(dtype=np.float32), y
