"""Every browser test needs Debian's chromium: skipped locally without it, failed under CI."""

from __future__ import annotations

import pytest
from ci_policy import unavailable
from dashboard_driver import browser_missing


@pytest.fixture(scope="module", autouse=True)
def browser_available() -> None:
    reason = browser_missing()
    if reason is not None:
        unavailable(reason)
