"""Installed versions of the libraries a result depends on, for reports and cache keys."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import metadata

REPORTED = ("cpdecomp", "numpy", "pandas", "scikit-learn", "scipy")


def library_versions(names: Sequence[str] = REPORTED) -> dict[str, str]:
    """{distribution: version}, 'not installed' where it is missing."""
    return dict(_versions(tuple(names)))


@cache
def _versions(names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    # Remembered for the process: every chunk's report carries the versions, and reading a
    # distribution's metadata costs ~2 ms (a cohort of 10^5 spent 4.6 s on it).
    found = []
    for name in names:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            found.append((name, "not installed"))
    return tuple(found)
