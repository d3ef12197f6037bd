"""Driving the dashboard in AppTest: start it, read its errors, run a fast setup, make data."""

from __future__ import annotations

import base64
import io
import re
import string
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.element_tree import Block, Html

from cpdecomp.app import html_charts
from cpdecomp.app.text import WORD_JOINER

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
MARKDOWN_ESCAPE = re.compile("\\\\([" + re.escape(string.punctuation) + "])")


def new_app() -> AppTest:
    record_drawn_figures()
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    return at.run()


def shown(markdown: str) -> str:
    """The text a Markdown element shows: names from the data are backslash-escaped."""
    return MARKDOWN_ESCAPE.sub(r"\1", markdown).replace(WORD_JOINER, "")


def errors(at: AppTest) -> list[str]:
    """Error boxes and uncaught exceptions on the current page, as shown."""
    return [shown(e.value) for e in at.error] + [str(x.value) for x in at.exception]


def run_linear(at: AppTest, **settings: object) -> AppTest:
    """Go to Setup, pick the fast linear model and a small background, press Run."""
    at.switch_page("views/setup.py").run()
    at.selectbox(key="model").set_value("linear")
    at.checkbox(key="background_auto").uncheck().run()
    at.number_input(key="background").set_value(int(settings.pop("background", 16)))
    for key, value in settings.items():
        at.session_state[key] = value
    at.button(key="run").click().run()
    return at


def csv_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False)
    return buffer.getvalue().encode()


def small_table(n: int = 120, seed: int = 0) -> pd.DataFrame:
    """A synthetic cohort: the noise grows with x2, so widths differ between patients."""
    rng = np.random.default_rng(seed)
    x1, x2, x3 = rng.normal(size=(3, n))
    y = 2 * x1 + (1 + np.abs(x2)) * rng.normal(size=n)
    return pd.DataFrame({"mrn": [f"M{i:03d}" for i in range(n)], "x1": x1, "x2": x2, "x3": x3,
                         "ward": rng.choice(["A", "B"], size=n), "outcome": y})


def figure_numbers(value) -> np.ndarray:
    """A figure's numbers: plotly sends arrays as typed binary blocks ({dtype, bdata})."""
    if isinstance(value, dict):
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
    return np.asarray(value, dtype=float)


_DRAWN: dict[str, go.Figure] = {}
"""Every figure app/html_charts.py has drawn in this process, by the HTML it made."""


def record_drawn_figures() -> None:
    """Have app/html_charts.chart remember each figure it draws (AppTest runs the app in this
    process): the Patient page sends HTML, and the tests read the numbers off the figure
    whose HTML the page shows."""
    if getattr(html_charts.chart, "records", False):
        return
    draw = html_charts.chart

    def chart(figure: go.Figure) -> str:
        page = draw(figure)
        _DRAWN[page] = figure
        return page

    chart.records = True  # type: ignore[attr-defined]
    html_charts.chart = chart  # type: ignore[assignment]


def drawn_charts(at: AppTest) -> dict[str, str]:
    """The page's HTML charts (widgets.html_view) by slot key, in page order."""
    found: dict[str, str] = {}

    def walk(node) -> None:
        for child in getattr(node, "children", {}).values():
            inside = list(getattr(child, "children", {}).values())
            if isinstance(child, Block) and child.key and len(inside) == 1 \
                    and isinstance(inside[0], Html) and "cp-chart" in inside[0].proto.body:
                found[child.key] = inside[0].proto.body
            else:
                walk(child)

    walk(at.main)
    return found


class _Table(HTMLParser):
    """An HTML table's header texts, header help (title) and cell texts."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.headers: list[str] = []
        self.help: list[str | None] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr" and self.headers:
            self.rows.append([])
        if tag in ("th", "td"):
            self._cell = []
            if tag == "th":
                self.help.append(dict(attrs).get("title"))

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            text = "".join(self._cell)
            (self.headers if tag == "th" else self.rows[-1]).append(text)
            self._cell = None


def html_in(at: AppTest, key: str) -> list[str]:
    """The HTML elements inside the container of that key (widgets.html_view's slot)."""
    found: list[str] = []

    def walk(node, inside: bool) -> None:
        for child in getattr(node, "children", {}).values():
            here = inside or (isinstance(child, Block) and child.key == key)
            if here and isinstance(child, Html):
                found.append(child.proto.body)
            walk(child, here)

    walk(at.main, False)
    return found


def shown_table(at: AppTest, key: str | None = None) -> pd.DataFrame:
    """The page's HTML table (app/html_charts.table) as shown, or the one in the slot `key`
    when the page has several: its headers, and its cells as text, or as numbers in a column
    whose every cell reads as one (a true minus sign read as -); each header's help in
    `attrs["help"]`, the cells as text in `attrs["text"]`."""
    bodies = [h.proto.body for h in at.get("html")] if key is None else html_in(at, key)
    pages = [body for body in bodies if 'class="cp-table"' in body]
    assert len(pages) == 1, pages
    parsed = _Table(pages[0])
    frame = pd.DataFrame(parsed.rows, columns=parsed.headers)
    frame.attrs["text"] = frame.copy()
    for column in frame.columns:
        numbers = pd.to_numeric(frame[column].str.replace("\u2212", "-"), errors="coerce")
        if numbers.notna().all():
            frame[column] = numbers
    frame.attrs["help"] = dict(zip(parsed.headers, parsed.help, strict=True))
    return frame


def drawn_figures(at: AppTest) -> dict[str, go.Figure]:
    """The figures of the page's HTML charts by slot key, in page order: each the figure whose
    HTML the page shows."""
    return {key: _DRAWN[page] for key, page in drawn_charts(at).items()}


