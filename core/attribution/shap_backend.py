"""Running shap's explainers on a 0/1 mask game, with our seed and without touching theirs.

shap's explainers ask for a function of feature rows. Explaining the row of ones against a
single background row of zeros makes every row they evaluate a 0/1 coalition mask, so the
function they call is the game itself. KernelExplainer and PermutationExplainer draw from
NumPy's global random state (`np.random.seed`, `np.random.choice`, `np.random.shuffle`): we set
it from our seed for the run and put the caller's state back afterwards, under a lock because
the global state is shared by every thread (the dashboard serves several sessions at once).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from cpdecomp.core.errors import CpdecompError

_GLOBAL_STATE_LOCK = threading.Lock()


@contextmanager
def global_numpy_seed(seed: int) -> Iterator[None]:
    """Seed NumPy's global random state for a shap run; restore the caller's state after."""
    if not 0 <= seed < 2**32:
        raise CpdecompError(f"shap's explainers take a seed in [0, 2^32); got {seed}")
    with _GLOBAL_STATE_LOCK:
        # shap reads the legacy global state, so that is the state to set and restore.
        saved = np.random.get_state()  # noqa: NPY002
        np.random.seed(seed)  # noqa: NPY002
        try:
            yield
        finally:
            np.random.set_state(saved)  # noqa: NPY002


def mask_instance(n_players: int) -> tuple[np.ndarray, np.ndarray]:
    """The row to explain (all ones) and the background (one row of zeros)."""
    return np.ones((1, n_players)), np.zeros((1, n_players))
