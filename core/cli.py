"""The command line: `cpdecomp explain DATA --target COL ... --out FILE`.

Bad input exits with status 2 and one line on stderr that says what is wrong and how to fix
it; an unexpected failure exits with status 1, also in one line, with the error's type and
place but not its message, which could quote the data (CPDECOMP_DEBUG=1 shows the traceback).
Results go to --out (a file, or `-` for standard output); stderr carries progress, the summary
line and errors, so a pipe's data stays clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import math
import os
import re
import sys
import tempfile
import time
import tomllib
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from cpdecomp.core.attribution import METHOD_BUDGETS, METHODS, build_design
from cpdecomp.core.conformal import FAMILIES, alpha_fraction
from cpdecomp.core.data import choose_columns, did_you_mean, parse_split
from cpdecomp.core.decomposition import check_units
from cpdecomp.core.errors import CpdecompError
from cpdecomp.core.explainer import RunEstimate
from cpdecomp.core.games import MASKING_PATHS
from cpdecomp.core.games.cache import CACHE_DIR_ENV, CACHE_MAX_BYTES_ENV, shared_cache
from cpdecomp.core.model_files import load_model_file
from cpdecomp.core.models import MODELS, model_kind
from cpdecomp.core.optional import require
from cpdecomp.core.output import STDOUT, output_format, write_comparison, write_reports
from cpdecomp.core.progress import RunProgress, duration
from cpdecomp.core.system import brought_features
from cpdecomp.core.tables import LIMITS, TableLimits, iter_table, load_table
from cpdecomp.core.versions import library_versions
from cpdecomp.core.workers import dask_scheduler, start_local_workers
from cpdecomp.core.workflow import (
    StreamedStudy,
    Study,
    StudyOptions,
    prepare_streamed_study,
    prepare_study,
)

if TYPE_CHECKING:
    import pandas as pd

    from cpdecomp.core.recalibration import Comparison

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE, what `cat` and `grep` end with when `| head` stops reading."""
STDIN = "-"

EPILOG = f"""\
examples:
  cpdecomp explain sample_data/diabetes.csv --target progression --id-column patient_id \\
      --out explanations.csv
  cpdecomp explain cohort.parquet --target cd4 --model rf --jobs -1 --out explained.json
  cpdecomp explain - --target progression --out - --format csv < patients.csv > explained.csv
  cpdecomp explain big.csv --target y --max-cells 60000000 --max-bytes 2000000000 --out big.parquet
  cpdecomp compare sample_data/diabetes.csv --target progression --id-column patient_id \\
      --calibration-by sex --out recalibration.csv
  cpdecomp compare patients.csv --target y --train train.csv --calibration site_a.csv \\
      --against site_b.csv --out recalibration.json
  cpdecomp cache info
  cpdecomp dashboard --port 8502

exit status:
  {EXIT_OK}    success (output written)
  {EXIT_INTERNAL}    internal error: one line with its type and place (CPDECOMP_DEBUG=1 shows
       the traceback)
  {EXIT_BAD_INPUT}    bad input or usage: one line on stderr that says what is wrong; no output
       is written
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)
  {EXIT_BROKEN_PIPE}  the reader of --out - stopped reading early (e.g. | head)
"""


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (status 2), like our own errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CpdecompError(f"{message} (see '{self.prog} --help')")


def _whole_number(text: str, least: int) -> int:
    """A whole number ≥ least; 1e6-style and 1_000_000 are accepted."""
    try:
        value = float(text.replace("_", "")) if "e" in text.lower() else int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not math.isfinite(value) or value != int(value) or value < least:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of at least {least}, got {text!r}")
    return int(value)


def _positive(text: str) -> int:
    """A whole number ≥ 1 (a cap)."""
    return _whole_number(text, 1)


def _non_negative(text: str) -> int:
    """A whole number ≥ 0 (0: off)."""
    return _whole_number(text, 0)


def _bootstrap_replicates(text: str) -> int:
    """0 (off) or a whole number ≥ 2: one replicate has no spread to make an interval of."""
    value = _whole_number(text, 0)
    if value == 1:
        raise argparse.ArgumentTypeError("expected 0 (none) or at least 2 replicates, got '1'")
    return value


def _verbosity(parser: argparse.ArgumentParser) -> None:
    quiet = parser.add_mutually_exclusive_group()
    quiet.add_argument("-q", "--quiet", action="store_true",
                       help="print nothing but errors (no progress, no summary line)")
    quiet.add_argument("-v", "--verbose", action="store_true",
                       help="also print each step (reading, fitting, writing) with timings")


