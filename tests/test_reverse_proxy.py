"""deploy/nginx.conf, the documented reverse proxy, in front of a real dashboard.

nginx runs that very file (only its ports, certificate paths and upstream address replaced)
with a self-signed certificate; chromium then runs the bundled sample through it, which needs
the WebSocket upgrade and Streamlit's origin check to pass. The metrics endpoint is refused,
plain HTTP redirects to HTTPS, an upload larger than the cap gets 413 from nginx before any
byte reaches the dashboard, and chromium refuses to show the proxied dashboard in a frame of
another page (clickjacking), which it does show when framed straight from Streamlit. A
download works through the proxy for the session that made it; its URL without the session's
cookie is refused by nginx itself, and no /media URL reaches the access log. nginx names no
version of itself, and refuses the app's script check (the container's own probe).
"""

from __future__ import annotations

import http.client
import os
import re
import shutil
import ssl
import subprocess
import time
import tomllib
from pathlib import Path

import pytest
from ci_policy import unavailable
from dashboard_driver import (
    ROOT,
    STEP_TIMEOUT,
    browser_missing,
    free_port,
    launch,
    open_page,
    run_sample,
    streamlit_server,
)

NGINX_SITE = ROOT / "deploy" / "nginx.conf"
CONFIG = ROOT / ".streamlit" / "config.toml"


def megabytes(size: str) -> int:
    number, unit = re.fullmatch(r"(\d+)([kmg]?)", size.lower()).groups()
    return int(number) * {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}[unit] // 1024**2


def upload_limit() -> int:
    """client_max_body_size of the site, in MB."""
    return megabytes(re.search(r"client_max_body_size\s+(\S+);", NGINX_SITE.read_text())[1])


def test_proxy_body_limit_leaves_room_above_the_dashboards_upload_cap():
    # A file of exactly the cap arrives wrapped in multipart headers: the proxy must pass it.
    cap = tomllib.loads(CONFIG.read_text())["server"]["maxUploadSize"]
    assert upload_limit() > cap


