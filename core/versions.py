"""Installed versions of the libraries a result depends on, for reports and cache keys."""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata

REPORTED = ("cpdecomp", "numpy", "pandas", "scikit-learn", "scipy")


def library_versions(names: Sequence[str] = REPORTED) -> dict[str, str]:
    """{distribution: version}, 'not installed' where it is missing."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found
