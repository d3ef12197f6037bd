"""What a test does when a real part it needs is missing (chromium, PostgreSQL, nginx, root):
it is skipped on a developer's machine and fails under CI (`CI` set), where `.ci/run` installs
and starts every part, so a missing install step cannot pass as a skip."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

POSTGRES_URL_VAR = "CPDECOMP_TEST_POSTGRES_URL"
"""The test PostgreSQL server's URL, which .ci/run exports after starting the server."""


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in {"", "0", "false", "no"}


def unavailable(reason: str) -> NoReturn:
    """Fail under CI, skip elsewhere."""
    if in_ci():
        pytest.fail(f"CI must run this test, but {reason}")
    pytest.skip(reason)


def environment_url(variable: str = POSTGRES_URL_VAR) -> str:
    """A server URL from the environment, or unavailable()."""
    url = os.environ.get(variable, "").strip()
    if not url:
        unavailable(f"{variable} is not set: no PostgreSQL server to test against "
                    "(.ci/run starts one)")
    return url