def site_for_test(folder: Path, upstream: int, http_port: int, https_port: int) -> str:
    """The documented site with this test's ports, certificate and upstream."""
    site = NGINX_SITE.read_text()
    replacements = [
        (r"server 127\.0\.0\.1:8501;", f"server 127.0.0.1:{upstream};"),
        (r"listen 80;", f"listen 127.0.0.1:{http_port};"),
        (r"listen 443 ssl;", f"listen 127.0.0.1:{https_port} ssl;"),
        (r"ssl_certificate\s+\S+;", f"ssl_certificate {folder / 'tls.crt'};"),
        (r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {folder / 'tls.key'};"),
    ]
    for pattern, replacement in replacements:
        site, count = re.subn(pattern, replacement, site)
        assert count == 1, f"deploy/nginx.conf no longer has {pattern!r}"
    return site


def nginx_config(folder: Path, site: str) -> str:
    """A whole nginx.conf around the site: everything nginx writes stays in `folder`."""
    user = "user root root;\n" if os.geteuid() == 0 else ""  # workers must read `folder`
    temp = "\n".join(f"    {kind}_temp_path {folder / kind};"
                     for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"{user}daemon off;\nworker_processes 1;\npid {folder / 'nginx.pid'};\n"
            f"error_log {folder / 'error.log'} warn;\nevents {{ worker_connections 256; }}\n"
            f"http {{\n    access_log {folder / 'access.log'};\n{temp}\n{site}\n}}\n")


@pytest.fixture(scope="module")
def tools() -> None:
    missing = [name for name in ("nginx", "openssl") if shutil.which(name) is None
               and not Path(f"/usr/sbin/{name}").exists()]
    reason = (f"{' and '.join(missing)} missing (apt-get install nginx)" if missing
              else browser_missing())
    if reason is not None:
        unavailable(reason)


def request(port: int, method: str, path: str, tls: bool = True,
            headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # the test's self-signed certificate
        connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10,
                                                 context=context)
    else:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    connection.request(method, path, headers=headers or {})
    response = connection.getresponse()
    response.body = response.read()  # type: ignore[attr-defined]
    connection.close()
    return response


def framed(context, url: str) -> bool:
    """Whether chromium shows `url` in an iframe of a page from another origin."""
    page = context.new_page()
    refusals: list[str] = []
    page.on("console", lambda message: refusals.append(message.text)
            if "frame-ancestors" in message.text or "X-Frame-Options" in message.text
            else None)
    page.set_content(f'<iframe id="decoy" src="{url}" width="800" height="600"></iframe>')
    frame = page.frame_locator("#decoy")
    try:
        # Streamlit's page mounts its root element; a refused frame shows chromium's error.
        frame.locator("#root").wait_for(state="attached", timeout=10_000)
        shown = True
    except Exception:  # Playwright's TimeoutError: the frame never held the dashboard
        shown = False
    page.close()
    assert shown or refusals, "the frame neither showed the dashboard nor was refused"
    return shown


@pytest.mark.slow
def test_dashboard_through_the_documented_nginx_site(tools, tmp_path):
    from playwright.sync_api import sync_playwright

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-keyout", str(tmp_path / "tls.key"),
                    "-out", str(tmp_path / "tls.crt")], check=True, capture_output=True)
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(tmp_path / "reviews.sqlite3"),
                   "CPDECOMP_CACHE_DIR": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    with streamlit_server(environment, tmp_path / "streamlit.log") as (dashboard, _):
        upstream = int(dashboard.rsplit(":", 1)[1])
        http_port, https_port = free_port(), free_port()
        config = tmp_path / "nginx.conf"
        config.write_text(nginx_config(tmp_path, site_for_test(tmp_path, upstream, http_port,
                                                                https_port)))
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        checked = subprocess.run([nginx, "-t", "-c", str(config)], capture_output=True,
                                 text=True)
        assert checked.returncode == 0, checked.stderr
        proxy = subprocess.Popen([nginx, "-c", str(config)], stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    health = request(https_port, "GET", "/_stcore/health")
                    break
                except OSError:
                    assert proxy.poll() is None, (tmp_path / "error.log").read_text()
                    assert time.monotonic() < deadline, "nginx did not start"
                    time.sleep(0.2)
            assert health.status == 200
            assert health.getheader("Server") == "nginx"  # server_tokens off: no version
            assert "max-age" in (health.getheader("Strict-Transport-Security") or "")
            page = request(https_port, "GET", "/")
            assert page.getheader("X-Frame-Options") == "DENY"
            assert page.getheader("Content-Security-Policy") == "frame-ancestors 'none'"

            redirect = request(http_port, "GET", "/", tls=False)
            assert redirect.status == 301
            name = re.search(r"server_name\s+(\S+);", NGINX_SITE.read_text())[1]
            assert redirect.getheader("Location") == f"https://{name}/"

            assert request(https_port, "GET", "/_stcore/metrics").status == 403
            refused = request(https_port, "GET", "/_stcore/script-health-check")
            assert refused.status == 403 and b"nginx/" not in refused.body
            # The dashboard itself does answer metrics: only the proxy keeps them in.
            assert request(upstream, "GET", "/_stcore/metrics", tls=False).status == 200

            too_big = (upload_limit() + 1) * 1024**2
            refused = request(https_port, "PUT", "/_stcore/upload_file/session/file",
                              headers={"Content-Length": str(too_big)})
            assert refused.status == 413

            media = "/media/"
            with sync_playwright() as playwright:
                browser = launch(playwright)
                try:
                    context = browser.new_context(ignore_https_errors=True)
                    page = context.new_page()
                    run_sample(page, f"https://127.0.0.1:{https_port}")
                    open_page(page, "Review queue")
                    with page.expect_download(timeout=STEP_TIMEOUT) as started:
                        page.locator(".st-key-download_queue_csv button").click()
                    media = "/media/" + started.value.url.split("/media/", 1)[1]
                    assert Path(started.value.path()).read_bytes().startswith(b"\xef\xbb\xbf")
                    # No cookie: nginx answers (its own page), the dashboard never sees it.
                    bare = request(https_port, "GET", media)
                    assert bare.status == 404 and b"nginx" in bare.body
                    # Another browser's cookie gets through nginx, and the dashboard refuses.
                    forged = request(https_port, "GET", media, headers={
                        "Cookie": "_streamlit_xsrf=2|00000000|0000|1"})
                    assert forged.status == 404 and b"nginx" not in forged.body
                    assert framed(context, f"https://127.0.0.1:{https_port}/") is False
                    # Streamlit alone lets itself be framed: only the proxy forbids it.
                    assert framed(context, f"{dashboard}/") is True
                finally:
                    browser.close()
        finally:
            proxy.terminate()
            proxy.wait(timeout=10)
        logged = (tmp_path / "access.log").read_text()
        assert "/_stcore/health" in logged  # the log is written...
        assert media not in logged and " /media/" not in logged  # ...without downloads
