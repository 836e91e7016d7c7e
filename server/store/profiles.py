"""Profiles of a run's train.py versions, kept by the text's sha256 (a cache: the profile of a text is
measured once per run, by its first benchmark or by profile_train_py)."""

from autoresearch_mcp.contract.profile import Profile
from autoresearch_mcp.server.store.db import Database, now


class ProfileRecords:
    def __init__(self, db: Database) -> None:
        self.db = db

    def put(self, run_id: str, profile: Profile) -> None:
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO profiles (run_id, sha256, profile_json, created_at) VALUES (?, ?, ?, ?)",
                (run_id, profile.sha256, profile.model_dump_json(), now()),
            )

    def get(self, run_id: str, sha256: str) -> Profile | None:
        row = (
            self.db.reader()
            .execute("SELECT profile_json FROM profiles WHERE run_id = ? AND sha256 = ?", (run_id, sha256))
            .fetchone()
        )
        return None if row is None else Profile.model_validate_json(row["profile_json"])
