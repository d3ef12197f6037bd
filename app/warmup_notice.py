"""The Setup page's notice while the dashboard compiles its kernels at its first start.

After an install or an update, the dashboard's start compiles the calculations' kernels in the
background (app/startup.py, warm_kernels: `cpdecomp warmup` in a process of its own), half a
minute to a minute on 2 cores; a Run pressed meanwhile compiles what it needs itself and takes
that much longer. The notice follows the steps once a second and goes when they are done.
"""

from __future__ import annotations

import streamlit as st

from cpdecomp.app import startup

REFRESH_SECONDS = 1.0


def show() -> None:
    """The notice, while the kernels are being compiled (nothing otherwise)."""
    if startup.KERNELS.running:
        _notice()


@st.fragment(run_every=REFRESH_SECONDS)
def _notice() -> None:
    kernels = startup.KERNELS
    if not kernels.running:
        st.rerun(scope="app")  # done: the page without the notice (and no more refreshes)
    share = kernels.step / kernels.steps if kernels.steps else 0.0
    step = f"step {kernels.step} of {kernels.steps}" if kernels.steps else "starting"
    with st.container(key="kernel_warm_up"):
        st.info("**Getting ready for the first Run** (once after an install or an update): "
                "preparing the calculations takes half a minute to a minute. A Run pressed "
                "now waits that much longer; later Runs and restarts do not.",
                icon=":material/hourglass_top:")
        st.progress(share, text=f"Preparing the calculations: {step}")
