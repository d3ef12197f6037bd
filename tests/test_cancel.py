"""core.cancel: a caller's stop check ends a computation at its next chunk, and leaves nothing
behind that changes a later answer; outside a cancellable block nothing changes.

A system masked by brute force (linear + gamma, masking="brute") is explained with a check that
says stop after a given number of checkpoints: the calibration game's rows, the brute-force
model calls and the patient chunks each ask. The explanation computed afterwards equals one
from an explainer that was never interrupted.
"""

from __future__ import annotations

import numpy as np
import pytest

from cpdecomp import Explainer, fit_system, load_table, split_rows, target_values
from cpdecomp.core.cancel import Cancelled, cancellable, checkpoint
from cpdecomp.core.games.cache import GameCache


@pytest.fixture(scope="module")
def system_and_patients():
    table = load_table("sample_data/diabetes.csv")
    y = target_values(table, "progression")
    features = [c for c in table.columns if c not in ("patient_id", "progression")]
    train, calibration, test = split_rows(len(table), (0.5, 0.25, 0.25), seed=0)
    system = fit_system(table.iloc[train], y[train], features, family="gamma", model="linear")
    system = system.conformalize(table.iloc[calibration], y[calibration])
    return system, table.iloc[test]


class StopAfter:
    def __init__(self, checkpoints: int) -> None:
        self.left = checkpoints
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        self.left -= 1
        return self.left < 0


def test_a_checkpoint_outside_a_cancellable_block_never_raises() -> None:
    checkpoint()
    with cancellable(lambda: False):
        checkpoint()
    checkpoint()


@pytest.mark.parametrize("after", [0, 3, 40])
def test_a_stop_ends_the_work_and_leaves_the_explainer_as_good_as_new(
        system_and_patients, tmp_path, after) -> None:
    system, patients = system_and_patients
    # Each explainer its own empty cache: nothing computed by one is read by the other.
    explainer = Explainer(system, background_size=8, seed=0, masking="brute",
                          cache=GameCache(tmp_path / "interrupted"))
    explainer.evaluator.rows_per_call = 2_000  # small calls: the game asks many times
    stop = StopAfter(after)
    with pytest.raises(Cancelled), cancellable(stop):
        explainer.explain(patients, method="exact", calibration_bootstrap=20)
    assert stop.asked == after + 1  # it stopped at the first checkpoint told to stop
    done = explainer.explain(patients, method="exact", calibration_bootstrap=20)
    fresh = Explainer(system, background_size=8, seed=0, masking="brute",
                      cache=GameCache(tmp_path / "fresh")).explain(
        patients, method="exact", calibration_bootstrap=20)
    np.testing.assert_allclose(done.decomposition.calibration,
                               fresh.decomposition.calibration, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(done.decomposition.instance, fresh.decomposition.instance,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(done.width, fresh.width, rtol=1e-12)
