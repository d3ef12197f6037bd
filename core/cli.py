"""The command line: `cpdecomp explain DATA --target COL ... --out FILE`.

Bad input exits with status 2 and one line on stderr that says what is wrong and how to fix
it; an unexpected failure exits with status 1, also in one line, with the error's type and
place but not its message, which could quote the data (CPDECOMP_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import joblib

from core.attribution import METHOD_BUDGETS, METHODS, build_design
from core.conformal import FAMILIES, alpha_fraction
from core.data import parse_split
from core.errors import CpdecompError
from core.games import MASKING_PATHS
from core.games.cache import CACHE_DIR_ENV, shared_cache
from core.model_files import load_model_file
from core.models import MODELS
from core.output import output_format, write_report
from core.progress import ProgressBar
from core.tables import load_table
from core.workflow import StudyOptions, prepare_study

EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 1


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (status 2), like our own errors."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise CpdecompError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="cpdecomp", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    explain = commands.add_parser(
        "explain", help="explain conformal interval widths of patients",
        description="Split each patient's interval width into calibration-driven and "
        "instance-driven attributions per feature.",
    )
    explain.add_argument("data", metavar="DATA", help="CSV or Parquet file of patients")
    explain.add_argument("--target", required=True, help="the outcome column")
    explain.add_argument("--id-column", help="column that identifies patients")
    explain.add_argument("--features", help="comma-separated feature columns (default: all others)")
    explain.add_argument("--train", help="training file; then DATA holds only patients to explain")
    explain.add_argument("--calibration", help="calibration file (with --train)")
    explain.add_argument("--split", default="0.5,0.25,0.25",
                         help="train,calibration,test fractions of DATA (default %(default)s)")
    explain.add_argument("--family", default="normalized", choices=list(FAMILIES))
    explain.add_argument("--model", default="gbm", choices=list(MODELS))
    explain.add_argument("--model-file", action="append", default=[], metavar="COMPONENT=PATH",
                         help="a fitted model for one component (f, sigma, lo, hi) instead of "
                         "fitting --model: .skops, XGBoost .json/.ubj or LightGBM .txt, never "
                         "pickle (repeatable)")
    explain.add_argument("--method", default="exact", metavar="|".join(METHODS),
                         help="attribution method (default %(default)s)")
    explain.add_argument("--budget", "--permutations", dest="budget", type=int, default=None,
                         help="budget of a sampled method: " + "; ".join(
                             f"{name}: {spec.unit} (default {spec.default})"
                             for name, spec in METHOD_BUDGETS.items() if spec is not None))
    explain.add_argument("--group", action="append", default=[], metavar="A,B",
                         help="features that enter and leave coalitions together as one player "
                         "(repeatable); the rest stay single")
    explain.add_argument("--alpha", default="0.1", help="miscoverage (default %(default)s)")
    explain.add_argument("--background", type=int, default=None,
                         help="background rows drawn from training (default: 1000 where tree "
                         "tables or a closed form apply, else 64)")
    explain.add_argument("--scale", default="width", choices=["width", "log"])
    explain.add_argument("--masking", default="auto", choices=list(MASKING_PATHS),
                         help="masked predictions: auto (tree tables or closed form where the "
                         "model allows, else brute force), tables, or brute")
    explain.add_argument("--seed", type=int, default=0)
    explain.add_argument("--jobs", type=int, default=1,
                         help="parallel workers for the patients (joblib; -1 = all cores)")
    explain.add_argument("--scheduler", metavar="ADDRESS",
                         help="run the patients on a Dask cluster (e.g. tcp://host:8786)")
    explain.add_argument("--out", required=True, help="FILE.csv, FILE.parquet or FILE.json")
    reproduce = commands.add_parser(
        "reproduce", help="re-run the experiments behind the method's three claims",
        description="Sign opposition, the clinical decision task and the identity grid, with "
        "fixed seeds; writes CSV tables, a markdown summary and a self-contained HTML report.",
    )
    reproduce.add_argument("--quick", action="store_true",
                           help="a smaller run (a few minutes on 2 cores) instead of the full one")
    reproduce.add_argument("--seed", type=int, default=0)
    reproduce.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
    cache = commands.add_parser("cache", help="show or clear the calibration-game cache",
                                description="The disk cache of calibration games lives in "
                                f"${CACHE_DIR_ENV} (default ~/.cache/cpdecomp).")
    cache.add_argument("action", choices=["info", "clear"])
    return parser


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


def run_explain(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    output_format(args.out)  # fail before any work
    if args.scale == "log" and FAMILIES[args.family].scale != "log":
        raise CpdecompError(
            f"--scale log applies to the log-scale families (normalized, gamma, cqr-r); "
            f"{args.family} attributions are in width units already"
        )
    if args.method not in METHODS:
        build_design(args.method, 1)  # refuses with the reason (unknown, or not decomposable)
    alpha = float(alpha_fraction(args.alpha))
    if args.background is not None and args.background < 1:
        raise CpdecompError("--background must be at least 1")
    if args.jobs == 0 or args.jobs < -1:
        raise CpdecompError("--jobs must be a positive number of workers, or -1 for all cores")
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
    groups = [[n.strip() for n in text.split(",") if n.strip()] for text in args.group]
    models = model_files(args.model_file)  # refused before any table is read
    ids = [args.id_column] if args.id_column else []
    data = load_table(args.data, text_columns=ids)
    train = load_table(args.train, text_columns=ids) if args.train else None
    calibration = load_table(args.calibration, text_columns=ids) if args.calibration else None
    study = prepare_study(data, options, train=train, calibration=calibration, alpha=alpha,
                          models=models)
    with parallel_backend(args.scheduler):
        report = study.explain(method=args.method, alpha=alpha, units=args.scale,
                               budget=args.budget, groups=groups,
                               jobs=-1 if args.scheduler else args.jobs,
                               progress=ProgressBar("explaining patients"))
    write_report(report, args.out)
    e = report.explanation
    return (
        f"explained {len(report.patient_ids)} patients x {len(e.features)} features "
        f"({e.family}, {args.model}, {e.method}, alpha={e.alpha:g}, q_hat={e.q_hat:.4g}) "
        f"in {time.perf_counter() - started:.1f} s -> {args.out}; "
        f"additivity error {e.decomposition.additivity_error:.1e}"
    )


@contextmanager
def parallel_backend(scheduler: str | None) -> Iterator[None]:
    """joblib's default backend, or its Dask backend connected to the given scheduler."""
    if scheduler is None:
        yield
        return
    try:
        from dask.distributed import Client
    except ImportError as exc:
        raise CpdecompError(
            "--scheduler needs Dask: pip install 'cpdecomp[cluster]'"
        ) from exc
    try:
        client = Client(scheduler, timeout="10s")
    except (OSError, TimeoutError) as exc:
        raise CpdecompError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from exc
    try:
        with joblib.parallel_config(backend="dask"):
            yield
    finally:
        client.close()


