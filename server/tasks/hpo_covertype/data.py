"""Covertype for hpo-covertype: the real loader, the offline CSV, and the paper's fixed split.

The split is made once per data source and cached as .npz in the data directory. The training data
and the test *features* go to the sandboxed training script; the test labels never leave this process,
so a training script cannot score itself.
"""

import hashlib
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from autoresearch_mcp.contract.env import ENV_COVTYPE, data_dir
from autoresearch_mcp.contract.errors import ResearchError

SUBSAMPLE_ROWS = 20_000
SPLIT_SEED = 42
TEST_FRACTION = 0.2
N_FEATURES = 54
N_CLASSES = 7


@dataclass(frozen=True)
class Split:
    source: str  # where it came from, without a directory: "csv:covtype.csv.gz" or "sklearn.fetch_covtype"
    digest: str  # of the training half and the test features: the same split, wherever it was read
    features_path: Path  # npz with X_train, y_train, X_test (no test labels)
    y_test: np.ndarray
    n_train: int
    n_test: int


def missing_data_message(detail: str) -> str:
    """One line: what went wrong, then how to point at a CSV (offline) or let the download work."""
    return (
        f"Covertype data is not available ({detail}): point at a CSV of it with --data PATH or"
        f" {ENV_COVTYPE}=PATH (54 feature columns + Cover_Type), or go online once so that"
        " sklearn.datasets.fetch_covtype downloads and caches it"
    )


def load_raw(csv_path: str | None) -> tuple[np.ndarray, np.ndarray, str]:
    """Features (n, 54) float32, labels 0..6, and a description of the source."""
    path = csv_path or os.environ.get(ENV_COVTYPE)
    if path:
        return _load_csv(Path(path))
    from sklearn.datasets import fetch_covtype

    try:
        with warnings.catch_warnings():  # its "Retry downloading" warnings would reach a host's stderr
            warnings.simplefilter("ignore", UserWarning)
            bunch = fetch_covtype()
    except OSError as exc:  # URLError and friends: no network, no cache
        raise ResearchError(missing_data_message(f"the download failed: {exc}")) from exc
    return bunch.data.astype(np.float32), bunch.target.astype(np.int64) - 1, "sklearn.fetch_covtype"


def _load_csv(path: Path) -> tuple[np.ndarray, np.ndarray, str]:
    import pandas as pd

    if not path.is_file():
        raise ResearchError(missing_data_message(f"no file at {path}"))
    try:
        frame = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ResearchError(missing_data_message(f"cannot read {path}: {exc}")) from exc
    if "Cover_Type" not in frame.columns or frame.shape[1] != N_FEATURES + 1:
        raise ResearchError(
            missing_data_message(
                f"{path} has columns {list(frame.columns)[:3]}...; expected {N_FEATURES} features + Cover_Type"
            )
        )
    y = frame.pop("Cover_Type").to_numpy(dtype=np.int64) - 1
    if y.min() < 0 or y.max() >= N_CLASSES:
        raise ResearchError(missing_data_message(f"{path}: Cover_Type must be 1..{N_CLASSES}"))
    return frame.to_numpy(dtype=np.float32), y, f"csv:{path.name}"  # no directory: the model sees it


@lru_cache(maxsize=4)
def _split_arrays(csv_path: str | None) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The paper's protocol: stratified 20,000-row subsample (seed 42) if larger, stratified 80/20."""
    X, y, source = load_raw(csv_path)
    if len(y) > SUBSAMPLE_ROWS:
        X, _, y, _ = train_test_split(X, y, train_size=SUBSAMPLE_ROWS, stratify=y, random_state=SPLIT_SEED)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_FRACTION, stratify=y, random_state=SPLIT_SEED
    )
    return source, X_train, y_train, X_test, y_test


def prepare_split(csv_path: str | None) -> Split:
    """The split, with its training half and test features cached as .npz in the data directory."""
    source, X_train, y_train, X_test, y_test = _split_arrays(csv_path)
    digest = hashlib.sha256(X_train.tobytes() + y_train.tobytes() + X_test.tobytes()).hexdigest()[:16]
    cache = data_dir() / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    features_path = cache / f"covtype-split-{digest}.npz"
    if not features_path.exists():
        tmp = cache / f"covtype-split-{digest}.{os.getpid()}.tmp.npz"
        np.savez(tmp, X_train=X_train, y_train=y_train, X_test=X_test)
        os.replace(tmp, features_path)
    return Split(source, digest, features_path, y_test, len(y_train), len(y_test))