def _input_arguments(parser: argparse.ArgumentParser, data: str, calibration: str) -> None:
    """The inputs and the fit explain and compare share: data, columns, files, family, model,
    method and alpha."""
    parser.add_argument("data", metavar="DATA", help=data)
    parser.add_argument("--target", required=True, help="the outcome column")
    parser.add_argument("--id-column", help="column that identifies patients")
    parser.add_argument("--features", help="comma-separated feature columns (default: all others)")
    parser.add_argument("--train", help="training file; then DATA holds only patients to explain")
    parser.add_argument("--calibration", help=calibration)
    parser.add_argument("--split", default="0.5,0.25,0.25",
                        help="train,calibration,test fractions of DATA (default %(default)s)")
    parser.add_argument("--family", default="normalized", choices=list(FAMILIES),
                        help="conformal score family: absolute residuals, normalized by a "
                        "fitted spread, gamma (relative), or conformalized quantile regression "
                        "(cqr, cqr-r on the log scale) (default %(default)s)")
    parser.add_argument("--model", default="gbm", choices=list(MODELS),
                        help="point model: gradient boosting, random forest or least squares "
                        "(default %(default)s)")
    parser.add_argument("--model-file", action="append", default=[], metavar="COMPONENT=PATH",
                        help="a fitted model for one component (f, sigma, lo, hi) instead of "
                        "fitting --model: .skops, XGBoost .json/.ubj or LightGBM .txt, never "
                        "pickle (repeatable)")
    parser.add_argument("--method", default="exact", metavar="|".join(METHODS),
                        help="attribution method (default %(default)s)")
    parser.add_argument("--budget", "--permutations", dest="budget", type=int, default=None,
                        help="budget of a sampled method: " + "; ".join(
                            f"{name}: {spec.unit} (default {spec.default})"
                            for name, spec in METHOD_BUDGETS.items() if spec is not None))
    parser.add_argument("--group", action="append", default=[], metavar="A,B",
                        help="features that enter and leave coalitions together as one player "
                        "(repeatable); the rest stay single")
    parser.add_argument("--alpha", default="0.1", help="miscoverage (default %(default)s)")


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    """The background, units, masking path and seed explain and compare share."""
    parser.add_argument("--background", type=int, default=None,
                        help="background rows drawn from training (default: 1000 where tree "
                        "tables or a closed form apply, else 64)")
    parser.add_argument("--scale", default="width", choices=["width", "log"],
                        help="units of the attributions: width (they sum to width - base "
                        "width), or log for the log-scale families (they sum to ln(width / "
                        "base width)) (default %(default)s)")
    parser.add_argument("--masking", default="auto", choices=list(MASKING_PATHS),
                        help="masked predictions: auto (tree tables or closed form where the "
                        "model allows, else brute force), tables, or brute (the same values, "
                        "by one way); response: a model with a log link (gamma family, "
                        "Poisson/gamma/Tweedie boosters) averaged over the background on the "
                        "response scale instead of its log scale (brute force) "
                        "(default %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the split, the model, the background draw and sampled "
                        "methods: the same seed gives the same output (default %(default)s)")


def _output_arguments(parser: argparse.ArgumentParser) -> None:
    """--out, --format, the caps on each input file and the verbosity."""
    parser.add_argument("--out", required=True,
                        help="FILE.csv, FILE.parquet or FILE.json, or - for standard output "
                        "(with --format)")
    parser.add_argument("--format", choices=["csv", "parquet", "json"],
                        help="output format; needed with --out -, else the extension says it")
    caps = parser.add_argument_group(
        "caps on each input file", "Reading stops at these, so that a wrong file cannot "
        "exhaust memory;\nraise them for a cohort that is larger on purpose.")
    caps.add_argument("--max-rows", type=_positive, default=LIMITS.max_rows, metavar="N",
                      help="most data rows (default %(default)s)")
    caps.add_argument("--max-cells", type=_positive, default=LIMITS.max_cells, metavar="N",
                      help="most rows x columns (default %(default)s)")
    caps.add_argument("--max-bytes", type=_positive, default=LIMITS.max_bytes, metavar="N",
                      help="largest file, in bytes; for Parquet also the most data once "
                      f"decompressed, which is at least {LIMITS.max_decoded_bytes} "
                      "(default %(default)s)")
    _verbosity(parser)


