"""A plotly chart that stays mounted: a new figure for the same slot is drawn with Plotly.react
on the chart already on the page, instead of a new chart.

st.plotly_chart's element identity hashes the figure, so every patient switch tore the two
patient charts down and built them again (Plotly.newPlot: about half the browser's work of a
switch, docs/benchmarks/dashboard.md). This chart is a Streamlit components-v2 element, mounted
in the page itself (no iframe) under a fixed key per slot; when the figure changes, Streamlit
calls its JavaScript again with the new figure on the same element, and Plotly.react updates
the drawn chart in place.

A slot can also be told which figure comes next (the next patient's): the browser draws it while
idle on a second, hidden plot in the slot, and when the page then sends that figure the hidden
plot is shown in place of the other, which becomes the hidden one. A Next click then shows charts
drawn ahead instead of drawing them while the user waits (Plotly.react of the two patient charts
was 50-60 ms of the browser's main thread, and it held up the new heading's paint too).

plotly.js is Streamlit's own when the page has loaded it and its major version is the plotly
package's, else the copy in the installed plotly package (the one its figures' JSON is made
for), served by this Streamlit server: nothing is downloaded from elsewhere. A components-v2 asset
folder is declared in an installed package's pyproject.toml, which Streamlit finds for a wheel
only when the file is shipped inside a package and not at all for an editable install; a
components-v1 declaration with a local path serves a folder from any install, so that one
serves plotly's folder (the v1 component itself is never drawn).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from pathlib import Path

import plotly
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st
import streamlit.components.v1 as components_v1
from plotly.offline import get_plotlyjs_version
from streamlit import runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

PLOTLY_FOLDER = Path(plotly.__file__).parent / "package_data"
PLOTLY_SCRIPT = "plotly.min.js"
PLOTLY_VERSION = get_plotlyjs_version()
CHART_CLASS = "cpdecomp-chart"
"""The class of the divs plotly draws on (plotly adds its own `js-plotly-plot`)."""
SPARE_CLASS = "cpdecomp-upcoming"
"""The class of a slot's hidden plot, which holds the figure drawn ahead."""
SHOWN_CHARTS = f".js-plotly-plot:not(.{SPARE_CLASS})"
"""A CSS selector for the charts on show: every plotly chart but the hidden ones."""

# Why each part is there:
# * the plots found again on every call: Streamlit calls this function again with the new data
#   on the same parent element, and a new div would be a new chart;
# * plotly.js loaded once per page by a <script> tag (it is a UMD file that sets
#   window.Plotly), from a URL relative to the page as Streamlit's own assets are, so a
#   server.baseUrlPath works;
# * draws chained on one promise per plot: a slow draw is never overtaken by an older figure;
# * a plot remembers the figure text it was given and the one it has finished drawing, so the
#   same figure sent again (a rerun that did not change it) is not drawn again, and a spare is
#   shown only once its drawing is done (else the plot on show draws the figure as usual);
# * the spare plot drawn in requestIdleCallback: ahead-of-time drawing must not compete with
#   the paint of what the user asked for; absolutely placed and invisible, so it takes no room,
#   gets no pointer events (no hover) and is not read out (aria-hidden);
# * the figure drawn ahead shown when the page's subheading names it (a MutationObserver), not
#   only when the slot's own update comes: Streamlit draws a rerun's elements as their messages
#   arrive, and the slot's comes a frame or two after the heading's;
# * the lasso and box select buttons removed and no plotly logo or cloud link, as
#   st.plotly_chart does for a chart without selections, and a fullscreen button added, as
#   st.plotly_chart has one;
# * a ResizeObserver on the slot: both plots follow its column's width (a sidebar folded, a
#   window resized), as st.plotly_chart's does.
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

// The wait before a figure is drawn ahead: the drawing (20-40 ms of the main thread) waits
// for the page to settle after a switch, its paint and anything the user does next.
const AHEAD_DELAY_MS = 250;

function addPlot(slot) {
  const plot = document.createElement("div");
  plot.className = "__CHART_CLASS__";
  slot.appendChild(plot);
  return plot;
}

