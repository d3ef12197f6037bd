"""What a worker process receives: the patient games, pickled once, explain its chunks as the
parent's copy does, without redoing per chunk what one process does once per design."""

from __future__ import annotations

import pickle

import numpy as np

from core import Explainer
from core.games.cache import GameCache


def test_unpickled_games_work_out_the_designs_players_once(diabetes_system, tmp_path):
    """numpy unpickles an array with an equal copy of its dtype, so np.asarray(a, dtype=bool)
    is a new view of it; the evaluator remembers a design's players by the array's identity,
    and a worker used to work them out again for every chunk (+40 % CPU per patient)."""
    system, patients = diabetes_system
    rows = system.fitted.encode(patients)
    games = Explainer(system, background_size=50, cache=GameCache(tmp_path))._games_for(
        "exact", 0.1, "width", None, None)
    shipped = pickle.loads(pickle.dumps(games))
    assert shipped.design.coalitions.dtype is not np.dtype(bool)  # what a worker receives
    remembered = shipped.evaluator._player_cache
    before = len(remembered)
    chunks = [rows[:20], rows[20:40], rows[40:60]]
    for chunk, (decomposition, prediction, lower, upper) in zip(
            chunks, shipped.explain_chunks(chunks), strict=True):
        here = games.explain_chunk(chunk)
        np.testing.assert_array_equal(decomposition.total, here[0].total)
        np.testing.assert_array_equal(upper - lower, here[3] - here[2])
    assert len(remembered) == before + 1  # one entry for the worker's own copy of the design
