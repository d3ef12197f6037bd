"""Driving the dashboard in AppTest: start it, read its errors, run a fast setup, make data."""

from __future__ import annotations

import base64
import io
import json
import re
import string
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from streamlit.testing.v1 import AppTest

from app.text import WORD_JOINER

ROOT = Path(__file__).resolve().parents[2]
MAIN = ROOT / "app" / "main.py"
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
MARKDOWN_ESCAPE = re.compile("\\\\([" + re.escape(string.punctuation) + "])")


def new_app() -> AppTest:
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


def mounted_figures(at: AppTest) -> dict[str, go.Figure]:
    """The page's mounted charts (app/chart_component.py) by slot key, in page order: the
    figure each was sent, as st.plotly_chart's spec is read for the other charts."""
    return {chart.key: pio.from_json(json.loads(chart.proto.json)["figure"])
            for chart in at.get("bidi_component")}