function show(plot) {
  plot.classList.remove("__SPARE_CLASS__");
  plot.removeAttribute("aria-hidden");
  plot.style.cssText = "width: 100%";
}

function hide(plot) {
  plot.classList.add("__SPARE_CLASS__");
  plot.setAttribute("aria-hidden", "true");
  plot.style.cssText = "width: 100%; position: absolute; top: 0; left: 0; "
    + "visibility: hidden; pointer-events: none";
}

// Streamlit's charts have a fullscreen button; these get one in plotly's own toolbar (shown on
// hover, as Streamlit's is). Fullscreen is the slot's, not a plot's: a plot drawn ahead that is
// shown while fullscreen is fitted to the screen too.
const FULLSCREEN_ICON = {
  width: 1000, height: 1000,
  path: "M0 0h380v120H120v260H0z M620 0h380v380H880V120H620z M0 620h120v260h260v120H0z "
    + "M880 620h120v380H620V880h260z",
};

function heightFor(slot, plot) {
  return document.fullscreenElement === slot ? window.innerHeight : plot._cpdecompHeight;
}

function fit(slot, plot, Plotly) {
  // The plot on show takes the screen's height in fullscreen and its figure's otherwise.
  // Its width follows the slot (the screen's in fullscreen): a height given to relayout alone
  // would also fix the width at what it was.
  const height = heightFor(slot, plot);
  if (plot._fullLayout && height && (plot._fullLayout.height !== height
                                     || plot._fullLayout.width !== slot.clientWidth)) {
    return Plotly.relayout(plot, { height, width: null, autosize: true });
  }
}

function draw(plot, text, data) {
  plot._cpdecompFigure = text;
  plot._cpdecompReady = null;
  const figure = JSON.parse(text);
  const slot = plot.parentElement;
  plot._cpdecompHeight = figure.layout.height;
  const remove = new Set([...(data.config.modeBarButtonsToRemove || []),
                          "lasso2d", "select2d", "sendChartToCloud"]);
  const fullscreen = {
    name: "fullscreen", title: "View fullscreen", icon: FULLSCREEN_ICON,
    click: () => (document.fullscreenElement === slot ? document.exitFullscreen()
                  : slot.requestFullscreen()),
  };
  const config = { showSendToCloud: false, ...data.config, responsive: true,
                   modeBarButtonsToRemove: [...remove], modeBarButtonsToAdd: [fullscreen] };
  plot._cpdecompDrawn = (plot._cpdecompDrawn || Promise.resolve())
    .then(() => loadPlotly(data.script, data.version))
    .then((Plotly) => {
      if (!plot.isConnected) return;
      const layout = { ...figure.layout, height: heightFor(slot, plot) };
      return Plotly.react(plot, figure.data, layout, config).then(() => {
        if (plot._cpdecompFigure === text) plot._cpdecompReady = text;
      });
    })
    .catch((error) => { console.error("cpdecomp chart:", error); });
  return plot._cpdecompDrawn;
}

function forgetAhead(spare) {
  // A spare whose drawing has not started is not worth waiting for: forget it.
  if (spare && spare._cpdecompAhead) {
    clearTimeout(spare._cpdecompAhead.timer);
    if (spare._cpdecompAhead.idle !== null) cancelIdleCallback(spare._cpdecompAhead.idle);
    spare._cpdecompAhead = null;
    spare._cpdecompFigure = null;
  }
}

function front(slot) {
  return slot.querySelector(":scope > .__CHART_CLASS__:not(.__SPARE_CLASS__)");
}

function spareOf(slot) {
  return slot.querySelector(":scope > .__CHART_CLASS__.__SPARE_CLASS__");
}

function countShow(slot, plot) {
  slot._cpdecompShows = (slot._cpdecompShows || 0) + 1;
  plot.dataset.draws = String(slot._cpdecompShows);
}

function showSpare(slot, plot, spare) {
  // Drawn ahead: show it, and keep the other plot as the spare. Put first in the slot, so
  // that the slot's first chart is the one on show.
  show(spare);
  hide(plot);
  slot.insertBefore(spare, plot);
  countShow(slot, spare);
  if (document.fullscreenElement === slot) {
    window.cpdecompPlotly.then((Plotly) => fit(slot, spare, Plotly));
  }
}

