"""Clinicians' reviews of flagged cases, kept in SQLite so they survive a restart.

Reviews are an append-only history: marking a case reviewed, or reopening it, adds an event with
its note; nothing is overwritten, so who said what and when stays on record. A case's state is
its latest event. Events are kept per dataset key (a content hash of the data and the target),
so the same patient id in another dataset has its own history.

    store = ReviewStore()                     # $CPDECOMP_REVIEW_DB, or the user's data folder
    store.record(key, "P0042", "reviewed", note="checked labs")
    store.latest(key)["P0042"].note
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from core.errors import CpdecompError

ENV_VAR = "CPDECOMP_REVIEW_DB"
SCHEMA_VERSION = 1
MAX_NOTE = 4000
"""Characters kept of a note: a review note, not a document."""

Status = Literal["reviewed", "reopened"]
STATUSES: tuple[Status, ...] = ("reviewed", "reopened")

SCHEMA = """
CREATE TABLE IF NOT EXISTS datasets (
    dataset_key TEXT PRIMARY KEY,
    label       TEXT NOT NULL DEFAULT '',
    first_seen  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS review_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    dataset_key TEXT NOT NULL REFERENCES datasets(dataset_key),
    patient_id  TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('reviewed', 'reopened')),
    note        TEXT NOT NULL DEFAULT '',
    reviewer    TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS review_events_case ON review_events (dataset_key, patient_id, id);
"""


def user_data_dir() -> Path:
    """The platform's per-user data folder for cpdecomp."""
    home = Path.home()
    if sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")
    return base / "cpdecomp"


def default_path() -> Path:
    """$CPDECOMP_REVIEW_DB if set, else reviews.sqlite3 in the user's data folder."""
    configured = os.environ.get(ENV_VAR, "").strip()
    return Path(configured).expanduser() if configured else user_data_dir() / "reviews.sqlite3"


@dataclass(frozen=True)
class ReviewEvent:
    """One entry in a case's history."""

    dataset_key: str
    patient_id: str
    status: Status
    note: str
    reviewer: str
    created_at: str


class ReviewStore:
    """An SQLite file of review events; every write is one transaction."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._transaction() as connection:
                connection.executescript(SCHEMA)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except (OSError, sqlite3.Error) as error:
            raise CpdecompError(
                f"cannot open the review database {self.path} ({error}); set {ENV_VAR} to a "
                "writable file path"
            ) from error

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # One short-lived connection per operation: Streamlit serves sessions from several
        # threads, and sqlite3 connections must not cross threads.
        with closing(sqlite3.connect(self.path, timeout=10)) as connection:
            connection.execute("PRAGMA foreign_keys = ON")
            with connection:  # commits on success, rolls back on an exception
                yield connection

    def record(self, dataset_key: str, patient_id: str, status: Status, note: str = "",
               reviewer: str = "", label: str = "") -> ReviewEvent:
        """Append an event to a case's history and return it."""
        if status not in STATUSES:
            raise CpdecompError(f"unknown review status {status!r}; use one of {STATUSES}")
        if not dataset_key or not str(patient_id):
            raise CpdecompError("a review needs a dataset and a patient")
        event = ReviewEvent(
            dataset_key=dataset_key, patient_id=str(patient_id), status=status,
            note=note.strip()[:MAX_NOTE], reviewer=reviewer.strip()[:200],
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        with self._transaction() as connection:
            connection.execute(
                "INSERT OR IGNORE INTO datasets (dataset_key, label, first_seen) VALUES (?, ?, ?)",
                (dataset_key, label[:200], event.created_at),
            )
            connection.execute(
                "INSERT INTO review_events (dataset_key, patient_id, status, note, reviewer, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                (event.dataset_key, event.patient_id, event.status, event.note, event.reviewer,
                 event.created_at),
            )
        return event

    def history(self, dataset_key: str, patient_id: str | None = None) -> list[ReviewEvent]:
        """Events of a dataset (or of one case), oldest first."""
        query = ("SELECT dataset_key, patient_id, status, note, reviewer, created_at "
                 "FROM review_events WHERE dataset_key = ?")
        parameters: tuple = (dataset_key,)
        if patient_id is not None:
            query += " AND patient_id = ?"
            parameters += (str(patient_id),)
        with self._transaction() as connection:
            rows = connection.execute(query + " ORDER BY id", parameters).fetchall()
        return [ReviewEvent(*row) for row in rows]

    def latest(self, dataset_key: str) -> dict[str, ReviewEvent]:
        """Each case's latest event: its current state."""
        latest: dict[str, ReviewEvent] = {}
        for event in self.history(dataset_key):
            latest[event.patient_id] = event
        return latest
