"""Array shapes used across core, named once."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
"""Real values; shapes are given where the name is used."""

BoolArray = NDArray[np.bool_]

Coalitions = NDArray[np.bool_]
"""(n_coalitions, n_players) boolean masks: True = the player keeps the patient's value."""