function watchCue(slot, cue) {
  // The page's subheading naming what the figure drawn ahead shows (the next patient) is
  // often drawn a React commit or two before this slot's own call brings that figure: show
  // the figure as that subheading is drawn (a MutationObserver runs before the paint), so
  // that the heading and its charts appear in one frame. The call then finds its figure on
  // show and draws nothing; if another figure comes, it is drawn as usual.
  if (slot._cpdecompCue) slot._cpdecompCue.disconnect();
  slot._cpdecompCue = null;
  const cued = () => Array.from(document.querySelectorAll(cue.selector))
    .some((heading) => heading.textContent.includes(cue.text));
  // (a heading on the page already is not a cue: it is not what comes next)
  if (!cue || cued()) return;
  const observer = new MutationObserver(() => {
    if (!cued()) return;
    observer.disconnect();
    slot._cpdecompCue = null;
    const plot = front(slot);
    const spare = spareOf(slot);
    if (plot && spare && spare._cpdecompReady && spare._cpdecompReady === spare._cpdecompFigure) {
      showSpare(slot, plot, spare);
    }
  });
  observer.observe(document.body, { childList: true, subtree: true, characterData: true });
  slot._cpdecompCue = observer;
}

export default function ({ data, parentElement }) {
  const slot = parentElement;
  const call = (slot._cpdecompCalls || 0) + 1;
  slot._cpdecompCalls = call;
  slot.style.position = "relative";  // the spare's box
  let plot = front(slot);
  let spare = spareOf(slot);
  if (!plot) {
    plot = addPlot(slot);
    show(plot);
  }
  if (spare && spare._cpdecompReady === data.figure) {
    showSpare(slot, plot, spare);
    [plot, spare] = [spare, plot];
  } else if (plot._cpdecompFigure !== data.figure) {
    forgetAhead(spare);
    draw(plot, data.figure, data).then(() => {
      if (!plot.classList.contains("__SPARE_CLASS__")) countShow(slot, plot);
    });
  }
  if (data.upcoming && data.upcoming !== data.figure
      && (!spare || spare._cpdecompFigure !== data.upcoming)) {
    if (!spare) {
      spare = addPlot(slot);
      hide(spare);
    }
    forgetAhead(spare);
    const ahead = spare;
    ahead._cpdecompFigure = data.upcoming;
    ahead._cpdecompAhead = { timer: null, idle: null };
    ahead._cpdecompAhead.timer = setTimeout(() => {
      ahead._cpdecompAhead.idle = requestIdleCallback(() => {
        ahead._cpdecompAhead = null;
        draw(ahead, data.upcoming, data);
      }, { timeout: 2000 });
    }, AHEAD_DELAY_MS);
  }
  watchCue(slot, data.upcoming && data.upcoming !== data.figure ? data.cue : null);
  if (!slot._cpdecompFullscreen) {
    slot._cpdecompFullscreen = () => {
      slot.style.background = document.fullscreenElement === slot ? "white" : "";
      const onShow = front(slot);
      if (onShow) window.cpdecompPlotly.then((Plotly) => fit(slot, onShow, Plotly));
    };
    slot.addEventListener("fullscreenchange", slot._cpdecompFullscreen);
  }
  if (!slot._cpdecompResize) {
    slot._cpdecompResize = new ResizeObserver(() => {
      for (const each of slot.querySelectorAll(":scope > .__CHART_CLASS__")) {
        if (each.isConnected && each._fullLayout) {
          window.cpdecompPlotly.then((Plotly) => Plotly.Plots.resize(each));
        }
      }
    });
    slot._cpdecompResize.observe(slot);
  }
  return () => {
    // Streamlit runs the last call's cleanup when the element leaves the page, and an earlier
    // call's when the next call came before it had finished starting: a later call owns the
    // slot then, and its plots are left alone.
    if (slot._cpdecompCalls !== call) return;
    watchCue(slot, null);
    if (slot._cpdecompResize) slot._cpdecompResize.disconnect();
    slot._cpdecompResize = null;
    slot.removeEventListener("fullscreenchange", slot._cpdecompFullscreen);
    slot._cpdecompFullscreen = null;
    for (const each of slot.querySelectorAll(":scope > .__CHART_CLASS__")) {
      forgetAhead(each);
      // A purged plot forgets what it drew, so that a call on the same element after this
      // cleanup draws again rather than trusting an empty plot.
      each._cpdecompFigure = null;
      each._cpdecompReady = null;
      each._cpdecompDrawn = (each._cpdecompDrawn || Promise.resolve())
        .then(() => window.cpdecompPlotly)
        .then((Plotly) => { if (each._fullLayout) Plotly.purge(each); });
    }
  };
}
""".replace("__CHART_CLASS__", CHART_CLASS).replace("__SPARE_CLASS__", SPARE_CLASS)

_mount = st.components.v2.component("cpdecomp.mounted_chart", js=JS, isolate_styles=False)
"""Not isolated in a shadow root: plotly puts its style sheet (modebar, hover labels) in the
page's head, where a shadow root would not see it."""


