"""The one error type users see: its message says what is wrong and how to fix it."""

from __future__ import annotations


class CpdecompError(ValueError):
    """Bad input or an impossible request; the message is meant for the user, in one line.

    `reason` is a short code (`too_large`, `encoding`, `binary`, ...) that logs may carry: the
    message can name columns and files, the code names only the kind of refusal.
    """

    reason: str = "invalid"

    def __init__(self, message: str = "", *, reason: str | None = None) -> None:
        super().__init__(message)
        if reason is not None:
            self.reason = reason
