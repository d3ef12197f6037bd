"""Packaging: what pyproject.toml declares, what the base install can run, and the one-line
message when an extra is missing.

A missing extra is made real in a child process: a `sitecustomize` on its path puts a finder
first on `sys.meta_path` that refuses to import the named packages, so `import shap` fails there
as it does where shap is not installed (our code is not patched). The fresh-venv check of the
base install (`pip install .`, which needs the package index) is described in README.md.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from cpdecomp.core.optional import EXTRAS

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

BLOCKER = '''
import importlib.abc, os, sys

BLOCKED = set(os.environ["CPDECOMP_TEST_BLOCK"].split(","))


class Blocker(importlib.abc.MetaPathFinder):
    """Refuses the blocked packages and their submodules, as if they were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocker())
'''

IMPORT_NAMES = {"sklearn": "scikit-learn", "xgboost": "xgboost-cpu"}
"""Import names that differ from their distribution's name."""


def run_without(blocked: list[str], tmp_path: Path, *argv: str) -> subprocess.CompletedProcess:
    """`python *argv` in a child where the blocked packages cannot be imported."""
    site = tmp_path / "blocker"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}",
           "CPDECOMP_TEST_BLOCK": ",".join(blocked)}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                          timeout=300, check=False, env=env, cwd=tmp_path)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower()


def base_names() -> set[str]:
    return {requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}


def extra_names(extra: str) -> set[str]:
    """The distributions an extra brings, following cpdecomp[...] references."""
    names: set[str] = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"][extra]:
        if requirement_name(requirement) == "cpdecomp":
            for inner in re.search(r"\[(.*)\]", requirement).group(1).split(","):
                names |= extra_names(inner.strip())
        else:
            names.add(requirement_name(requirement))
    return names


def module_imports(path: Path) -> tuple[set[str], set[str]]:
    """Third-party top-level names imported at module level, and inside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top, nested = set(), set()
    function_nodes = {id(n) for f in ast.walk(tree)
                      if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
                      for n in ast.walk(f) if n is not f}
    type_checking = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                     and ast.unparse(node.test) == "TYPE_CHECKING" for n in ast.walk(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module.split(".")[0]]
        else:
            continue
        third_party = {n for n in names if n not in sys.stdlib_module_names
                       and n not in {"cpdecomp", "__future__"}}
        if id(node) in type_checking:
            continue
        (nested if id(node) in function_nodes else top).update(third_party)
    return top, nested


# --------------------------------------------------------------------------- pyproject.toml


def test_core_imports_only_declared_base_dependencies() -> None:
    """Every package core/ imports when its modules load is a base dependency."""
    declared = base_names()
    undeclared = {}
    for path in sorted((ROOT / "core").rglob("*.py")):
        top, _ = module_imports(path)
        missing = {IMPORT_NAMES.get(n, n) for n in top} - declared
        if missing:
            undeclared[str(path.relative_to(ROOT))] = sorted(missing)
    assert undeclared == {}


def test_extras_are_imported_only_through_require() -> None:
    """No module of core/ imports an extra's package directly (at any level): they go through
    core.optional.require, which names the extra when the package is missing."""
    extras = {module.split(".")[0] for module in EXTRAS}
    direct = {}
    for path in sorted((ROOT / "core").rglob("*.py")):
        top, nested = module_imports(path)
        if (top | nested) & extras:
            direct[str(path.relative_to(ROOT))] = sorted((top | nested) & extras)
    assert direct == {}


def test_the_dashboard_and_extras_are_not_in_the_base_install() -> None:
    base = base_names()
    for name in ("streamlit", "plotly", "psycopg", "authlib", "dask", "shap"):
        assert name not in base, name
    assert {"numba", "threadpoolctl", "numpy", "pandas", "scipy", "scikit-learn",
            "pyarrow"} <= base


def test_each_extra_of_the_optional_imports_installs_it() -> None:
    for module, (distribution, extra) in EXTRAS.items():
        assert requirement_name(distribution) in extra_names(extra), (module, extra)


def test_dev_installs_everything() -> None:
    """The README's `pip install -e ".[dev]"` still gives the dashboard and every extra."""
    dev = extra_names("dev")
    for extra in PYPROJECT["project"]["optional-dependencies"]:
        assert extra_names(extra) <= dev, extra
    assert {"streamlit", "plotly", "psycopg", "dask", "shap", "jsonschema"} <= dev


def test_the_schema_ships_in_the_wheel() -> None:
    data = PYPROJECT["tool"]["setuptools"]["package-data"]["cpdecomp.core"]
    assert "schema/*.json" in data
    assert list((ROOT / "core" / "schema").glob("*.json"))


# ------------------------------------------------------------------------- lazy imports


def test_import_cpdecomp_loads_no_heavy_library(tmp_path) -> None:
    """`import cpdecomp` is cheap: scikit-learn, numba, SciPy and pandas load on first use."""
    done = run_without([], tmp_path, "-c", "import sys, cpdecomp; print(','.join(sorted(m for m in "
                       "('sklearn', 'numba', 'scipy', 'pandas', 'shap') if m in sys.modules)))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_public_names_import_from_the_front_door(tmp_path) -> None:
    import cpdecomp

    for name in cpdecomp.__all__:
        assert getattr(cpdecomp, name) is not None, name
    with pytest.raises(AttributeError):
        cpdecomp.no_such_name  # noqa: B018


# ----------------------------------------------------------------------- missing extras


def test_shap_kernel_without_shap_is_one_line_naming_the_extra(tmp_path) -> None:
    done = run_without(["shap"], tmp_path, "-m", "cpdecomp", "explain", str(SAMPLE),
                       "--target", "progression", "--id-column", "patient_id", "--model",
                       "linear", "--method", "shap-kernel", "--out", str(tmp_path / "o.csv"))
    line = one_error_line(done)
    assert line == ("cpdecomp: error: the shap-kernel method needs shap: "
                    "pip install 'cpdecomp[shap]'")
    assert not (tmp_path / "o.csv").exists()


@pytest.mark.parametrize("method", ["exact", "shap-permutation"])
def test_the_engine_runs_without_any_extra(tmp_path, method) -> None:
    """Without shap, Dask, streamlit, plotly, psycopg and Authlib the batch engine still
    explains the sample; shap-permutation too, as it replays shap's draws without shap."""
    blocked = ["shap", "dask", "distributed", "streamlit", "plotly", "psycopg", "authlib"]
    out = tmp_path / "o.csv"
    done = run_without(blocked, tmp_path, "-m", "cpdecomp", "explain", str(SAMPLE), "--target",
                       "progression", "--id-column", "patient_id", "--model", "linear",
                       "--method", method, "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 0


def test_a_scheduler_without_dask_is_one_line_naming_the_extra(tmp_path) -> None:
    done = run_without(["dask", "distributed"], tmp_path, "-m", "cpdecomp", "explain",
                       str(SAMPLE), "--target", "progression", "--scheduler",
                       "tcp://127.0.0.1:1", "--out", str(tmp_path / "o.csv"))
    line = one_error_line(done)
    assert line == ("cpdecomp: error: --scheduler needs dask[distributed]: "
                    "pip install 'cpdecomp[cluster]'")


def test_a_postgres_review_store_without_psycopg_names_the_extra(tmp_path) -> None:
    done = run_without(["psycopg"], tmp_path, "-c", (
        "from cpdecomp.app.reviews import ReviewStore\n"
        "from cpdecomp.core.errors import CpdecompError\n"
        "try:\n"
        "    ReviewStore('postgresql://nobody@127.0.0.1:1/none')\n"
        "except CpdecompError as error:\n"
        "    print(error)\n"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("a postgresql:// review database needs psycopg: "
                                   "pip install 'cpdecomp[postgres]'")


def test_a_broken_install_of_an_extra_says_so(tmp_path) -> None:
    """shap is there but a package it needs is not: not 'install shap' but 'reinstall'."""
    done = run_without(["slicer"], tmp_path, "-c", (
        "from cpdecomp.core.optional import require\n"
        "from cpdecomp.core.errors import CpdecompError\n"
        "try:\n"
        "    require('shap', 'the shap-kernel method')\n"
        "except CpdecompError as error:\n"
        "    print(error)\n"))
    assert done.returncode == 0, done.stderr
    assert "installed but cannot be imported" in done.stdout
    assert "'slicer'" in done.stdout and "cpdecomp[shap]" in done.stdout


def test_test_files_have_unique_names():
    """pytest imports test files by their base name (no packages under tests/): two files of one
    name in different folders make the whole run error at collection."""
    tests = Path(__file__).resolve().parent
    names = [path.name for path in tests.rglob("test_*.py")]
    assert sorted(name for name in set(names) if names.count(name) > 1) == []
