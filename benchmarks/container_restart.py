"""A restarted container's first Run against a warm Run, with the caches where the image puts
them (/data) and where it used to (/tmp, a tmpfs lost at every restart).

For each placement, alternating: a container from the deployment guide's run line on a fresh
volume; Run on the bundled sample in chromium (cold: kernels compiled, calibration games
computed); a second Run in a new browser session on the same server (warm: the process has
both, and the finished results); then `podman stop` and `start` and a Run in a new session
(the restart's first Run). Each Run starts once the container is healthy (its health check
has run the app's script), as a platform sends users to a restarted container. The Run's
computation alone is timed too, in a process of its own in the container.
The ratio restart / warm is the figure docs/deployment.md promises (at most 1.5 with the
caches on /data). Writes docs/benchmarks/container.md.

    CONTAINERS_CONF=$PWD/.ci/containers.conf python benchmarks/container_restart.py \
        --image localhost/cpdecomp:ci --rounds 2
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
import uuid
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from dashboard_driver import free_port, health, launch, run_sample  # noqa: E402
from test_container import podman, podman_create_args  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "container.md"
IN_TMP = ["-e", "NUMBA_CACHE_DIR=/tmp/numba-cache", "-e", "CPDECOMP_CACHE_DIR=/tmp/cpdecomp-cache"]
"""The placement before: both caches in the tmpfs, as the image had them."""


def wait_healthy(url: str, name: str) -> None:
    """Until Streamlit answers and the image's own health check passes: what a platform waits
    for before it sends a restarted container users (Kubernetes' readiness probe, compose's
    and podman's `healthy`). The check runs the app's script once."""
    deadline = time.monotonic() + 180
    while not health(url):
        assert time.monotonic() < deadline, f"{name} did not answer"
        time.sleep(0.5)
    while subprocess.run(["podman", "healthcheck", "run", name], capture_output=True,
                         timeout=120).returncode != 0:
        assert time.monotonic() < deadline, f"{name} did not turn healthy"
        time.sleep(1)


def timed_run(playwright, url: str) -> float:
    browser = launch(playwright)
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        started = time.perf_counter()
        run_sample(page, url)
        return time.perf_counter() - started
    finally:
        browser.close()


def one_round(playwright, image: str, in_tmp: bool) -> tuple[float, float, float]:
    suffix = uuid.uuid4().hex[:8]
    name, volume, port = f"cpdecomp-bench-{suffix}", f"cpdecomp-bench-{suffix}", free_port()
    url = f"http://127.0.0.1:{port}"
    args = podman_create_args(name, volume, port, image)
    if in_tmp:
        args = [*args[:-1], *IN_TMP, args[-1]]
    podman("create", *args)
    try:
        podman("start", name)
        wait_healthy(url, name)
        cold = timed_run(playwright, url)
        warm = timed_run(playwright, url)
        podman("stop", "--time", "20", name)
        podman("start", name)
        wait_healthy(url, name)
        restart = timed_run(playwright, url)
        return cold, warm, restart
    finally:
        podman("rm", "--force", "--time", "5", name, check=False)
        podman("volume", "rm", "--force", volume, check=False)


PROBE = """
import json, sys, time
started = time.perf_counter()
from cpdecomp import StudyOptions
from cpdecomp.app import runs
from cpdecomp.app.sources import load_sample
imported = time.perf_counter() - started
dataset = load_sample("diabetes")
# The Setup page's defaults for the bundled sample (app/state.py): core's options, exact, 0.1.
options = StudyOptions(target=dataset.default_target, id_column=dataset.default_id)
config = runs.RunConfig(dataset.digest, dataset.name, options, "exact", None, 0.1)

def run():
    began = time.perf_counter()
    runs.compute(config, dataset)
    return time.perf_counter() - began

out = {"import": imported, "first": run()}
if "--again" in sys.argv:
    runs.fitted_study.clear()  # the fitted study and its reports: computed again, warm
    out["again"] = run()
print(json.dumps(out))
"""
"""The dashboard's Run (app/runs.compute) in a process of its own inside the container."""


def compute_round(image: str, in_tmp: bool) -> tuple[float, float, float, float]:
    """The Run's computation without the browser: (cold, warm, restart's first, the restart's
    imports), each a process in the container: the first computes twice (cold, then warm with
    its fitted study dropped), the second runs after `podman stop` and `start`."""
    import json

    suffix = uuid.uuid4().hex[:8]
    name, volume, port = f"cpdecomp-bench-{suffix}", f"cpdecomp-bench-{suffix}", free_port()
    args = podman_create_args(name, volume, port, image)
    if in_tmp:
        args = [*args[:-1], *IN_TMP, args[-1]]
    podman("create", *args)
    try:
        podman("start", name)
        wait_healthy(f"http://127.0.0.1:{port}", name)
        first = json.loads(podman("exec", name, "python", "-c", PROBE, "--again",
                                  timeout=900).splitlines()[-1])
        podman("stop", "--time", "20", name)
        podman("start", name)
        wait_healthy(f"http://127.0.0.1:{port}", name)
        again = json.loads(podman("exec", name, "python", "-c", PROBE,
                                  timeout=900).splitlines()[-1])
        return first["first"], first["again"], again["first"], again["import"]
    finally:
        podman("rm", "--force", "--time", "5", name, check=False)
        podman("volume", "rm", "--force", volume, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default=os.environ.get("CPDECOMP_TEST_IMAGE",
                                                          "localhost/cpdecomp:ci"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    rows = []
    computed = []
    for round_ in range(args.rounds):
        for in_tmp in (False, True):
            load = os.getloadavg()[0]
            cold, warm, restart, imports = compute_round(args.image, in_tmp)
            computed.append((round_ + 1, "/tmp (before)" if in_tmp else "/data (now)", cold,
                             warm, restart, restart / warm, imports, load))
            print(computed[-1], flush=True)
    with sync_playwright() as playwright:
        for round_ in range(args.rounds):
            for in_tmp in (False, True):  # alternating, so load changes hit both alike
                load = os.getloadavg()[0]
                cold, warm, restart = one_round(playwright, args.image, in_tmp)
                rows.append((round_ + 1, "/tmp (before)" if in_tmp else "/data (now)", cold,
                             warm, restart, restart / warm, load))
                print(rows[-1], flush=True)
    lines = [
        "# A restarted container's first Run",
        "",
        "`python benchmarks/container_restart.py` (see its docstring): the bundled sample's Run",
        "in chromium, timed from opening the page to the results, on a container made from",
        "docs/deployment.md's run line; cold (new volume), warm (a second session, same",
        "server: its results are reused, nothing is computed), and the first after `podman",
        "stop` + `start`, each once the container is healthy (its health check ran the app's",
        "script). Caches on /data (the image",
        "now) against both caches in the /tmp tmpfs (the image before), alternating.",
        "",
        f"{date.today().isoformat()}, {platform.machine()}, {os.cpu_count()} cores shared with "
        "other jobs; image " + args.image + ".",
        "",
        "| round | caches in | cold Run | warm Run | restart's first Run | restart / warm "
        "| load average at start |",
        "|---|---|---|---|---|---|---|",
    ]
    for round_, where, cold, warm, restart, ratio, load in rows:
        lines.append(f"| {round_} | {where} | {cold:.1f} s | {warm:.1f} s | {restart:.1f} s | "
                     f"{ratio:.2f}x | {load:.1f} |")
    lines += [
        "",
        "The computation alone (app/runs.compute, the Run's work on the server, in a process of",
        "its own in the container): cold on a new volume; warm in the same process with its",
        "fitted study dropped, so it fits and explains again with the compiled kernels and the",
        "calibration game at hand; the restart's first in a new process after `podman stop` and",
        "`start` (the imports, which the server has made before a first Run, apart).",
        "",
        "| round | caches in | cold | warm | restart's first | restart / warm | the restart's "
        "imports | load average at start |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for round_, where, cold, warm, restart, ratio, imports, load in computed:
        lines.append(f"| {round_} | {where} | {cold:.1f} s | {warm:.1f} s | {restart:.1f} s | "
                     f"{ratio:.2f}x | {imports:.1f} s | {load:.1f} |")
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
