"""Covertype for hpo-covertype: where the rows come from, and the paper's fixed split.

Three sources, chosen by the server's data setting (`--data`, else AUTORESEARCH_COVTYPE):
- nothing: the 20,000-row sample shipped inside the package (covtype_sample/, with its provenance),
  so the task runs offline on a bare machine;
- `full`: the real set, through `sklearn.datasets.fetch_covtype` (downloaded once, then cached);
- a path: a CSV of the same format (54 feature columns + Cover_Type).

The split is made once per data source and cached as .npz in the data directory. The training data
and the test *features* go to the sandboxed training script; the test labels never leave this process,
so a training script cannot score itself. scikit-learn and pandas are imported only here, when data is
first loaded: a server answers its handshake without paying for them.
"""

import hashlib
import os
import warnings
from dataclasses import dataclass
from functools import lru_cache
from importlib.resources import as_file, files
from pathlib import Path

import numpy as np

from autoresearch_mcp.contract.env import ENV_COVTYPE, FULL_COVTYPE, data_dir
from autoresearch_mcp.contract.errors import ResearchError

SUBSAMPLE_ROWS = 20_000
SPLIT_SEED = 42
TEST_FRACTION = 0.2
N_FEATURES = 54
N_CLASSES = 7
SHIPPED = files(__package__) / "covtype_sample" / "covtype_20k.csv.gz"


@dataclass(frozen=True)
class Split:
    source: str  # where it came from, without a directory: "csv:covtype.csv.gz" or "sklearn.fetch_covtype"
    digest: str  # of the training half and the test features: the same split, wherever it was read
    features_path: Path  # npz with X_train, y_train, X_test (no test labels)
    y_test: np.ndarray
    n_train: int
    n_test: int


def unavailable(detail: str) -> ResearchError:
    """The data cannot be read: what went wrong and which setting fixes it, for the server's operator
    (task.py tells a model only that the data is missing here, and whom to tell)."""
    return ResearchError(
        f"Covertype data is unavailable ({detail}): give the server --data PATH (a CSV of 54 feature "
        f"columns + Cover_Type) or --data {FULL_COVTYPE} (the real set through sklearn's fetch_covtype, "
        f"downloaded once), or set {ENV_COVTYPE}; with neither, it uses the 20,000-row sample it ships",
        kind="unavailable",
    )


def load_raw(data: str | None) -> tuple[np.ndarray, np.ndarray, str]:
    """Features (n, 54) float32, labels 0..6, and a description of the source."""
    setting = data or None
    if setting is None:
        with as_file(SHIPPED) as path:
            return _load_csv(path)
    if setting == FULL_COVTYPE:
        return _fetch_full()
    return _load_csv(Path(setting))


def _fetch_full() -> tuple[np.ndarray, np.ndarray, str]:
    from sklearn.datasets import fetch_covtype

    try:
        with warnings.catch_warnings():  # its "Retry downloading" warnings would reach a host's stderr
            warnings.simplefilter("ignore", UserWarning)
            bunch = fetch_covtype()
    except OSError as exc:  # URLError and friends: no network, no cache
        raise unavailable(f"fetch_covtype failed ({type(exc).__name__}): it needs the network once") from exc
    return bunch.data.astype(np.float32), bunch.target.astype(np.int64) - 1, "sklearn.fetch_covtype"


def _load_csv(path: Path) -> tuple[np.ndarray, np.ndarray, str]:
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
    return frame.to_numpy(dtype=np.float32), y, f"csv:{path.name}"  # no directory: the model sees it


@lru_cache(maxsize=4)
def _split_arrays(data: str | None) -> tuple[str, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The paper's protocol: stratified 20,000-row subsample (seed 42) if larger, stratified 80/20."""
    from sklearn.model_selection import train_test_split

    X, y, source = load_raw(data)
    if len(y) > SUBSAMPLE_ROWS:
        X, _, y, _ = train_test_split(X, y, train_size=SUBSAMPLE_ROWS, stratify=y, random_state=SPLIT_SEED)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=TEST_FRACTION, stratify=y, random_state=SPLIT_SEED
    )
    return source, X_train, y_train, X_test, y_test


def prepare_split(data: str | None) -> Split:
    """The split, with its training half and test features cached as .npz in the data directory."""
    source, X_train, y_train, X_test, y_test = _split_arrays(data)
    digest = hashlib.sha256(X_train.tobytes() + y_train.tobytes() + X_test.tobytes()).hexdigest()[:16]
    cache = data_dir() / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    features_path = cache / f"covtype-split-{digest}.npz"
    if not features_path.exists():
        tmp = cache / f"covtype-split-{digest}.{os.getpid()}.tmp.npz"
        np.savez(tmp, X_train=X_train, y_train=y_train, X_test=X_test)
        os.replace(tmp, features_path)
    return Split(source, digest, features_path, y_test, len(y_train), len(y_test))
