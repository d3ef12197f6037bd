"""Shared test setup: one compute thread per pytest worker, and the fitted systems that
several test files use, fitted once per session.

`pytest -n 2` runs two workers on two cores; gradient boosting's OpenMP threads and numba's
threads then oversubscribe the cores, and OpenMP's spinning turns seconds into minutes. The
results are identical with one thread.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from diabetes_system import SYSTEM_CODE
from threadpoolctl import threadpool_limits
from timing import patch_apptest

# Every AppTest run's deadline follows the machine's load (tests/timing.py): it only guards
# against a hang, and the run's own end is what the tests wait for.
patch_apptest()

# Tests must not read or fill the user's cache of calibration games.
os.environ["CPDECOMP_CACHE_DIR"] = tempfile.mkdtemp(prefix="cpdecomp-test-cache-")


@pytest.fixture(autouse=True, scope="session")
def one_thread_per_worker():
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        yield
        return
    import numba

    numba.set_num_threads(1)
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(autouse=True)
def main_module_kept():
    """An AppTest run leaves its script as sys.modules["__main__"]; a process pool started later
    in the same worker then runs that script in its children ("name '__args' is not defined"
    from AppTest.from_function's), and the pool breaks. Each test gets the real one back."""
    import sys

    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(scope="session")
def diabetes_system():
    """(system, patients): the normalized GBM system on every diabetes feature, calibrated, and
    the test quarter's patients; the lines of tests/diabetes_system.py, which the child-process
    tests run too. Tests only read it (explainers are built per test)."""
    scope: dict = {}
    exec(SYSTEM_CODE, scope)
    return scope["system"], scope["patients"]
