"""A plotly chart that stays mounted: a new figure for the same slot is drawn with Plotly.react
on the chart already on the page, instead of a new chart.

st.plotly_chart's element identity hashes the figure, so every patient switch tore the two
patient charts down and built them again (Plotly.newPlot: about half the browser's work of a
switch, docs/benchmarks/dashboard.md). This chart is a Streamlit components-v2 element, mounted
in the page itself (no iframe) under a fixed key per slot; when the figure changes, Streamlit
calls its JavaScript again with the new figure on the same element, and Plotly.react updates
the drawn chart in place.

plotly.js is Streamlit's own when the page has loaded it and its major version is the plotly
package's, else the copy in the installed plotly package (the one its figures' JSON is made
for), served by this Streamlit server: nothing is downloaded from elsewhere. A components-v2 asset
folder is declared in an installed package's pyproject.toml, which Streamlit finds for a wheel
only when the file is shipped inside a package and not at all for an editable install; a
components-v1 declaration with a local path serves a folder from any install, so that one
serves plotly's folder (the v1 component itself is never drawn).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import plotly
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
import streamlit.components.v1 as components_v1
from plotly.offline import get_plotlyjs_version

PLOTLY_FOLDER = Path(plotly.__file__).parent / "package_data"
PLOTLY_SCRIPT = "plotly.min.js"
PLOTLY_VERSION = get_plotlyjs_version()
CHART_CLASS = "cpdecomp-chart"
"""The class of the div plotly draws on (plotly adds its own `js-plotly-plot`)."""

# Why each part is there:
# * one div per element, found again on every call: Streamlit calls this function again with
#   the new data on the same parent element, and a second div would be a second chart;
# * plotly.js loaded once per page by a <script> tag (it is a UMD file that sets
#   window.Plotly), from a URL relative to the page as Streamlit's own assets are, so a
#   server.baseUrlPath works;
# * draws chained on one promise per div: a slow draw is never overtaken by an older figure;
# * the lasso and box select buttons removed and no plotly logo or cloud link, as
#   st.plotly_chart does for a chart without selections;
# * a ResizeObserver: the chart follows its column's width (a sidebar folded, a window
#   resized), as st.plotly_chart's does.
JS = """
function loadPlotly(src, version) {
  // Streamlit's own plotly.js sets window.Plotly once an st.plotly_chart has been drawn (the
  // Data page's, where a session opens): with the same major version as the plotly
  // package's it draws these figures alike, and reusing it spares the browser parsing a second
  // 4.8 MB script (a first Patient visit took 4.6 s with it, against 1.0 s before). Otherwise
  // the plotly package's copy. plotly.js sets window.Plotly as it loads; we keep the one we
  // chose, whatever loads later.
  if (!window.cpdecompPlotly) {
    const major = (v) => String(v || "").split(".")[0];
    if (window.Plotly && major(window.Plotly.version) === major(version)) {
      window.cpdecompPlotly = Promise.resolve(window.Plotly);
    } else {
      window.cpdecompPlotly = new Promise((resolve, reject) => {
        const script = document.createElement("script");
        script.src = new URL(src, document.baseURI).href;
        script.onload = () => resolve(window.Plotly);
        script.onerror = () => {
          window.cpdecompPlotly = null;
          reject(new Error("plotly.js did not load"));
        };
        document.head.appendChild(script);
      });
    }
  }
  return window.cpdecompPlotly;
}

export default function ({ data, parentElement }) {
  let plot = parentElement.querySelector(":scope > .__CHART_CLASS__");
  if (!plot) {
    plot = document.createElement("div");
    plot.className = "__CHART_CLASS__";
    plot.style.width = "100%";
    parentElement.appendChild(plot);
  }
  const figure = JSON.parse(data.figure);
  const remove = new Set([...(data.config.modeBarButtonsToRemove || []),
                          "lasso2d", "select2d", "sendChartToCloud"]);
  const config = { showSendToCloud: false, ...data.config, responsive: true,
                   modeBarButtonsToRemove: [...remove] };
  plot._cpdecompDrawn = (plot._cpdecompDrawn || Promise.resolve())
    .then(() => loadPlotly(data.script, data.version))
    .then((Plotly) => {
      if (!plot.isConnected) return;
      return Plotly.react(plot, figure.data, figure.layout, config).then(() => {
        if (!plot._cpdecompResize) {
          plot._cpdecompResize = new ResizeObserver(() => {
            if (plot.isConnected && plot._fullLayout) Plotly.Plots.resize(plot);
          });
          plot._cpdecompResize.observe(parentElement);
        }
        plot.dataset.draws = String(Number(plot.dataset.draws || 0) + 1);
      });
    })
    .catch((error) => { console.error("cpdecomp chart:", error); });
  return () => {
    if (plot._cpdecompResize) plot._cpdecompResize.disconnect();
    if (plot._fullLayout) window.cpdecompPlotly.then((Plotly) => Plotly.purge(plot));
  };
}
""".replace("__CHART_CLASS__", CHART_CLASS)

_mount = st.components.v2.component("cpdecomp.mounted_chart", js=JS, isolate_styles=False)
"""Not isolated in a shadow root: plotly puts its style sheet (modebar, hover labels) in the
page's head, where a shadow root would not see it."""


def _plotly_files() -> str:
    """The URL path, relative to the page, that serves the plotly package's plotly.js.

    Declared on every call: the declaration registers the folder with the running server
    (there is none at import time under AppTest or a second server in one process), and it is
    only a dictionary entry."""
    served = components_v1.declare_component("plotly_js", path=str(PLOTLY_FOLDER))
    # With server.customComponentBaseUrlPath a deployment serves components' files itself.
    folder = served.url or f"./component/{served.name}/"
    return folder.rstrip("/") + "/" + PLOTLY_SCRIPT


def mounted_chart(figure: go.Figure, config: Mapping[str, object], key: str) -> None:
    """Draw `figure` in the slot `key`, updating the chart already there if there is one."""
    _mount(key=key, data={"figure": pio.to_json(figure, validate=False), "config": dict(config),
                          "script": _plotly_files(), "version": PLOTLY_VERSION},
           width="stretch", height="content")
