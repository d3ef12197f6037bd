"""The command line's conventions: --version, --help for every option, --quiet/--verbose,
progress outside a terminal, `-` for standard input and output, and the table caps lifted
from the command line.

Pipes are tested in real subprocesses (a real stdin and stdout), the rest in-process.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from cli_helpers import assert_bad_input, run_cli, run_ok

import cpdecomp.core.progress as progress_module
from cpdecomp.core.cli import EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_INTERRUPTED, build_parser, main
from cpdecomp.core.progress import LINE_SECONDS, RunProgress, duration
from cpdecomp.core.tables import LIMITS

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
TARGET = "progression"
ID = "patient_id"
FAST = ["--model", "linear", "--background", "8"]
BASE = ["explain", str(SAMPLE), "--target", TARGET, "--id-column", ID, *FAST]


def run_process(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    """`python -m core.cli ...` in a real process, from this checkout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "cpdecomp", *argv], input=stdin,
                          capture_output=True, timeout=300, check=False, env=env)


# --------------------------------------------------------------------- --version and --help


def test_version_names_the_installed_release(capsys) -> None:
    capsys.readouterr()
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"cpdecomp {metadata.version('cpdecomp')} (Python "), out
    assert "numpy" in out


def test_version_in_a_real_process() -> None:
    done = run_process("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("cpdecomp "), done.stdout
    assert done.stderr == b""


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_option_has_help_text() -> None:
    parser = build_parser()
    missing = []
    for name, sub in {"": parser, **_subcommands(parser)}.items():
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            if not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


@pytest.mark.parametrize("argv", [["--help"], ["explain", "--help"], ["compare", "--help"]])
def test_help_has_examples_and_exit_codes(capsys, argv) -> None:
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "cpdecomp explain " in out
    assert "exit status:" in out
    for status in (0, EXIT_INTERNAL, EXIT_BAD_INPUT, EXIT_INTERRUPTED):
        assert f"\n  {status} " in out, status


def test_help_examples_run(capsys, tmp_path) -> None:
    """The first example of --help works as printed (with the output in a temporary folder)."""
    parser = build_parser()
    example = parser.epilog.split("examples:\n", 1)[1].split("\n  cpdecomp", 2)[0]
    argv = example.replace("\\\n", " ").split()[1:]
    assert argv[:2] == ["explain", "sample_data/diabetes.csv"]
    out = tmp_path / "explanations.csv"
    argv = [str(ROOT / a) if a.startswith("sample_data/") else a for a in argv]
    argv[argv.index("--out") + 1] = str(out)
    run_ok(capsys, *argv, *FAST)
    assert out.stat().st_size > 0


def test_help_compare_example_runs(capsys, tmp_path) -> None:
    """The compare example on the bundled sample works as printed."""
    example = build_parser().epilog.split("\n  cpdecomp compare ", 1)[1].split("\n  cpdecomp", 1)[0]
    argv = ["compare", *example.replace("\\\n", " ").split()]
    assert argv[:2] == ["compare", "sample_data/diabetes.csv"] and "--calibration-by" in argv
    out = tmp_path / "recalibration.csv"
    argv = [str(ROOT / a) if a.startswith("sample_data/") else a for a in argv]
    argv[argv.index("--out") + 1] = str(out)
    run_ok(capsys, *argv, *FAST)
    assert pd.read_csv(out)["set"].nunique() == 2


# ------------------------------------------------------------------- --quiet and --verbose


def test_quiet_prints_nothing_but_writes(capsys, tmp_path) -> None:
    out = tmp_path / "o.csv"
    status, err = run_cli(capsys, *BASE, "--quiet", "--out", out)
    assert status == 0
    assert err == ""
    assert len(pd.read_csv(out)) == 111 * 10


def test_quiet_still_reports_errors_in_one_line(capsys, tmp_path) -> None:
    message = assert_bad_input(capsys, *BASE, "-q", "--target", "nope", "--out", tmp_path / "o.csv")
    assert "nope" in message


def test_verbose_names_each_step(capsys, tmp_path) -> None:
    err = run_ok(capsys, *BASE, "--verbose", "--out", tmp_path / "o.csv")
    lines = err.strip().splitlines()
    assert any("read 442 rows x 12 columns" in line for line in lines), lines
    assert any("fitted linear on 221 rows" in line and "111 patients" in line
               for line in lines), lines
    assert any("table.read format=csv rows=442" in line for line in lines), lines  # core's log
    assert lines[-1].startswith("explained 111 patients")


def test_quiet_and_verbose_exclude_each_other(capsys, tmp_path) -> None:
    assert_bad_input(capsys, *BASE, "-q", "-v", "--out", tmp_path / "o.csv")


# ---------------------------------------------------------------------------------- progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_outside_a_terminal_is_a_line_at_the_first_tick_then_every_few_seconds() -> None:
    stream, clock = io.StringIO(), Clock()
    progress = RunProgress("explaining", stream=stream, clock=clock)
    progress.expect(total_cells=1000, calibration_cells=400, n_patients=100)
    clock.now = 2.0
    progress(100)  # the first tick is said at once: the run is alive
    clock.now = 3.0
    progress(100)  # too soon after the last line
    clock.now = 2.0 + LINE_SECONDS
    progress(200)
    clock.now = 12.0
    progress.patients(50, 100)  # a chunk of patients: said as patients, cells caught up
    clock.now = 20.0
    progress.patients(100, 100)
    assert stream.getvalue().splitlines() == [
        "explaining: 10.0% (the calibration set), elapsed 0:02, ETA 0:18",
        "explaining: 40.0% (the 100 patients), elapsed 0:07, ETA 0:10",
        "explaining: 70.0% (50/100 patients), elapsed 0:12, ETA 0:05",
        "explaining: 100.0% (100/100 patients), elapsed 0:20, ETA 0:00",
    ]
    assert "\r" not in stream.getvalue()


def test_progress_on_a_terminal_is_a_bar_in_place_and_a_said_line_gets_its_own() -> None:
    stream, clock = Terminal(), Clock()
    progress = RunProgress("explaining", stream=stream, clock=clock)
    progress.expect(total_cells=2, calibration_cells=0, n_patients=2)
    clock.now = 1.0
    progress(1)
    progress.say("expected to take about 0:02")
    clock.now = 2.0
    progress.patients(2, 2)
    text = stream.getvalue()
    assert "\r" + "explaining [###############...............]  50.0% (the 2 patients" in text
    assert "\nexplaining: expected to take about 0:02\n" in text
    assert text.endswith("(2/2 patients, elapsed 0:02, ETA 0:00)\n")


def test_progress_off_prints_nothing() -> None:
    stream = io.StringIO()
    progress = RunProgress("x", stream=stream, mode="off")
    progress.expect(2, 0, 2)
    with progress.running():
        progress(1)
        progress.patients(2, 2)
    assert stream.getvalue() == ""


def test_before_its_estimate_a_run_says_it_is_preparing(monkeypatch) -> None:
    monkeypatch.setattr(progress_module, "HEARTBEAT_SECONDS", 0.05)
    stream = io.StringIO()
    with RunProgress("explaining", stream=stream).running():
        deadline = time.monotonic() + 60
        while not stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stream.getvalue().startswith("explaining: preparing, elapsed 0:0")


def test_a_quiet_stretch_of_work_still_reports(monkeypatch) -> None:
    """No tick for a while (a kernel compiling): the heartbeat says where the run is."""
    monkeypatch.setattr(progress_module, "HEARTBEAT_SECONDS", 0.05)
    stream = io.StringIO()
    progress = RunProgress("explaining", stream=stream)
    progress.expect(10, 5, 3)
    with progress.running():
        deadline = time.monotonic() + 60
        while not stream.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert stream.getvalue().startswith("explaining: 0.0% (the calibration set), elapsed")


def test_the_work_meter_counts_every_masked_cell_once() -> None:
    """Brute force ticks as each model call ends, tables when a chunk is done; the cells of a
    call add up to coalitions x rows whichever components take which path."""
    from cpdecomp.core.games import MaskedEvaluator
    from cpdecomp.core.models import Component, FunctionPredictor
    from cpdecomp.core.progress import metered

    rng = np.random.default_rng(0)
    background = rng.normal(size=(5, 3))
    components = {"f": Component("f", FunctionPredictor(lambda x: x.sum(axis=1))),
                  "g": Component("g", FunctionPredictor(lambda x: np.exp(x[:, 0])))}
    coalitions = np.array([[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)], bool)
    ticks: list[int] = []
    evaluator = MaskedEvaluator(components, background, rows_per_call=10)
    with metered(ticks.append):
        evaluator.evaluate_by_row(coalitions, rng.normal(size=(7, 3)), ["f", "g"])
    assert sum(ticks) == 8 * 7
    assert len(ticks) > 2  # several model calls, each ticked as it ended


@pytest.mark.parametrize(("seconds", "text"), [(0, "0:00"), (59.6, "1:00"), (3599, "59:59"),
                                               (3600, "1:00:00"), (90061, "25:01:01")])
def test_durations(seconds, text) -> None:
    assert duration(seconds) == text


def test_a_cohort_of_several_chunks_reports_in_order_and_ends_at_every_patient(tmp_path) -> None:
    """A real run outside a terminal: progress lines on stderr (the first at the first tick,
    then at most one per LINE_SECONDS), their patients and shares in order, the last at
    every patient, then the summary."""
    rng = np.random.default_rng(0)
    n, d = 8000, 10
    x = rng.normal(size=(n, d))
    table = pd.DataFrame(x, columns=[f"x{j}" for j in range(d)])
    table["y"] = x @ rng.normal(size=d) + rng.normal(size=n)
    data = tmp_path / "cohort.csv"
    table.to_csv(data, index=False)
    out = tmp_path / "o.json"
    done = run_process("explain", str(data), "--target", "y", *FAST, "--out", str(out))
    assert done.returncode == 0, done.stderr
    patients = n // 4
    lines = done.stderr.decode().strip().splitlines()
    # a finding about the result (the narrowest intervals under-covered) comes as a warning
    *progress, summary = [line for line in lines if not line.startswith("cpdecomp: warning: ")]
    assert progress and all(line.startswith("explaining: ") for line in progress), progress
    # a run expected to take more than a few seconds says so, and a slow start says it is
    # preparing (this one may, or not, by the machine's speed)
    progress = [line for line in progress if "expected to take about" not in line
                and not line.startswith("explaining: preparing, elapsed ")]
    shares = [float(line.split(": ", 1)[1].split("%", 1)[0]) for line in progress]
    assert shares == sorted(shares) and shares[-1] == 100.0
    assert progress[-1].startswith(f"explaining: 100.0% ({patients:,}/{patients:,} patients)")
    assert all("ETA " in line for line in progress)
    assert summary.startswith(f"explained {patients} patients")


# ------------------------------------------------------------------ standard input and output


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_stdin_to_stdout_is_the_same_as_files(tmp_path, fmt) -> None:
    """`-` in and out gives the bytes that files in and out give."""
    data = SAMPLE
    if fmt == "parquet":  # Parquet input too: read from a pipe by its magic number
        data = tmp_path / "diabetes.parquet"
        pd.read_csv(SAMPLE, dtype={ID: str}).to_parquet(data, index=False)
    argv = ["--target", TARGET, "--id-column", ID, *FAST]
    out = tmp_path / f"o.{fmt}"
    from_files = run_process("explain", str(data), *argv, "--out", str(out))
    assert from_files.returncode == 0, from_files.stderr
    piped = run_process("explain", "-", *argv, "--out", "-", "--format", fmt,
                        stdin=data.read_bytes())
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_bytes()
    assert "-> standard output;" in piped.stderr.decode()


def test_format_names_the_format_of_a_file_without_extension(capsys, tmp_path) -> None:
    out = tmp_path / "explained"
    run_ok(capsys, *BASE, "--out", out, "--format", "json")
    assert json.loads(out.read_text())["meta"]["format_version"].startswith("1.")


@pytest.mark.parametrize(("extra", "needle"), [
    (["--out", "-"], "--format"),
    (["--out", "o.csv", "--format", "json"], "does not match"),
])
def test_output_format_mistakes(capsys, tmp_path, monkeypatch, extra, needle) -> None:
    monkeypatch.chdir(tmp_path)
    message = assert_bad_input(capsys, *BASE, *extra)
    assert needle in message
    assert list(tmp_path.iterdir()) == []


def test_only_data_reads_stdin(capsys, tmp_path) -> None:
    message = assert_bad_input(capsys, "explain", SAMPLE, "--target", TARGET, "--train", "-",
                               "--calibration", SAMPLE, "--out", tmp_path / "o.csv")
    assert "standard input" in message


def test_empty_stdin_is_one_line() -> None:
    done = run_process("explain", "-", "--target", TARGET, "--out", "-", "--format", "csv",
                       stdin=b"")
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stdout == b""
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "standard input is empty" in lines[0]


def test_stdin_from_a_terminal_is_refused_rather_than_waited_for() -> None:
    """`cpdecomp explain -` typed at a prompt would hang on the keyboard: say what to do."""
    import pty

    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "cpdecomp", "explain", "-", "--target", TARGET, "--out", "-",
             "--format", "csv"], stdin=terminal, capture_output=True, timeout=300, check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(terminal)
        os.close(controller)
    assert done.returncode == EXIT_BAD_INPUT
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "is a terminal" in lines[0], lines