def build_parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = OneLineParser(prog="cpdecomp", description=__doc__.splitlines()[0],
                           epilog=EPILOG, formatter_class=formatter)
    parser.add_argument("--version", action="version", version=version_text(),
                        help="show the version and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    explain = commands.add_parser(
        "explain", help="explain conformal interval widths of patients",
        description="Split each patient's interval width into calibration-driven and "
        "instance-driven attributions per feature.", epilog=EPILOG, formatter_class=formatter,
    )
    _input_arguments(explain, data="CSV or Parquet file of patients, or - for standard input",
                     calibration="calibration file (with --train)")
    explain.add_argument("--calibration-bootstrap", type=_bootstrap_replicates, default=0,
                         metavar="N",
                         help="resample the calibration rows N times (e.g. 200) for a 90%% "
                         "interval on every calibration-driven part: columns calibration_low, "
                         "calibration_high, calibration_sign_uncertain (no model is called; "
                         "default 0: none)")
    explain.add_argument("--background-bootstrap", type=_bootstrap_replicates, default=0,
                         metavar="N",
                         help="draw the background afresh N times (e.g. 50) for 90%% "
                         "intervals of the background draw's error: columns background_low, "
                         "background_high (calibration-driven part) and instance_background_low, "
                         "instance_background_high (instance-driven part); each draw computes "
                         "the calibration game once more (default 0: none)")
    explain.add_argument("--fixed-quantile", action="store_true",
                         help="add fixed_quantile: the Shapley values of the width with q-hat "
                         "held fixed, what shap on a fitted conformal regressor's width gives "
                         "(always width units)")
    _run_arguments(explain)
    explain.add_argument("--jobs", type=int, default=1,
                         help="worker processes for the patients (-1 = one per core)")
    explain.add_argument("--scheduler", metavar="ADDRESS",
                         help="run the patients on a Dask cluster (e.g. tcp://host:8786)")
    explain.add_argument("--max-seconds", type=_positive, metavar="N",
                         help="refuse, before any masking, a run expected to take longer "
                         "(the estimate is timed on a few of the run's own rows; the message "
                         "names a background or budget that fits) (default: no limit)")
    _output_arguments(explain)
    compare = commands.add_parser(
        "compare", help="compare calibration sets (two sites, two periods) feature by feature",
        description="Recalibrate one fitted model on two or more calibration sets and say, per "
        "patient and feature, how the calibration-driven part moved (with a 90%% interval "
        "from resampling both sets), what the instance-driven part does, and how each set's "
        "intervals cover the other sets' rows.", epilog=EPILOG, formatter_class=formatter,
    )
    _input_arguments(
        compare, data="CSV or Parquet file: with --train and --calibration the patients to "
        "explain; without them it is split into training, calibration (the first set) and "
        "patients, as explain does", calibration="calibration file (with --train): the first "
        "set, named by its file name")
    sets = compare.add_mutually_exclusive_group()
    sets.add_argument("--against", action="append", default=[], metavar="FILE",
                      help="another calibration set to compare (repeatable), named by its file "
                      "name; it needs the feature and target columns")
    sets.add_argument("--calibration-by", metavar="COL",
                      help="split the calibration rows into sets by this column's values (a "
                      "site, a period), in sorted order; COL is left out of the features unless "
                      "--features lists it")
    compare.add_argument("--reference", metavar="SET",
                         help="the set the others are compared with: a file name, or a value "
                         "of --calibration-by (default: the first set)")
    compare.add_argument("--calibration-bootstrap", type=_bootstrap_replicates, default=200,
                         metavar="N",
                         help="resample every set N times, each set independently, for the 90%% "
                         "intervals of the calibration-driven part and of its change "
                         "(no model is called; 0: no intervals; default %(default)s)")
    _run_arguments(compare)
    _output_arguments(compare)
    reproduce = commands.add_parser(
        "reproduce", help="re-run the experiments behind the method's three claims",
        description="Sign opposition, the clinical decision task and the identity grid, with "
        "fixed seeds; writes CSV tables, a markdown summary and a self-contained HTML report.",
    )
    reproduce.add_argument("--quick", action="store_true",
                           help="a smaller run (a few minutes on 2 cores) instead of the full one")
    reproduce.add_argument("--seed", type=int, default=0,
                           help="seed of every experiment (default %(default)s)")
    reproduce.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
    _verbosity(reproduce)
    cache = commands.add_parser(
        "cache", help="show or clear the calibration-game cache",
        description="The disk cache of calibration games lives in "
        f"${CACHE_DIR_ENV} (default ~/.cache/cpdecomp; empty: memory only) and holds at most "
        f"${CACHE_MAX_BYTES_ENV} bytes (default 1 GiB); the least recently used games go first.")
    cache.add_argument("action", choices=["info", "clear"],
                       help="info: size, bound and entries; clear: remove every entry")
    _verbosity(cache)
    warmup = commands.add_parser(
        "warmup", help="compile the kernels ahead, so the first run does not wait for them",
        description="Compiles the numba kernels every run uses and keeps them in numba's cache "
        "($NUMBA_CACHE_DIR, else beside the installed code), so the first `cpdecomp explain` "
        "or dashboard Run after an install loads them instead of compiling them (half a "
        "minute to a minute on 2 cores). Run it once after installing or updating; it prints "
        "each step.")
    _verbosity(warmup)
    dashboard = commands.add_parser(
        "dashboard", help="open the dashboard (Streamlit) on this machine",
        description="Starts the dashboard with Streamlit and prints the address to open; the "
        "bundled samples are on its Data page. Needs the app extra: pip install 'cpdecomp[app]'. "
        "Any further options go to `streamlit run` (e.g. --server.headless true).")
    dashboard.add_argument("--port", type=_positive, default=8501,
                           help="port to listen on (default %(default)s)")
    dashboard.add_argument("--address", default="localhost",
                           help="address to listen on (default %(default)s: this machine only)")
    _verbosity(dashboard)
    return parser