def run_reproduce(args: argparse.Namespace) -> str:
    from experiments.reproduce import run  # the experiments are a separate package

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CpdecompError(f"--out must be a folder, but {out} is a file")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CpdecompError(f"cannot create the folder {out}: {exc.strerror}") from exc
    if not os.access(out, os.W_OK):
        raise CpdecompError(f"cannot write to the folder {out}")
    say = (lambda message: print(f"  {message}", file=sys.stderr)) if sys.stderr.isatty() else None
    result = run(out, quick=args.quick, seed=args.seed, progress=say)
    verdicts = "; ".join(f"{claim}: {verdict}" for claim, verdict in result["verdicts"].items())
    seconds = result["seconds"]
    total = sum(seconds.values()) if isinstance(seconds, dict) else float(seconds)
    return f"reproduction written to {out} in {total:.0f} s ({verdicts})"


def run_cache(args: argparse.Namespace) -> str:
    cache = shared_cache()
    if cache.directory is None:
        return f"the disk cache is off (${CACHE_DIR_ENV} is empty)"
    if args.action == "clear":
        return f"removed {cache.clear()} cached calibration games from {cache.directory}"
    files = cache.files()
    size = sum(f.stat().st_size for f in files)
    return f"{len(files)} cached calibration games, {size / 2**20:.1f} MiB, in {cache.directory}"


def one_line(message: str) -> str:
    """The message with line breaks and terminal control characters escaped.

    File and column names come from users: a newline would split the one error line, and an
    escape sequence would act on the terminal.
    """
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)


COMMANDS = {"explain": run_explain, "reproduce": run_reproduce, "cache": run_cache}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        summary = COMMANDS[args.command](args)
    except CpdecompError as exc:
        print(f"cpdecomp: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("cpdecomp: interrupted", file=sys.stderr)
        return 130
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
    print(summary, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
