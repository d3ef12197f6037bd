"""Several dashboard sessions compute at once, each on its own thread.

numba's workqueue threading layer (its fallback where neither libgomp nor TBB is installed)
aborts the process when two threads launch parallel kernels together; core.parallel makes them
take turns there. The child process below forces that layer and runs three explainers at once
on sizes that take the parallel kernels.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from diabetes_system import SYSTEM_CODE

ROOT = Path(__file__).resolve().parents[1]

CHILD = SYSTEM_CODE + """
import threading
import numba
from cpdecomp.core.parallel import threadsafe_layer

rows = system.fitted.encode(table)
widths, failures = {}, []

def explain(seed):
    try:
        for _ in range(3):
            result = Explainer(system, background_size=200, seed=seed).explain_rows(
                rows, method="exact", alpha=0.1)
        widths[seed] = result.width
    except Exception as error:
        failures.append(repr(error))

threads = [threading.Thread(target=explain, args=(seed,)) for seed in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
alone = Explainer(system, background_size=200, seed=1).explain_rows(rows, method="exact",
                                                                     alpha=0.1).width
assert numba.threading_layer() == "workqueue", numba.threading_layer()
assert not threadsafe_layer()
assert failures == [], failures
assert (widths[1] == alone).all()
print("ok")
"""


@pytest.mark.slow  # a child process fits and explains three sessions at once
def test_concurrent_sessions_survive_numbas_workqueue_layer() -> None:
    environment = {**os.environ, "NUMBA_THREADING_LAYER": "workqueue", "CPDECOMP_CACHE_DIR": "",
                   "NUMBA_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, env=environment,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