def version_text() -> str:
    found = library_versions(("cpdecomp", "numpy", "scikit-learn"))
    return (f"cpdecomp {found['cpdecomp']} (Python {sys.version.split()[0]}, "
            f"numpy {found['numpy']}, scikit-learn {found['scikit-learn']})")


def table_limits(args: argparse.Namespace) -> TableLimits:
    """The caps, as given: --max-bytes lifts the decompressed-size cap too, never lowers it."""
    return dataclasses.replace(
        LIMITS, max_rows=args.max_rows, max_cells=args.max_cells, max_bytes=args.max_bytes,
        max_decoded_bytes=max(LIMITS.max_decoded_bytes, args.max_bytes),
    )


PARQUET_MAGIC = b"PAR1"


def stdin_to_file(folder: Path, limits: TableLimits) -> Path:
    """Standard input copied to a file in `folder`, at most the byte cap, named by its kind.

    The readers check a file before reading it (size, footer, encoding): a pipe is made one.
    """
    if sys.stdin is None or sys.stdin.isatty():
        raise CpdecompError("DATA - reads standard input, which is a terminal here: pipe a "
                            "table in (< file.csv) or give the file's name")
    source = sys.stdin.buffer
    head = source.read(len(PARQUET_MAGIC))
    if not head:
        raise CpdecompError("standard input is empty (give DATA as a file, or pipe a table in)")
    path = folder / ("stdin.parquet" if head == PARQUET_MAGIC else "stdin.csv")
    written = len(head)
    with path.open("wb") as out:
        out.write(head)
        while chunk := source.read(2**20):
            written += len(chunk)
            if written > limits.max_bytes:
                raise CpdecompError(
                    f"standard input is more than {limits.max_bytes:,} bytes, the limit "
                    "(raise it with --max-bytes)", reason="too_large")
            out.write(chunk)
    return path


def read_data(source: str, ids: Sequence[str], limits: TableLimits) -> pd.DataFrame:
    """DATA from its file, or from standard input by way of a temporary file."""
    if source != STDIN:
        return load_table(source, text_columns=ids, limits=limits)
    with tempfile.TemporaryDirectory(prefix="cpdecomp-stdin-") as folder:
        return load_table(stdin_to_file(Path(folder), limits), text_columns=ids,
                          limits=limits, label="standard input")


class Console:
    """What the command line says on stderr, by verbosity: steps, progress, the summary."""

    def __init__(self, quiet: bool = False, verbose: bool = False) -> None:
        self.quiet = quiet
        self.verbose = verbose
        self.started = time.perf_counter()

    def step(self, message: str) -> None:
        if self.verbose:
            print(f"cpdecomp: [{time.perf_counter() - self.started:7.1f} s] {message}",
                  file=sys.stderr, flush=True)

    def warn(self, message: str) -> None:
        """A finding the reader of the result should not miss (not shown with --quiet)."""
        if not self.quiet:
            print(f"cpdecomp: warning: {message}", file=sys.stderr, flush=True)

    def progress(self, label: str) -> RunProgress:
        return RunProgress(label, stream=sys.stderr, mode="off" if self.quiet else "auto")

    @contextmanager
    def library_logs(self) -> Iterator[None]:
        """With --verbose, core's own log records (event names, counts and timings only)."""
        if not self.verbose:
            yield
            return
        logger = logging.getLogger("cpdecomp")
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("cpdecomp: %(name)s: %(message)s"))
        previous = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        try:
            yield
        finally:
            logger.removeHandler(handler)
            logger.setLevel(previous)


def model_files(specs: list[str]) -> dict[str, object]:
    """{component: model} from COMPONENT=PATH arguments, each file read without unpickling."""
    models: dict[str, object] = {}
    for spec in specs:
        component, _, path = spec.partition("=")
        if not component or not path:
            raise CpdecompError(f"--model-file takes COMPONENT=PATH, got {spec!r}")
        if component in models:
            raise CpdecompError(f"--model-file gives {component!r} twice")
        models[component.strip()] = load_model_file(path)
    return models


def brought_model_text(specs: Sequence[str], models: Mapping[str, object]) -> tuple[str, str]:
    """How the log lines name the run's model: the brought files ('your f model, a
    scikit-learn Pipeline from f.skops'), short in the summary ('your scikit-learn
    Pipeline'); empty when none is brought."""
    if not models:
        return "", ""
    paths = {spec.partition("=")[0].strip(): Path(spec.partition("=")[2]).name
             for spec in specs}
    kinds = {component: model_kind(model).label for component, model in models.items()}
    each = [f"{component}: {kinds[component]} from {paths.get(component, '?')}"
            for component in models]
    labels = list(dict.fromkeys(kinds.values()))
    return ("your model" + ("s" if len(models) > 1 else "") + f" ({'; '.join(each)})",
            "your " + " + ".join(labels))


