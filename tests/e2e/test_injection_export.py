"""An injection upload through the real page: no request leaves it, and the review queue's CSV,
as chromium downloads it, never starts a line or a cell with = + - @ under any line end.

Patient ids and a feature name carry formulas after carriage returns, non-breaking spaces and
separators, and Markdown images and links pointing at an outside address. The page is opened,
the table uploaded and run, the queue exported; every request chromium makes is recorded, and
none may go anywhere but the dashboard itself.
"""

from __future__ import annotations

import csv
import os
import re
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from dashboard_driver import STEP_TIMEOUT, launch, open_page, streamlit_server, upload_and_run

OUTSIDE = "10.255.255.1"
"""An address no test machine serves: a request to it is a request leaving the page."""
IDS = ["=HYPERLINK(\"http://10.255.255.1/x\",\"ok\")", "+1+1", "-2+3", "@SUM(1)",
       "\u00a0=1+1", "x\r@SUM(2)", "y\n=cmd|' /C calc'!A0", "z\u2028+1", "ok, =1",
       f"![x](http://{OUTSIDE}/img.png)", f"[link](http://{OUTSIDE}/)",
       f"<img src=http://{OUTSIDE}/i.png>"]
LINE_ENDS = ["\r\n", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028",
             "\u2029"]
STARTS = ("=", "+", "-", "@", "＝", "＋", "－", "＠", "−")

pytestmark = pytest.mark.slow


def injection_csv(path: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 120
    ids = [IDS[i % len(IDS)] + f" #{i}" for i in range(n)]
    x = rng.normal(size=(n, 3))
    y = x[:, 0] + 0.5 * rng.normal(size=n) + 10
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(["patient_id", "x1\r@SUM(1)", f"![a](http://{OUTSIDE}/h.png)", "x3",
                         "outcome"])
        for i in range(n):
            writer.writerow([ids[i], *x[i].round(4), round(float(y[i]), 4)])
    return path


def starts_a_formula(piece: str) -> bool:
    stripped = piece.lstrip(" \t\"\u00a0\u2000\u2001\u2002\u2003\u2009\u202f\u205f\u200b"
                            "\ufeff\u3000")
    if not stripped.startswith(STARTS):
        return False
    try:
        float(stripped.rstrip('"'))
    except ValueError:
        return True
    return False  # a negative number in a numeric column


def test_an_injection_upload_exports_a_safe_csv_and_sends_nothing_outside(tmp_path) -> None:
    from playwright.sync_api import expect, sync_playwright

    table = injection_csv(tmp_path / "injection.csv")
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache")}
    with streamlit_server(environment, tmp_path / "streamlit.log") as (url, _), \
            sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            context = browser.new_context(accept_downloads=True,
                                          viewport={"width": 1280, "height": 900})
            requested: list[str] = []
            context.on("request", lambda request: requested.append(request.url))
            page = context.new_page()
            upload_and_run(page, url, table, "outcome", 3)
            for name in ("Cohort", "Patient", "Review queue"):
                open_page(page, name)
            button = page.locator(".st-key-download_queue_csv button")
            expect(button).to_be_visible(timeout=STEP_TIMEOUT)
            with page.expect_download(timeout=STEP_TIMEOUT) as started:
                button.click()
            text = Path(started.value.path()).read_bytes().decode("utf-8-sig")
        finally:
            browser.close()
    home = urlparse(url).netloc
    outside = [u for u in requested
               if urlparse(u).scheme in ("http", "https", "ws", "wss")
               and urlparse(u).netloc != home]
    assert outside == [], outside[:5]
    # The queue (its flagged patients) carries injected ids, and injected feature names as
    # the drivers.
    assert re.search(r"#\d+", text) and ("SUM(1)" in text or "h.png" in text), text[:300]
    for line_end in [*LINE_ENDS, None]:
        lines = text.splitlines() if line_end is None else text.split(line_end)
        pieces = [p for line in lines for p in [line, *re.split("[,;\t]", line)]]
        bad = [p for p in pieces if starts_a_formula(p)]
        assert bad == [], (repr(line_end), bad[:5])
