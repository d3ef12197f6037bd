"""Clinicians' reviews of flagged cases, kept in SQLite or PostgreSQL so they survive a restart.

Reviews are an append-only history: marking a case reviewed, or reopening it, adds an event with
its note; nothing is overwritten, so who said what and when stays on record, and two clinicians
reviewing the same case at once both keep their notes. A case's state is its latest event.
Events are kept per dataset key (a content hash of the data and the target), so the same patient
id in another dataset has its own history.

Where the events are kept is one setting, $CPDECOMP_REVIEW_DB:

* a `postgresql://` (or `postgres://`) URL: a PostgreSQL database shared by every clinician,
  e.g. `postgresql://cpdecomp@db.hospital.internal:5432/cpdecomp?sslmode=verify-full`. Leave the
  password out of the URL and give it to libpq as `PGPASSWORD` or in a `PGPASSFILE`; a password
  that is in the URL is replaced by *** in every message;
* anything else: the path of an SQLite file, for one machine;
* unset or empty: reviews.sqlite3 in the user's data folder.

    store = ReviewStore()                     # $CPDECOMP_REVIEW_DB, or the user's data folder
    store.record(key, "P0042", "reviewed", note="checked labs")
    store.latest(key)["P0042"].note

Nothing here logs: notes, patient ids and names stay in the database.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from cpdecomp.app.reviews.events import (
    MAX_NAME,
    MAX_NOTE,
    SCHEMA_VERSION,
    STATUSES,
    Backend,
    ReviewEvent,
    Status,
)
from cpdecomp.app.reviews.postgres import PostgresBackend, redact
from cpdecomp.app.reviews.sqlite import SQLiteBackend
from cpdecomp.core.errors import CpdecompError

__all__ = ["ENV_VAR", "MAX_NOTE", "SCHEMA_VERSION", "STATUSES", "ReviewEvent", "ReviewStore",
           "Status", "configured_location", "default_path", "redact", "user_data_dir"]

ENV_VAR = "CPDECOMP_REVIEW_DB"
HINT = f"set {ENV_VAR} to a writable file path or a postgresql:// URL"

BACKENDS: dict[str, Callable[[str, str], Backend]] = {
    "postgresql": PostgresBackend,
    "postgres": PostgresBackend,
}
"""Back ends chosen by the location's URL scheme; a location without one is an SQLite path."""


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
    """reviews.sqlite3 in the user's data folder, where reviews go when nothing is set."""
    return user_data_dir() / "reviews.sqlite3"


def configured_location() -> str:
    """$CPDECOMP_REVIEW_DB (a file path or a database URL), else the default file."""
    return os.environ.get(ENV_VAR, "").strip() or str(default_path())


def _open_backend(location: str) -> Backend:
    scheme, separator, _ = location.partition("://")
    if not separator:
        return SQLiteBackend(Path(location).expanduser(), HINT)
    if scheme.lower() not in BACKENDS:
        raise CpdecompError(f"{ENV_VAR} names a {scheme!r} database; cpdecomp keeps reviews in "
                            "an SQLite file (give its path) or in PostgreSQL (postgresql://…)")
    return BACKENDS[scheme.lower()](location, HINT)


class ReviewStore:
    """Review events in the database at `location` (default: `configured_location()`)."""

    def __init__(self, location: str | Path | None = None) -> None:
        self._backend = _open_backend(
            str(location) if location is not None else configured_location())

    @property
    def location(self) -> str:
        """Where the events are: a file path, or the URL without its password."""
        return self._backend.description

    def record(self, dataset_key: str, patient_id: str, status: Status, note: str = "",
               reviewer: str = "", label: str = "") -> ReviewEvent:
        """Append an event to a case's history (one transaction) and return it."""
        if status not in STATUSES:
            raise CpdecompError(f"unknown review status {status!r}; use one of {STATUSES}")
        if not dataset_key or not str(patient_id):
            raise CpdecompError("a review needs a dataset and a patient")
        event = ReviewEvent(
            dataset_key=dataset_key, patient_id=str(patient_id), status=status,
            note=note.strip()[:MAX_NOTE], reviewer=reviewer.strip()[:MAX_NAME],
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        self._backend.append(event, label[:MAX_NAME])
        return event

    def history(self, dataset_key: str, patient_id: str | None = None) -> list[ReviewEvent]:
        """Events of a dataset (or of one case), oldest first."""
        return self._backend.events(dataset_key,
                                    None if patient_id is None else str(patient_id))

    def latest(self, dataset_key: str) -> dict[str, ReviewEvent]:
        """Each case's latest event: its current state."""
        latest: dict[str, ReviewEvent] = {}
        for event in self.history(dataset_key):
            latest[event.patient_id] = event
        return latest