def study_options(args: argparse.Namespace) -> tuple[StudyOptions, float]:
    """The study's options and alpha from the options explain and compare share, checked
    before any file is read or model fitted."""
    output_format(args.out, args.format)  # fail before any work
    check_units(FAMILIES[args.family].scale, args.scale, args.family)  # before any work
    # A trial design: refuses an unknown or non-decomposable method with the reason, and a
    # method whose extra is missing (shap) before the data is read and the model fitted.
    build_design(args.method, 2)
    alpha = float(alpha_fraction(args.alpha))
    if args.background is not None and args.background < 1:
        raise CpdecompError("--background must be at least 1")
    features = None
    if args.features:
        features = tuple(name.strip() for name in args.features.split(",") if name.strip())
    options = StudyOptions(
        target=args.target, id_column=args.id_column, features=features, family=args.family,
        model=args.model, background=args.background, seed=args.seed,
        split=parse_split(args.split), quantile_alpha=alpha, masking=args.masking,
    )
    if (args.train is None) != (args.calibration is None):
        raise CpdecompError("give both --train and --calibration, or neither")
    if STDIN in (args.train, args.calibration, *getattr(args, "against", ())):
        raise CpdecompError("only DATA can be - (standard input); give the other tables "
                            "as files")
    return options, alpha


def training_files(args: argparse.Namespace, ids: list[str], limits: TableLimits
                   ) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """The --train and --calibration tables (both or neither: study_options checked it)."""
    if not args.train:
        return None, None
    return (load_table(args.train, text_columns=ids, limits=limits),
            load_table(args.calibration, text_columns=ids, limits=limits))


def run_explain(args: argparse.Namespace, console: Console) -> str:
    started = time.perf_counter()
    options, alpha = study_options(args)
    if args.jobs == 0 or args.jobs < -1:
        raise CpdecompError("--jobs must be a positive number of workers, or -1 for all cores")
    if args.scheduler:
        require("dask.distributed", "--scheduler")
    else:
        start_local_workers(args.jobs)  # their imports overlap the reading and fitting below
    groups = [[n.strip() for n in text.split(",") if n.strip()] for text in args.group]
    models = model_files(args.model_file)  # refused before any table is read
    ids = [args.id_column] if args.id_column else []
    limits = table_limits(args)
    train, calibration = training_files(args, ids, limits)
    data = None
    if not (train is not None and calibration is not None and args.data != STDIN):
        data = read_data(args.data, ids, limits)
        console.step(f"read {len(data):,} rows x {data.shape[1]} columns"
                     + (f", {len(train):,} training and {len(calibration):,} calibration rows"
                        if train is not None and calibration is not None else ""))
    progress = console.progress("explaining")
    # The scheduler first: an unreachable one is refused before any progress is said. The
    # heartbeat then covers the fit and the estimate's probe (which may compile the kernels).
    with parallel_backend(args.scheduler), progress.running():
        study: Study | StreamedStudy
        if data is None:
            # DATA is only the patients: read it a chunk at a time (once to check it and gather
            # its warnings, once to explain it), so memory holds a chunk, not the cohort.
            def chunks() -> Iterator[pd.DataFrame]:
                return iter_table(args.data, text_columns=ids, limits=limits)

            assert train is not None and calibration is not None
            console.step(f"read {len(train):,} training and {len(calibration):,} calibration "
                         "rows; the patients are read in chunks")
            study = prepare_streamed_study(chunks, options, train, calibration, alpha=alpha,
                                           models=models)
            n_patients = study.n_patients
        else:
            study = prepare_study(data, options, train=train, calibration=calibration,
                                  alpha=alpha, models=models)
            n_patients = len(study.patients)
        console.step(f"{fitted_text(args, models, study.n_train)} and calibrated "
                     f"({args.family}, {study.system.n_calibration:,} rows); explaining "
                     f"{n_patients:,} patients with {args.method}")
        estimate = study.estimate(args.method, args.budget, groups, args.background_bootstrap,
                                  args.fixed_quantile)
        check_time(estimate, args.max_seconds, args.masking)
        if estimate.seconds > SAY_ESTIMATE_SECONDS:
            progress.say(estimate_text(estimate, n_patients))
        progress.expect(estimate.cells, estimate.calibration_cells, n_patients)
        reports = study.iter_explain(method=args.method, alpha=alpha, units=args.scale,
                                     budget=args.budget, groups=groups,
                                     calibration_bootstrap=args.calibration_bootstrap,
                                     fixed_quantile=args.fixed_quantile,
                                     background_bootstrap=args.background_bootstrap,
                                     jobs=-1 if args.scheduler else args.jobs,
                                     progress=progress.patients)
        # Streamed: each chunk is written as it is explained, so memory holds one chunk.
        meta = write_reports(reports, args.out, args.format)
    if meta.get("coverage_by_width_warning"):
        console.warn(meta["coverage_by_width_warning"])
    where = "standard output" if args.out == STDOUT else args.out
    return (
        f"explained {n_patients} patients x {len(meta['features'])} features "
        f"({meta['family']}, {brought_model_text(args.model_file, models)[1] or args.model}, "
        f"{meta['method']}, alpha={meta['alpha']:g}, "
        f"q_hat={meta['q_hat']:.4g}) in {time.perf_counter() - started:.1f} s -> {where}; "
        f"additivity error {meta['additivity_error']:.1e}"
    )


