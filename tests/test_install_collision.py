"""The built wheel installs one import package, `cpdecomp`, and lives beside other projects.

An analyst installs cpdecomp next to their notebook's packages, some of which have short names
of their own (PyPI holds packages named `app`, `core` and `sample-data`). This test builds the
wheel from the checkout, installs it into a fresh virtual environment that already holds three
such packages, and checks that the command line, the Python API and the dashboard's entry file
work there, that the three packages still import as themselves, and that uninstalling cpdecomp
leaves their files alone.

The fresh environment gets cpdecomp's dependencies from this one (a `.pth` file names this
environment's site-packages, which adds its folders to the path but none of its `.pth` hooks,
so this environment's editable cpdecomp stays out): no package index is needed.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from timing import seconds

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "sample_data" / "diabetes.csv"
OTHERS = ("app", "core", "sample_data")
"""Top-level names that other projects use (and the checkout's own folders)."""


def other_wheel(folder: Path, name: str) -> Path:
    """A minimal wheel of another project whose import package is `name`."""
    dist = f"other_{name}"
    files = {
        f"{name}/__init__.py": f"WHO = 'the other {name}'\n",
        f"{dist}-1.0.dist-info/METADATA":
            f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n",
        f"{dist}-1.0.dist-info/WHEEL":
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{dist}-1.0.dist-info/top_level.txt": f"{name}\n",
    }
    path = folder / f"{dist}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        record = []
        for member, text in files.items():
            data = text.encode()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{member},sha256={digest.decode()},{len(data)}")
            wheel.writestr(member, data)
        record.append(f"{dist}-1.0.dist-info/RECORD,,")
        wheel.writestr(f"{dist}-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def built_wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(out), str(ROOT)],
                   check=True, capture_output=True, timeout=600, cwd=out)
    (wheel,) = out.glob("cpdecomp-*.whl")
    return wheel


def test_the_wheel_holds_one_top_level_package(built_wheel):
    with zipfile.ZipFile(built_wheel) as wheel:
        names = wheel.namelist()
        top = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(
            ".dist-info")}
        assert top == {"cpdecomp"}
        (top_level,) = [n for n in names if n.endswith(".dist-info/top_level.txt")]
        assert wheel.read(top_level).decode().split() == ["cpdecomp"]
        # what the library needs at run time, through the links of cpdecomp/
        assert "cpdecomp/core/schema/explanation.schema.json" in names
        assert "cpdecomp/sample_data/diabetes.csv" in names
        assert "cpdecomp/app/main.py" in names
        # the studies and benchmarks stay in the checkout
        assert not [n for n in names if "experiments" in n or "benchmarks" in n]


@pytest.mark.slow
def test_the_wheel_installs_beside_packages_named_app_core_and_sample_data(built_wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = Path(subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    (site / "cpdecomp_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"

    def run(*argv: str | Path, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                              timeout=600, cwd=tmp_path, env=env, check=False)
        assert not check or done.returncode == 0, (argv, done.stdout, done.stderr)
        return done

    pip = (python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index")
    run(*pip, *(other_wheel(tmp_path, name) for name in OTHERS))
    run(*pip, built_wheel)

    # the other projects still import as themselves, cpdecomp as itself
    for name in OTHERS:
        assert run(python, "-c", f"import {name}; print({name}.WHO)").stdout.strip() == \
            f"the other {name}"
    api = run(python, "-c", (
        "import cpdecomp\n"
        "from cpdecomp import Explainer, fit_system, load_table, split_rows, target_values\n"
        "from cpdecomp.sample_data import SAMPLES\n"
        "table = load_table(SAMPLES['diabetes'].path)\n"
        "y = target_values(table, 'progression')\n"
        "features = [c for c in table.columns if c not in ('patient_id', 'progression')]\n"
        "train, calibration, test = split_rows(len(table), (0.5, 0.25, 0.25), seed=0)\n"
        "system = fit_system(table.iloc[train], y[train], features, family='normalized',\n"
        "                    model='linear')\n"
        "system = system.conformalize(table.iloc[calibration], y[calibration])\n"
        "explainer = Explainer(system, background_size=32, seed=0)\n"
        "result = explainer.explain(table.iloc[test[:3]], method='exact', alpha=0.1)\n"
        "print(cpdecomp.__file__)\n"
        "print(result.decomposition.total.shape)\n"))
    assert str(site) in api.stdout and "(3, 10)" in api.stdout, api.stdout

    out = tmp_path / "explained.csv"
    cli = run(venv / "bin" / "cpdecomp", "explain", SAMPLE, "--target", "progression",
              "--id-column", "patient_id", "--model", "linear", "--background", "16",
              "--out", out)
    assert out.stat().st_size > 0, cli.stderr

    # the dashboard's entry file runs in the new environment (Streamlit's own test runner)
    page = run(python, "-c", (
        "import os, cpdecomp.app\n"
        "from streamlit.testing.v1 import AppTest\n"
        "main = os.path.join(os.path.dirname(cpdecomp.app.__file__), 'main.py')\n"
        f"at = AppTest.from_file(main, default_timeout={seconds(120):.0f}).run()\n"
        "assert not at.exception, at.exception\n"
        "print(main)\n"))
    assert page.stdout.strip().startswith(str(site)), page.stdout

    # the checkout's `reproduce` needs the experiments, which the wheel does not carry
    reproduce = run(venv / "bin" / "cpdecomp", "reproduce", "--quick", "--out", tmp_path / "r",
                    check=False)
    assert reproduce.returncode == 2 and "checkout" in reproduce.stderr, reproduce.stderr

    run(python, "-m", "pip", "uninstall", "--quiet", "--yes", "cpdecomp")
    for name in OTHERS:
        assert (site / name / "__init__.py").read_text() == f"WHO = 'the other {name}'\n"
    # all that may stay is numba's cache of compiled kernels (written beside the source at run
    # time, so no installer knows of it)
    left = [p for p in (site / "cpdecomp").rglob("*") if p.is_file()]
    assert [p for p in left if p.suffix not in (".nbi", ".nbc")] == []
