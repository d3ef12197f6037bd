"""Running the command line in-process in tests: status, one-line errors, no traceback."""

from __future__ import annotations

import pytest

from cpdecomp.core.cli import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str]:
    """Run the command line in-process; return (exit status, stderr)."""
    capsys.readouterr()  # drop anything captured before
    status = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert captured.out == "", "the command line writes nothing to stdout"
    return status, captured.err


def run_ok(capsys: pytest.CaptureFixture[str], *argv: object) -> str:
    status, err = run_cli(capsys, *argv)
    assert status == 0, err
    return err


def assert_bad_input(capsys: pytest.CaptureFixture[str], *argv: object) -> str:
    """Status 2, exactly one line on stderr, no traceback; returns the message."""
    status, err = run_cli(capsys, *argv)
    lines = err.strip("\n").splitlines()
    assert status == 2, f"expected exit status 2, got {status}: {err!r}"
    assert len(lines) == 1, f"expected one line on stderr, got {err!r}"
    assert "Traceback" not in err
    assert lines[0].startswith("cpdecomp: error: "), lines[0]
    return lines[0]
