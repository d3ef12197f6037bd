"""Review events in an SQLite file: the default, for one machine."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from cpdecomp.app.reviews.events import SCHEMA_VERSION, ReviewEvent
from cpdecomp.core.errors import CpdecompError

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


class SQLiteBackend:
    """An SQLite file of review events; every write is one transaction."""

    def __init__(self, path: Path, hint: str) -> None:
        self.path = path
        self.description = str(path)
        try:
            if not path.exists():
                self._create_private(path)
            with self._transaction() as connection:
                found = connection.execute("PRAGMA user_version").fetchone()[0]
                if found > SCHEMA_VERSION:
                    raise CpdecompError(
                        f"the review database {path} has schema version {found}, newer than "
                        f"this cpdecomp's {SCHEMA_VERSION}; upgrade cpdecomp")
                if found < SCHEMA_VERSION or not self._tables_exist(connection):
                    # Only a new or older file is written to here: a read-only (or full)
                    # database of the current version still shows its reviews.
                    connection.executescript(SCHEMA)
                    # A pragma takes no parameters; SCHEMA_VERSION is our own integer.
                    connection.execute(f"PRAGMA user_version = {int(SCHEMA_VERSION)}")
        except (OSError, sqlite3.Error) as error:
            raise CpdecompError(
                f"cannot open the review database {path} ({error}); {hint}") from error

    @staticmethod
    def _create_private(path: Path) -> None:
        """An empty file only its owner may read (notes and patient ids are in it); SQLite
        gives its journal files the database file's mode."""
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        except FileExistsError:  # another process made it first
            pass

    @staticmethod
    def _tables_exist(connection: sqlite3.Connection) -> bool:
        names = {row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        return {"datasets", "review_events"} <= names

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        # One short-lived connection per operation: Streamlit serves sessions from several
        # threads, and sqlite3 connections must not cross threads. The timeout lets a writer
        # wait for another's transaction instead of failing.
        with closing(sqlite3.connect(self.path, timeout=10)) as connection:
            connection.execute("PRAGMA foreign_keys = ON")
            with connection:  # commits on success, rolls back on an exception
                yield connection

    def append(self, event: ReviewEvent, label: str) -> None:
        try:
            with self._transaction() as connection:
                connection.execute(
                    "INSERT OR IGNORE INTO datasets (dataset_key, label, first_seen) "
                    "VALUES (?, ?, ?)", (event.dataset_key, label, event.created_at))
                connection.execute(
                    "INSERT INTO review_events (dataset_key, patient_id, status, note, reviewer, "
                    "created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (event.dataset_key, event.patient_id, event.status, event.note,
                     event.reviewer, event.created_at))
        except sqlite3.Error as error:
            # The exception's text can quote the row; say only what kind of failure it was.
            why = ("it is read-only" if "readonly" in str(error)
                   else "the disk is full" if "full" in str(error)
                   else f"it refused it ({type(error).__name__})")
            raise CpdecompError(f"the review was not saved: the database at {self.path} "
                                f"cannot take it: {why}") from error

    def events(self, dataset_key: str, patient_id: str | None) -> list[ReviewEvent]:
        query = ("SELECT dataset_key, patient_id, status, note, reviewer, created_at "
                 "FROM review_events WHERE dataset_key = ?")
        parameters: tuple[str, ...] = (dataset_key,)
        if patient_id is not None:
            query += " AND patient_id = ?"
            parameters += (patient_id,)
        try:
            with self._transaction() as connection:
                rows = connection.execute(query + " ORDER BY id", parameters).fetchall()
        except sqlite3.Error as error:
            raise CpdecompError(f"cannot read reviews from {self.path} "
                                f"({type(error).__name__})") from error
        return [ReviewEvent(*row) for row in rows]