def _plotly_files() -> str:
    """The URL path, relative to the page, that serves the plotly package's plotly.js.

    Declared once per running server, on its first chart: the declaration registers the folder
    with that server's component registry (there is none at import time under AppTest, and a
    process can run a second server), and it cannot be made at import. Not on every call: the
    declaration looks up its caller's module (inspect.getmodule), about 1 ms per chart of every
    patient switch."""
    registry = runtime.get_instance().component_registry if runtime.exists() else None
    known = None if registry is None else _served.get(registry)
    if known is not None:
        return known
    served = components_v1.declare_component("plotly_js", path=str(PLOTLY_FOLDER))
    # With server.customComponentBaseUrlPath a deployment serves components' files itself.
    folder = served.url or f"./component/{served.name}/"
    path = folder.rstrip("/") + "/" + PLOTLY_SCRIPT
    if registry is not None and get_script_run_ctx() is not None:  # registered just now
        _served[registry] = path
    return path


_served: weakref.WeakKeyDictionary[object, str] = weakref.WeakKeyDictionary()
"""Each server's (component registry's) URL path of plotly.js, once declared there."""


def figure_json(figure: go.Figure) -> str:
    """The figure's JSON, made once per figure object: the figures a page shows are kept and
    never changed (app/cases.py's `kept`), and one sent as a slot's upcoming figure is sent
    again, as its figure, on the next switch."""
    entry = _json_made.get(id(figure))
    if entry is not None and entry[0]() is figure:
        return entry[1]
    text = pio.to_json(figure, validate=False)
    with _json_lock:
        _json_made[id(figure)] = (weakref.ref(figure), text)
    # Forgotten with the figure, so that a new object at the same address is not served it.
    weakref.finalize(figure, _forget_json, id(figure))
    return text


def _forget_json(address: int) -> None:
    with _json_lock:
        entry = _json_made.get(address)
        if entry is not None and entry[0]() is None:
            del _json_made[address]


_json_made: dict[int, tuple[weakref.ref[go.Figure], str]] = {}
_json_lock = threading.Lock()


def mounted_chart(figure: go.Figure, config: Mapping[str, object], key: str,
                  upcoming: go.Figure | None = None, upcoming_heading: str | None = None
                  ) -> None:
    """Draw `figure` in the slot `key`, updating the chart already there if there is one.

    `upcoming`: the figure this slot is likely to show next, which the browser draws ahead
    while idle; showing it then costs no drawing. `upcoming_heading`: the text of the page's
    subheading (st.subheader) that is drawn when `upcoming` is due: the slot shows `upcoming`
    as soon as that subheading is on the page, in the same frame, instead of when its own
    update arrives."""
    if upcoming_heading is not None and upcoming is None:
        raise ValueError("an upcoming heading cues an upcoming figure: none was given")
    cue = None if upcoming_heading is None else {"selector": "h3", "text": upcoming_heading}
    _mount(key=key, data={"figure": figure_json(figure), "config": dict(config),
                          "upcoming": None if upcoming is None else figure_json(upcoming),
                          "cue": cue,
                          "script": _plotly_files(), "version": PLOTLY_VERSION},
           width="stretch", height="content")
