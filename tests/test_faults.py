"""A process killed in the middle of its work loses nothing that it had finished.

One child process does what the dashboard's server does at once: a thread records reviews
(each one printed only after its transaction committed) while the main thread computes
calibration games over and over (each seed a new game, written to the disk cache). The test
kills it with SIGKILL in the middle of a computation, then checks that

* the review store opens, passes its integrity check, holds every review the child saw
  committed (and at most the one that was in flight), and takes new reviews;
* every file in the game cache reads back, the games the child finished are served from the
  cache to a new process, and they equal games computed afresh without any cache.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from ci_policy import environment_url
from diabetes_system import SYSTEM_CODE  # the child's system; fitted here too: same cache keys

from cpdecomp import Explainer
from cpdecomp.app.reviews import ReviewStore
from cpdecomp.core.games.cache import GameCache

ROOT = Path(__file__).resolve().parents[1]
REVIEWS_BEFORE_KILL = 15
GAMES_BEFORE_KILL = 2

CHILD = SYSTEM_CODE + """
import sys, threading
from cpdecomp.app.reviews import ReviewStore

store = ReviewStore(sys.argv[1])
dataset = sys.argv[2]
printing = threading.Lock()

def say(line):  # whole lines: two threads print
    with printing:
        print("@ " + line, flush=True)

def review_forever():
    i = 0
    while True:
        store.record(dataset, f"P{i % 40}", "reviewed", note=f"note {i}", reviewer="kill test")
        say(f"committed {i}")
        i += 1

threading.Thread(target=review_forever, daemon=True).start()
seed = 0
while True:
    say(f"computing {seed}")
    Explainer(system, background_size=200, seed=seed).explain(patients, alpha=0.1)
    say(f"cached {seed}")
    seed += 1
"""


def system_and_patients():
    scope: dict = {}
    exec(SYSTEM_CODE, scope)  # the same lines the child runs
    return scope["system"], scope["patients"]


@pytest.fixture(params=["sqlite", "postgres"])
def review_location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "reviews.sqlite3")
    return environment_url()


def kill_mid_computation(review_location: str, dataset: str, cache_dir: Path,
                         log: Path) -> tuple[int, int]:
    """Run the child until it has committed reviews and cached games, then SIGKILL it while
    it computes. Returns (reviews it saw committed, games it finished)."""
    environment = {**os.environ, "CPDECOMP_CACHE_DIR": str(cache_dir), "OMP_NUM_THREADS": "1"}
    committed, finished, computing = -1, -1, False
    with log.open("w") as errors:
        child = subprocess.Popen([sys.executable, "-c", CHILD, review_location, dataset],
                                 cwd=ROOT, env=environment, stdout=subprocess.PIPE,
                                 stderr=errors, text=True)
    # A child that hangs without printing must not hang the test: kill it at the deadline.
    watchdog = threading.Timer(180, child.kill)
    watchdog.start()
    try:
        deadline = time.monotonic() + 120
        assert child.stdout is not None
        for line in child.stdout:
            if not line.startswith("@ "):
                continue  # not the child's own: a library's output
            _, word, number = line.split()
            if word == "committed":
                committed = int(number)
            elif word == "cached":
                finished, computing = int(number), False
            else:
                computing = True
            ready = committed + 1 >= REVIEWS_BEFORE_KILL and finished + 1 >= GAMES_BEFORE_KILL
            if ready and computing:
                time.sleep(0.05)  # well inside the next game's computation
                break
            assert time.monotonic() < deadline, "the child did not get going"
        else:
            pytest.fail(f"the child stopped by itself:\n{log.read_text()[-2000:]}")
    finally:
        watchdog.cancel()
        child.send_signal(signal.SIGKILL)
        # Reviews committed between our last read and the kill were printed into the pipe.
        rest, _ = child.communicate(timeout=30)
    for line in rest.splitlines():
        if not line.startswith("@ "):
            continue
        _, word, number = line.split()
        if word == "committed":
            committed = int(number)
        elif word == "cached":
            finished = int(number)
    assert child.returncode == -signal.SIGKILL
    return committed + 1, finished + 1


@pytest.mark.slow
def test_killed_during_a_computation_the_cache_and_the_review_store_are_intact(
        review_location, tmp_path):
    dataset = f"kill-{uuid.uuid4().hex}"  # its own key: the PostgreSQL server is shared
    cache_dir = tmp_path / "games"
    reviews, games = kill_mid_computation(review_location, dataset, cache_dir,
                                          tmp_path / "child.log")

    # The review store: every committed review, nothing half-written, still writable.
    if not review_location.startswith("postgres"):
        with sqlite3.connect(review_location) as connection:
            assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store = ReviewStore(review_location)
    history = store.history(dataset)
    assert reviews <= len(history) <= reviews + 1  # the one in flight may have committed
    assert [event.note for event in history] == [f"note {i}" for i in range(len(history))]
    store.record(dataset, "P0", "reopened", note="after the crash")
    assert store.latest(dataset)["P0"].note == "after the crash"

    # The game cache: whole files only, and the finished games are served, equal to fresh ones.
    cache = GameCache(cache_dir)
    files = cache.files()
    assert len(files) >= games
    for path in files:
        assert np.load(path, allow_pickle=False).size > 0
    system, patients = system_and_patients()
    for seed in range(games):
        warm = Explainer(system, background_size=200, seed=seed, cache=cache)
        hits = cache.hits
        cached = warm.explain(patients, alpha=0.1)
        assert cache.hits > hits, f"seed {seed}'s game was not served from the cache"
        fresh = Explainer(system, background_size=200, seed=seed,
                          cache=GameCache(None)).explain(patients, alpha=0.1)
        np.testing.assert_array_equal(cached.width, fresh.width)
        np.testing.assert_array_equal(cached.decomposition.calibration,
                                      fresh.decomposition.calibration)
        np.testing.assert_array_equal(cached.decomposition.instance,
                                      fresh.decomposition.instance)


def test_cache_clear_removes_only_the_caches_own_files(tmp_path) -> None:
    """`cpdecomp cache clear` in a folder that also holds a user's arrays: only files named by
    a content digest (and the temporary files of a killed writer) go."""
    from cpdecomp.core.games.cache import GameCache, content_digest

    cache = GameCache(tmp_path)
    key = content_digest("calibration-game", np.arange(3.0))
    cache.put(key, np.arange(5.0))
    stale = tmp_path / f".{key}.abc123.tmp"
    stale.write_bytes(b"half")
    theirs = [tmp_path / name for name in ("results.npy", "X_train.npy", f"{key}-copy.npy",
                                           ".hidden.tmp")]
    for path in theirs:
        np.save(path, np.ones(2)) if path.suffix == ".npy" else path.write_bytes(b"x")
    assert [p.name for p in cache.files()] == [f"{key}.npy"]
    assert cache.clear() == 1
    assert sorted(tmp_path.iterdir()) == sorted(theirs)