def test_stdin_over_the_byte_cap_is_refused_naming_the_option() -> None:
    done = run_process("explain", "-", "--target", TARGET, "--out", "-", "--format", "csv",
                       "--max-bytes", "1000", stdin=SAMPLE.read_bytes())
    assert done.returncode == EXIT_BAD_INPUT
    assert done.stdout == b""
    assert "--max-bytes" in done.stderr.decode()


def test_a_reader_that_stops_early_ends_the_run_quietly() -> None:
    """`cpdecomp ... --out - | head -c 10`: status 141 like other tools, no error line."""
    command = (f"{sys.executable} -m core.cli explain {SAMPLE} --target {TARGET} "
               f"--id-column {ID} {' '.join(FAST)} -q --out - --format csv | head -c 10; "
               "echo \" ${PIPESTATUS[0]}\"")
    done = subprocess.run(["bash", "-c", command], capture_output=True, timeout=300,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout == b"patient_id 141\n", done
    assert done.stderr == b""


# ------------------------------------------------------------------------------------- caps


def test_caps_default_to_the_library_limits() -> None:
    args = build_parser().parse_args(["explain", "d.csv", "--target", "y", "--out", "o.csv"])
    assert (args.max_rows, args.max_cells, args.max_bytes) == (
        LIMITS.max_rows, LIMITS.max_cells, LIMITS.max_bytes)


@pytest.mark.parametrize(("option", "needle"), [
    ("--max-rows", "more than 100 rows"),
    ("--max-cells", "more than 100 cells"),
    ("--max-bytes", "the limit is 0.0 MiB"),
])
def test_a_lowered_cap_reaches_the_reader(capsys, tmp_path, option, needle) -> None:
    message = assert_bad_input(capsys, *BASE, option, "100", "--out", tmp_path / "o.csv")
    assert needle in message


@pytest.mark.parametrize("value", ["0", "-5", "ten", "1.5", "1e400", "nan", "1e-3"])
def test_caps_must_be_whole_positive_numbers(capsys, tmp_path, value) -> None:
    assert_bad_input(capsys, *BASE, "--max-rows", value, "--out", tmp_path / "o.csv")


@pytest.mark.slow
def test_caps_can_be_lifted_past_the_defaults(capsys, tmp_path) -> None:
    """A file over the default row and cell caps is refused by default and read when the caps
    are lifted: the run then goes on to the next check (the target column is empty)."""
    rows = LIMITS.max_cells // 2 + 1  # 2 columns: over both default caps
    assert rows > LIMITS.max_rows
    path = tmp_path / "big.parquet"
    pd.DataFrame({"x": np.zeros(rows), "y": np.full(rows, np.nan)}).to_parquet(path)
    argv = ["explain", path, "--target", "y", *FAST, "--out", tmp_path / "o.csv"]
    assert "rows" in assert_bad_input(capsys, *argv)
    message = assert_bad_input(capsys, *argv, "--max-rows", "2e7", "--max-cells", "3e7")
    assert "target" in message and "limit" not in message and "most" not in message


def test_out_to_a_device_or_a_pipe_writes_into_it_and_leaves_it_in_place(tmp_path) -> None:
    """--out /dev/null (or a named pipe) is written into, not renamed over: as root a rename
    put a plain 0600 file where /dev/null was."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received: list[bytes] = []
    reader = __import__("threading").Thread(target=lambda: received.append(pipe.read_bytes()))
    reader.start()
    assert main(["explain", str(SAMPLE), "--target", TARGET, "--id-column", "patient_id", *FAST,
                 "--out", str(pipe),
                 "--format", "csv", "-q"]) == 0
    reader.join(timeout=60)
    assert pipe.is_fifo() and received and received[0].startswith(b"patient_id,")
    before = os.stat("/dev/null")
    assert main(["explain", str(SAMPLE), "--target", TARGET, "--id-column", "patient_id", *FAST,
                 "--out", "/dev/null",
                 "--format", "csv", "-q"]) == 0
    after = os.stat("/dev/null")
    assert (after.st_mode, after.st_rdev, after.st_ino) == (before.st_mode, before.st_rdev,
                                                            before.st_ino)