def fitted_text(args: argparse.Namespace, models: Mapping[str, object], n_train: int) -> str:
    """'fitted gbm on 1,200 rows', or what was done with the brought models."""
    if not models:
        return f"fitted {args.model} on {n_train:,} rows"
    long, _ = brought_model_text(args.model_file, models)
    return f"took {long} as given, with {n_train:,} training rows as the background pool"


SAY_ESTIMATE_SECONDS = 5.0
"""A run expected to take longer says so, with its estimate, before it starts."""


def estimate_text(estimate: RunEstimate, n_patients: int) -> str:
    """The estimate in words: how long, how much work, and why when brute force is the cause."""
    slow = ""
    if estimate.slow:
        slow = (f"; {' and '.join(estimate.slow)} by brute force: each costs "
                f"{estimate.background:,} model rows (the background) per combination")
    if estimate.instance_path == "groups":
        # the patients' part comes from the trees' leaf groups, not from the combinations
        work = (f"{estimate.coalitions:,} feature combinations for the calibration set, "
                if estimate.calibration_cells else "")
        work += f"{n_patients:,} patients from the trees' leaf groups"
    else:
        work = (f"{estimate.coalitions:,} feature combinations for {n_patients:,} patients"
                + (" and the calibration set" if estimate.calibration_cells else ""))
    return f"expected to take about {duration(estimate.seconds)} ({work}{slow})"


def check_time(estimate: RunEstimate, limit: float | None, masking: str) -> None:
    """Refuse, before the work, a run expected past --max-seconds, naming what would fit."""
    if limit is None or estimate.seconds <= limit:
        return
    share = limit / estimate.seconds
    fits = []
    if estimate.slow and masking in ("brute", "response"):
        fits.append("--masking auto (tree tables or a closed form where the model has them)")
    if estimate.slow and int(estimate.background * share) >= 1:
        # brute force's cost is in proportion to the background
        fits.append(f"--background {int(estimate.background * share)}")
    # KernelSHAP's budget counts the feature combinations it evaluates (linear, efficient)
    budget, kernel = int(estimate.coalitions * share), METHOD_BUDGETS["kernel"]
    if kernel is not None and kernel.minimum(estimate.players) <= budget < estimate.coalitions:
        fits.append(f"--method kernel --budget {budget}")
    hint = (f"{' or '.join(fits)} would fit" if fits else
            "no smaller background or budget would fit: raise --max-seconds")
    raise CpdecompError(f"this run is expected to take about {duration(estimate.seconds)}, "
                        f"above --max-seconds {limit:g}; {hint}")


OWN_SET = "calibration"
"""compare's name for the calibration part of DATA's own split (no --calibration file)."""


def run_compare(args: argparse.Namespace, console: Console) -> str:
    started = time.perf_counter()
    options, alpha = study_options(args)
    if not args.against and args.calibration_by is None:
        raise CpdecompError("give --against FILE (another calibration set) or --calibration-by "
                            "COL (a column that splits the calibration rows into sets)")
    models = model_files(args.model_file)  # refused before any table is read
    ids = [args.id_column] if args.id_column else []
    limits = table_limits(args)
    train, calibration = training_files(args, ids, limits)
    own = OWN_SET if args.calibration is None else Path(args.calibration).stem
    names = set_names([own, *args.against])
    against = {name: load_table(path, text_columns=ids, limits=limits)
               for name, path in zip(names[1:], args.against, strict=True)}
    data = read_data(args.data, ids, limits)
    if args.calibration_by is not None:
        by = args.calibration_by
        rows = calibration if calibration is not None else data
        if by not in rows.columns:
            where = "calibration file" if calibration is not None else "data"
            raise CpdecompError(f"--calibration-by {by!r} is not a column of the {where}"
                                + did_you_mean(by, [str(c) for c in rows.columns]))
        named = brought_features(models, list((train if train is not None else data).columns)
                                 ) if models else None
        if options.features is None and named is None:  # the split's column is no feature
            chosen = choose_columns(train if train is not None else data, options.target,
                                    options.id_column, exclude=(by,))
            options = dataclasses.replace(options, features=chosen.features)
    console.step(f"read {len(data):,} rows x {data.shape[1]} columns"
                 + (f", {len(train):,} training and {len(calibration):,} calibration rows"
                    if train is not None and calibration is not None else "")
                 + "".join(f", {len(t):,} rows of {n!r}" for n, t in against.items()))
    study = prepare_study(data, options, train=train, calibration=calibration, alpha=alpha,
                          models=models)
    console.step(f"{fitted_text(args, models, study.n_train)}; comparing calibration sets "
                 f"on {len(study.patients):,} patients with {args.method}")
    groups = [[n.strip() for n in text.split(",") if n.strip()] for text in args.group]
    progress = console.progress("comparing")
    with progress.running():
        # every set's calibration game (its rows), then the patients once
        coalitions = study.estimate(args.method, args.budget, groups).coalitions
        set_rows = study.system.n_calibration + sum(len(t) for t in against.values())
        progress.expect(coalitions * (set_rows + len(study.patients)), coalitions * set_rows,
                        len(study.patients))
        comparison = study.compare(
            against if args.calibration_by is None else None, name=own, by=args.calibration_by,
            reference=args.reference, method=args.method, alpha=alpha, units=args.scale,
            budget=args.budget, groups=groups,
            calibration_bootstrap=args.calibration_bootstrap, progress=progress.patients)
    write_comparison(comparison, args.out, args.format)
    where = "standard output" if args.out == STDOUT else args.out
    return f"{comparison_summary(comparison)} in {time.perf_counter() - started:.1f} s -> {where}"


