"""`cpdecomp warmup` compiles the kernels ahead (issue 35 item 9).

In a fresh numba cache folder the command exits 0 with a progress line per step and compiles
every kernel; a new process then runs the dashboard's default Run on the bundled sample (the
run's worker, `app.runs.compute`: gradient boosting, normalized, exact Shapley, the calibration
bootstrap), the command line's default explain and the interactions page's computation, and
numba's statistics say it compiled nothing: every kernel came from the cache. The dashboard's
start keeps what the warm-up compiled (the folder's code stamp is written by both).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FIRST_RUN = """
import json, sys
from cpdecomp import StudyOptions
from cpdecomp.app import runs
from cpdecomp.app.sources import load_sample
from cpdecomp.core.cli import main
from cpdecomp.core.warmup import kernel_counts

dataset = load_sample("diabetes")
options = StudyOptions(target="progression", id_column="patient_id")
config = runs.RunConfig("digest-of-the-sample", "diabetes", options, "exact", None, 0.1)
runs.compute(config, dataset)
runs.fitted_study(config.digest, options, dataset).study.interactions(alpha=0.1, rows=[0, 1])
assert main(["explain", sys.argv[1], "--target", "progression", "--id-column", "patient_id",
             "--out", sys.argv[2], "--quiet"]) == 0
counts = kernel_counts()
print(json.dumps({"compiled": counts.compiled, "loaded": counts.loaded}))
"""


@pytest.mark.slow
def test_after_warmup_a_new_process_compiles_no_kernel(tmp_path: Path) -> None:
    environment = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "games"), "OMP_NUM_THREADS": "1"}
    warm = subprocess.run([sys.executable, "-m", "cpdecomp", "warmup"], env=environment,
                          capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert warm.returncode == 0, warm.stderr
    lines = warm.stderr.splitlines()
    steps = [line for line in lines if re.match(r"cpdecomp: warmup: \[\d/6\] done in ", line)]
    assert len(steps) == 6, warm.stderr
    assert re.search(r"warmup: done in .* s: 19 kernels compiled now, 0 loaded from the cache, "
                     r"in .*numba", warm.stderr), warm.stderr
    assert lines[-1].startswith("warmed up: the kernels are in numba's cache"), warm.stderr
    assert "Traceback" not in warm.stderr and warm.stdout == ""
    # the synthetic tables' games are not left in the calibration cache
    assert not any((tmp_path / "games").glob("**/*.npy"))

    from cpdecomp.app import startup

    assert startup.bound_numba_cache(environment) is False  # the dashboard's start keeps them

    first = subprocess.run(
        [sys.executable, "-c", FIRST_RUN, str(ROOT / "sample_data" / "diabetes.csv"),
         str(tmp_path / "explanations.csv")],
        env=environment, capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert first.returncode == 0, first.stderr
    counts = json.loads(first.stdout.strip().splitlines()[-1])
    assert counts["compiled"] == 0, counts  # every kernel the first Run needs was warm
    assert counts["loaded"] >= 5, counts  # read from the cache instead

    again = subprocess.run([sys.executable, "-m", "cpdecomp", "warmup"], env=environment,
                           capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert again.returncode == 0, again.stderr
    assert ": 0 kernels compiled now, " in again.stderr, again.stderr
