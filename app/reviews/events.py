"""What a review store keeps: append-only events, and the interface each back end implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

SCHEMA_VERSION = 1
"""Bumped whenever a back end's tables change; a store refuses a database newer than itself."""

MAX_NOTE = 4000
"""Characters kept of a note: a review note, not a document."""
MAX_NAME = 200
"""Characters kept of a reviewer's name and a dataset's label."""

Status = Literal["reviewed", "reopened"]
STATUSES: tuple[Status, ...] = ("reviewed", "reopened")


@dataclass(frozen=True)
class ReviewEvent:
    """One entry in a case's history."""

    dataset_key: str
    patient_id: str
    status: Status
    note: str
    reviewer: str
    created_at: str  # ISO 8601 in UTC, to the second


class Backend(Protocol):
    """A database holding review events. Each call is one transaction on its own connection,
    so a back end can be shared by Streamlit's session threads."""

    description: str
    """Where the events are, for messages: a file path, or a URL without its password."""

    def append(self, event: ReviewEvent, label: str) -> None:
        """Add `event` (and its dataset, labelled `label`, if new) in one transaction."""

    def events(self, dataset_key: str, patient_id: str | None) -> list[ReviewEvent]:
        """Events of a dataset, or of one case, in the order they were recorded."""