def set_names(paths: Sequence[str]) -> list[str]:
    """Each calibration file's set name: its file name without the extension, or, where two
    files share one, the path as given."""
    stems = [Path(p).stem if p != OWN_SET else p for p in paths]
    names = [stem if stems.count(stem) == 1 else path for stem, path in zip(stems, paths,
                                                                              strict=True)]
    if len(set(names)) != len(names):
        raise CpdecompError("a calibration file is given twice")
    return names


def comparison_summary(comparison: Comparison) -> str:
    """The summary line: the sets, each one's median width against the reference's and how
    many features' calibration-driven parts moved beyond the sets' noise."""
    reference = comparison.set(comparison.reference)
    sets = ", ".join(f"{s.name!r} ({s.n_calibration:,} rows)" for s in comparison.sets)
    parts = []
    for result in comparison.sets:
        if result.reference:
            continue
        change = np.median(result.width) / np.median(reference.width) - 1
        text = f"under {result.name!r} the median width is {change:+.1%}"
        if comparison.calibration_bootstrap:
            moved = ~comparison.cohort[result.name].holds_zero
            text += (f" and {int(moved.sum())} of {moved.size} calibration-driven parts moved "
                     "beyond the sets' noise")
        parts.append(text)
    return (f"compared {len(comparison.sets)} calibration sets, {sets}, on "
            f"{comparison.n_patients} patients x {len(comparison.players)} features "
            f"({comparison.family}, {comparison.method}, alpha={comparison.alpha:g}, reference "
            f"{comparison.reference!r}): {'; '.join(parts)}; identity gap "
            f"{comparison.identity['total_change_gap']:.1e}")


@contextmanager
def parallel_backend(scheduler: str | None) -> Iterator[None]:
    """Local worker processes, or the Dask cluster behind the given scheduler."""
    if scheduler is None:
        yield
        return
    distributed = require("dask.distributed", "--scheduler")
    try:
        client = distributed.Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise CpdecompError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from exc
    try:
        with dask_scheduler(client):
            yield
    finally:
        client.close()


RUNNERS_GROUP = "cpdecomp.runners"
"""Entry-point group of commands whose work lives outside the library (the experiments): the
command line names them here, and an installed distribution may say where they are, so core
never imports the layers above it."""

CHECKOUT = Path(__file__).resolve().parents[1]
"""The repository this library runs from, when it runs from a checkout (an editable install):
its experiments/ folder is not part of the installed package."""
CHECKOUT_RUNNERS = {"reproduce": ("experiments", "experiments.reproduce", "run")}
"""Where a checkout keeps each runner: (folder, module, function)."""


def runner(name: str) -> Callable[..., dict]:
    """The runner of a command that lives outside core, or a one-line refusal."""
    found = [e for e in entry_points(group=RUNNERS_GROUP) if e.name == name]
    if found:
        return found[0].load()
    folder, module, function = CHECKOUT_RUNNERS[name]
    if not (CHECKOUT / folder / "__init__.py").is_file():
        raise CpdecompError(f"'{name}' runs the {folder}, which are not part of the installed "
                            f"library: run it from a checkout of the repository")
    if str(CHECKOUT) not in sys.path:
        sys.path.append(str(CHECKOUT))
    return getattr(importlib.import_module(module), function)


