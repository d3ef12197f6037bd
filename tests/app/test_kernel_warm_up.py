"""The dashboard compiles its kernels ahead at its first start, and Setup says so (issue 35 item 9).

The server's start runs `cpdecomp warmup` in a process of its own when numba's cache lacks the
kernels, and follows its steps; the Setup page shows them in plain words while it runs, and
nothing once they are done. The command's own compiling is tests/test_warmup.py's.
"""

from __future__ import annotations

import sys

import pytest
from dashboard_helpers import new_app

from cpdecomp.app import startup

FAKE_WARMUP = [sys.executable, "-c", (
    "import sys\n"
    "for k in range(1, 6):\n"
    "    print(f'cpdecomp: warmup: [{k}/5] step {k}…', file=sys.stderr)\n"
    "    print(f'cpdecomp: warmup: [{k}/5] done in 0.1 s', file=sys.stderr)\n")]


@pytest.fixture
def kernels(monkeypatch: pytest.MonkeyPatch) -> startup.KernelWarmUp:
    state = startup.KernelWarmUp()
    monkeypatch.setattr(startup, "KERNELS", state)
    return state


def notice(at) -> list[str]:
    return [box.value for box in at.info if "Getting ready for the first Run" in box.value]


def test_setup_shows_the_warm_up_while_it_runs_and_not_after(kernels) -> None:
    kernels.running, kernels.step, kernels.steps = True, 2, 5
    at = new_app()
    at.switch_page("views/setup.py").run()
    assert notice(at), [box.value for box in at.info]
    assert "half a minute to a minute" in notice(at)[0]
    bars = [bar for bar in at.get("progress") if "step 2 of 5" in str(bar.proto.text)]
    assert bars, "the step is shown"
    assert at.button(key="run") is not None  # Run stays available meanwhile

    kernels.running = False
    at.run()
    assert notice(at) == []


def test_the_server_follows_the_warm_up_steps(kernels, monkeypatch) -> None:
    import cpdecomp.core.warmup

    monkeypatch.setattr(cpdecomp.core.warmup, "kernels_cached", lambda: False)
    startup.warm_kernels(FAKE_WARMUP)
    assert (kernels.running, kernels.step, kernels.steps, kernels.failed) == (False, 5, 5, False)


def test_nothing_is_compiled_when_the_kernels_are_cached(kernels, monkeypatch) -> None:
    import cpdecomp.core.warmup

    monkeypatch.setattr(cpdecomp.core.warmup, "kernels_cached", lambda: True)
    startup.warm_kernels([sys.executable, "-c", "raise SystemExit(3)"])
    assert (kernels.running, kernels.step, kernels.failed) == (False, 0, False)


def test_a_failed_warm_up_is_left_to_the_run(kernels, monkeypatch) -> None:
    import cpdecomp.core.warmup

    monkeypatch.setattr(cpdecomp.core.warmup, "kernels_cached", lambda: False)
    startup.warm_kernels([sys.executable, "-c", "raise SystemExit(3)"])
    assert kernels.failed and not kernels.running
