"""cpdecomp dashboard: `streamlit run app/main.py`.

Pages read top to bottom (Data -> Setup -> Cohort -> Recalibration -> Patient -> Review queue);
the logic they share lives in plain modules beside this file.
"""

from __future__ import annotations

import logging
import traceback

import streamlit as st
from streamlit.logger import get_logger

from cpdecomp.app import downloads, housekeeping, planning, state, widgets
from cpdecomp.app.text import markdown_text
from cpdecomp.core.errors import CpdecompError

# Streamlit's handler and level (logger.level) for our own event logs (`upload.read rows=…`),
# so they reach the server's log beside Streamlit's; they carry counts and durations only.
get_logger("cpdecomp")
logger = logging.getLogger("cpdecomp.app")

st.set_page_config(page_title="cpdecomp: why is this interval wide?", page_icon="📏",
                   layout="wide")

downloads.remember_session()  # downloads are served to this session's browser only
# Kept values first, defaults only for what was never set: a fragment's rerun (Next on the
# Patient page) drops the widgets it did not draw, and defaults applied first would take
# their place (α, the family, the outcome's bounds and unit back to the defaults).
state.full_run_started()
state.keep_widget_state()
state.init_session()
housekeeping.start_housekeeping()  # frees what sessions that left still hold
state.collect_run()  # a Run that ended while this session was elsewhere: its results are in

PAGES = [
    st.Page("views/data.py", title="Data", icon=":material/table:", default=True),
    st.Page("views/setup.py", title="Setup", icon=":material/tune:"),
    st.Page("views/cohort.py", title="Cohort", icon=":material/groups:"),
    st.Page("views/recalibration.py", title="Recalibration", icon=":material/compare_arrows:"),
    st.Page("views/patient.py", title="Patient", icon=":material/person:"),
    st.Page("views/queue.py", title="Review queue", icon=":material/checklist:"),
]
page = st.navigation(PAGES)

def _sidebar_status() -> None:
    """What the sidebar says about the data and the last run (drawn into its own slot)."""
    dataset = state.current_dataset()
    if dataset is not None:
        st.caption(f"Data: {markdown_text(dataset.name)}")
    if state.current_job() is not None:
        st.caption("A computation is running: Setup shows its progress and a Stop button.")
    run = st.session_state.get("last_run")
    if run is not None:
        st.caption(
            f"Last run: {markdown_text(planning.run_model_name())}, {run.options.family}, "
            f"α = {run.alpha:g}, "
            f"{run.method} on {markdown_text(run.dataset_name)}"
        )
    else:
        st.caption("No results yet: choose data, then press Run on Setup.")


def _status_key() -> tuple[object, ...]:
    dataset = state.current_dataset()
    run = st.session_state.get("last_run")
    return (None if dataset is None else dataset.name, state.current_job() is not None, id(run))


with st.sidebar:
    st.markdown("**cpdecomp** · why is this conformal interval wide?")
    # A slot, not the captions themselves: the page below may take an upload or start a run,
    # and the sidebar, drawn first, would name the earlier data until the next rerun.
    status_slot = st.empty()
    with status_slot.container():
        _sidebar_status()
status_drawn = _status_key()

# The charts' style sheet on every page (it takes no room): the first page a browser session
# opens also loads the browser's code for HTML elements and their sanitiser, which the Cohort
# and Patient pages' charts need; loaded on their first visit instead, it made that visit about
# 100 ms slower than the next ones (docs/benchmarks/dashboard.md, stop 28).
widgets.chart_styles()

try:
    page.run()
    if _status_key() != status_drawn:  # the page changed the data or the run: say so now
        with status_slot.container():
            _sidebar_status()
except CpdecompError as error:  # bad input that reached a page: say what is wrong
    st.error(markdown_text(str(error)))
except Exception as error:  # a bug: keep the app usable and the log free of patient data
    # Exception messages (ours, pandas', scikit-learn's) can quote uploaded cell values, so the
    # log gets the type and the code path only. Streamlit's stop and rerun signals are
    # BaseExceptions and pass through.
    logger.error("page %s failed with %s\n%s", page.title, type(error).__name__,
                 "".join(traceback.format_tb(error.__traceback__)))
    st.error(f"Unexpected error ({type(error).__name__}); the previous results are kept. "
             "Please report it.")
finally:
    # Also after st.stop and st.rerun: the downloads this run drew stay fetchable by this
    # session (and only by it) while the next run redraws them.
    downloads.after_run()
    state.full_run_ended()