def run_reproduce(args: argparse.Namespace, console: Console) -> str:
    run = runner("reproduce")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CpdecompError(f"--out must be a folder, but {out} is a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CpdecompError(f"cannot create the folder {out}: {exc.strerror}") from exc
    if not os.access(out, os.W_OK):
        raise CpdecompError(f"cannot write to the folder {out}")
    say = None
    if console.verbose or (sys.stderr.isatty() and not console.quiet):
        say = lambda message: print(f"  {message}", file=sys.stderr)  # noqa: E731
    result = run(out, quick=args.quick, seed=args.seed, progress=say)
    verdicts = "; ".join(f"{claim}: {verdict}" for claim, verdict in result["verdicts"].items())
    seconds = result["seconds"]
    total = sum(seconds.values()) if isinstance(seconds, dict) else float(seconds)
    return f"reproduction written to {out} in {total:.0f} s ({verdicts})"


def run_cache(args: argparse.Namespace, console: Console) -> str:
    cache = shared_cache()
    if cache.directory is None:
        return f"the disk cache is off (${CACHE_DIR_ENV} is empty)"
    if args.action == "clear":
        return f"removed {cache.clear()} cached calibration games from {cache.directory}"
    files = cache.files()
    size = sum(f.stat().st_size for f in files)
    return (f"{len(files)} cached calibration games, {size / 2**20:.1f} MiB of at most "
            f"{cache.disk_bytes / 2**20:,.1f} MiB (${CACHE_MAX_BYTES_ENV}; the least recently "
            f"used go first), in {cache.directory}")


def run_warmup(args: argparse.Namespace, console: Console) -> str:
    from cpdecomp.core.warmup import warm_up

    def report(line: str) -> None:
        if not console.quiet:
            print(f"cpdecomp: {line}", file=sys.stderr, flush=True)

    warm_up(report)
    return ("warmed up: the kernels are in numba's cache; a new process loads them from there "
            "instead of compiling them")


DASHBOARD = Path(__file__).resolve().parents[1] / "app" / "server.py"
"""The dashboard's server (app/main.py behind the start-up check and two endpoints kept to the
machine), in the installed package or the checkout alike."""
DASHBOARD_SETTINGS = DASHBOARD.with_name("streamlit.toml")
"""The dashboard's hospital defaults (no usage statistics, no error details, ...)."""


def streamlit_environment(settings: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment with each of the settings file's keys as a STREAMLIT_... default.

    Streamlit reads .streamlit/config.toml only from the working directory and the home folder,
    so an installed dashboard started elsewhere would run on Streamlit's own defaults (usage
    statistics sent, error details shown); a variable the caller set keeps its value.
    """
    env = dict(environ)
    for section, keys in tomllib.loads(settings.read_text(encoding="utf-8")).items():
        for key, value in keys.items():
            env.setdefault(streamlit_variable(f"{section}_{key}"),
                           str(value).lower() if isinstance(value, bool) else str(value))
    for variable in LIST_VARIABLES:
        if variable in env:
            env[variable] = " ".join(re.split(r"[\s,]+", env[variable].strip()))
    return env


LIST_VARIABLES = ("STREAMLIT_SERVER_ALLOWED_HOSTS", "STREAMLIT_SERVER_CORS_ALLOWED_ORIGINS")
"""Streamlit's list settings given in the environment: Streamlit splits them at spaces only, so
`a.example,b.example` was one host name that matched nothing and refused every connection; a
comma list is accepted too."""


def streamlit_variable(option: str) -> str:
    """Streamlit's environment variable for an option (its ConfigOption.env_var rule:
    enableCORS -> ENABLE_CORS, postScriptGC -> POST_SCRIPT_GC)."""
    snake = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", option)
    return "STREAMLIT_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", snake).upper()


def run_dashboard(args: argparse.Namespace, console: Console) -> str:
    require("streamlit", "cpdecomp dashboard")
    command = [sys.executable, "-m", "streamlit", "run", str(DASHBOARD),
               f"--server.port={args.port}", f"--server.address={args.address}",
               *args.streamlit_options]
    console.step(f"starting the dashboard: {' '.join(command[2:])}")
    sys.stderr.flush()
    # Streamlit takes this process's place: its signals (Ctrl-C, a container's SIGTERM) and
    # its exit status are the command's own, with no parent left waiting in between.
    os.execve(sys.executable, command, streamlit_environment(DASHBOARD_SETTINGS, os.environ))
    return "unreachable"  # pragma: no cover (execv does not return)


def one_line(message: str) -> str:
    """The message with line breaks and terminal control characters escaped.

    File and column names come from users: a newline would split the one error line, and an
    escape sequence would act on the terminal.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


COMMANDS = {"explain": run_explain, "compare": run_compare, "reproduce": run_reproduce,
            "cache": run_cache, "warmup": run_warmup, "dashboard": run_dashboard}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            args, rest = build_parser().parse_known_args(argv)
            if rest and args.command != "dashboard":
                build_parser().parse_args(argv)  # the unknown options' one-line refusal
            args.streamlit_options = rest
        except SystemExit as exc:  # --help and --version: printed, and done
            return exc.code if isinstance(exc.code, int) else EXIT_OK
        console = Console(quiet=args.quiet, verbose=args.verbose)
        with console.library_logs():
            summary = COMMANDS[args.command](args, console)
    except CpdecompError as exc:
        print(f"cpdecomp: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("cpdecomp: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader of --out - stopped early: it has what it wanted
        return EXIT_BROKEN_PIPE
    except Exception as exc:
        if os.environ.get("CPDECOMP_DEBUG"):
            raise
        # The type and where, not the message: messages (ours, pandas', scikit-learn's) can
        # quote cell values, and stderr often ends up in a job's log.
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        print(f"cpdecomp: internal error: {type(exc).__name__}{where} "
              "(set CPDECOMP_DEBUG=1 for details)", file=sys.stderr)
        return EXIT_INTERNAL
    if not console.quiet:
        print(summary, file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
