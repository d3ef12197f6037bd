"""A calibration game stored on disk is found again only by the code that computed it.

The key held the inputs and the libraries' version strings, not cpdecomp's own code: after a
change to how sigma is fitted, an editable install (whose version string does not move) was
handed the old game, and its phi_C (a reviewer measured age +3.87 from the cache against
-1.49 computed fresh on the diabetes sample). The code's digest is now part of the key.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pandas as pd

import cpdecomp.core.games.cache
from cpdecomp.core.explainer import Explainer
from cpdecomp.core.games.cache import GameCache, code_digest, files_digest, versions_digest
from cpdecomp.core.system import fit_system

CORE = Path(cpdecomp.core.games.cache.__file__).resolve().parents[1]


def test_the_code_digest_follows_every_source_file(tmp_path):
    copy = tmp_path / "core"
    shutil.copytree(CORE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert files_digest(copy) == code_digest()
    target = copy / "games" / "calibration.py"
    target.write_bytes(target.read_bytes() + b"\n# one more line\n")
    assert files_digest(copy) != code_digest()
    (copy / "games" / "new_module.py").write_text("")  # a new file alone changes it too
    target.write_bytes((CORE / "games" / "calibration.py").read_bytes())
    assert files_digest(copy) != code_digest()


def small_system():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    y = x[:, 0] + (0.5 + np.abs(x[:, 1])) * rng.normal(size=400)
    table = pd.DataFrame(x, columns=["a", "b", "c"])
    fitted = fit_system(table.iloc[:300], y[:300], family="normalized", model="linear")
    return fitted.conformalize(table.iloc[300:], y[300:]), table


def stored(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.suffix == ".npy"}


def test_changed_code_does_not_get_the_old_game(tmp_path, monkeypatch):
    system, table = small_system()
    Explainer(system, background_size=20, cache=GameCache(tmp_path)).explain(table.iloc[:2])
    games = stored(tmp_path)
    assert games  # computed and stored
    Explainer(small_system()[0], background_size=20, cache=GameCache(tmp_path)).explain(
        table.iloc[:2])
    assert stored(tmp_path) == games  # the same code finds it: nothing new is stored

    before = versions_digest()
    monkeypatch.setattr(cpdecomp.core.games.cache, "code_digest", lambda: "another version of core")
    assert versions_digest() != before
    Explainer(small_system()[0], background_size=20, cache=GameCache(tmp_path)).explain(
        table.iloc[:2])
    assert stored(tmp_path) > games  # computed afresh under a new key, the old file unread
