"""Sign-in end to end against a real OpenID Connect provider.

panva's oidc-provider (OpenID Certified; tests/oidc/provider.js, installed by `.ci/run` with
`npm ci`) runs on a free port with the dashboard registered as a confidential client, a second
application beside it and test users with passwords. The dashboard's `[auth]` section points at
its discovery document, and chromium signs in through the provider's login form: the redirect,
the code exchange with PKCE, the ID token's signature, issuer, nonce and expiry checked by
Streamlit's Authlib, the identity cookie Streamlit signs. Then:

* a review is recorded under the provider's identity (the ID token's email), in a reviewer box
  the user cannot edit, and stored so in the review store;
* signing out ends the session at the provider too (RP-initiated logout): signing in again asks
  for the password again;
* a session cookie changed by hand (another email under the original signature) and one
  signed with the dashboard's own secret but older than Streamlit's 30-day lifetime are
  refused, while the same cookie re-signed now is accepted (so the refusal is the age's);
* an ID token for another audience is refused: the provider signs, after a real login, a token
  whose `aud` is the other application, with no `azp` (Authlib refuses it at the callback) or
  naming the dashboard as its authorized party (Authlib accepts that one; the dashboard refuses
  it, with a message saying why).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import timing
from ci_policy import unavailable
from dashboard_driver import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    STEP_TIMEOUT,
    dashboard_command,
    free_port,
    open_page,
    run_sample,
    settle,
    streamlit_server,
)

OIDC = ROOT / "tests" / "oidc"
PROVIDER_JS = OIDC / "provider.js"
DASHBOARD_CLIENT = ("cpdecomp-dashboard", "dashboard-test-secret")  # as provider.js registers
ADA = ("ada", "ada-password", "ada.lovelace@hospital.example")
GRACE_EMAIL = "grace.hopper@hospital.example"
USER_COOKIE = "_streamlit_user"
COOKIE_DAYS = 30  # Streamlit's AUTH_COOKIE_MAX_AGE_SECONDS; it accepts one day of grace beyond
DEADLINE = timing.seconds(30)


NODE_AT_LEAST = (20, 12)  # oidc-provider 9 hashes with crypto.hash, new in Node 20.12


def provider_missing() -> str | None:
    node = shutil.which("node")
    if node is None:
        return "node is not installed (apt-get install nodejs)"
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout
    found = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
    if found < NODE_AT_LEAST:
        return f"node {version.strip()} is older than oidc-provider needs (20.12)"
    if not (OIDC / "node_modules" / "oidc-provider" / "package.json").is_file():
        return f"oidc-provider is not installed in {OIDC} (cd tests/oidc && npm ci)"
    return None


def discovery(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(f"{url}/.well-known/openid-configuration",
                                    timeout=2) as answer:
            return json.load(answer)
    except OSError:
        return None


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    return free_port(), free_port()


@pytest.fixture(scope="module")
def provider(ports, tmp_path_factory) -> Iterator[str]:
    """The provider's issuer URL, once its discovery document answers."""
    reason = provider_missing()
    if reason is not None:
        unavailable(reason)
    provider_port, dashboard_port = ports
    log = tmp_path_factory.mktemp("oidc") / "provider.log"
    with log.open("ab") as output:
        process = subprocess.Popen(
            ["node", str(PROVIDER_JS), str(provider_port),
             f"http://localhost:{dashboard_port}/oauth2callback"],
            cwd=OIDC, stdout=output, stderr=subprocess.STDOUT)
    issuer = f"http://localhost:{provider_port}"
    try:
        deadline = time.monotonic() + DEADLINE
        while (document := discovery(issuer)) is None:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the provider did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        assert document["issuer"] == issuer
        yield issuer
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def cookie_secret() -> str:
    return secrets.token_urlsafe(48)


@pytest.fixture(scope="module")
def dashboard(provider, ports, cookie_secret, tmp_path_factory) -> Iterator[dict]:
    """The dashboard with [auth] pointing at the provider: its URL, review store and log."""
    _, port = ports
    folder = tmp_path_factory.mktemp("dashboard")
    client_id, client_secret = DASHBOARD_CLIENT
    secrets_file = folder / "secrets.toml"
    # oidc-provider offers the prompts login, consent and none: Streamlit's default
    # prompt=select_account (Entra ID's, Google's) is not one of them.
    secrets_file.write_text(f"""[auth]
redirect_uri = "http://localhost:{port}/oauth2callback"
cookie_secret = "{cookie_secret}"
client_id = "{client_id}"
client_secret = "{client_secret}"
server_metadata_url = "{provider}/.well-known/openid-configuration"
client_kwargs = {{ scope = "openid profile email", prompt = "login" }}
""")
    store = folder / "reviews.sqlite3"
    environment = {**os.environ, "CPDECOMP_REVIEW_DB": str(store),
                   "CPDECOMP_CACHE_DIR": str(folder / "cache"), "OMP_NUM_THREADS": "1"}
    log = folder / "server.log"
    command = [*dashboard_command(port), "--secrets.files", str(secrets_file)]
    with streamlit_server(environment, log, command=command, port=port):
        yield {"url": f"http://localhost:{port}", "store": store, "log": log,
               "authorization_endpoint": discovery(provider)["authorization_endpoint"]}


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser) -> Iterator:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    yield context.new_page()
    context.close()


def queue(page, url: str) -> None:
    page.goto(f"{url}/queue")
    settle(page)


def sign_in_button(page):
    return page.locator(".st-key-sign_in_default button")


def sign_in(page, url: str, login: str, password: str) -> None:
    """Press Sign in on the Review queue, fill the provider's login form, come back."""
    from playwright.sync_api import expect

    queue(page, url)
    expect(sign_in_button(page)).to_be_visible(timeout=STEP_TIMEOUT)
    sign_in_button(page).click()
    page.get_by_label("Username").wait_for(timeout=STEP_TIMEOUT)
    assert page.url.startswith("http://localhost:") and "/interaction/" in page.url
    page.get_by_label("Username").fill(login)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(url) + r"/?$"), timeout=STEP_TIMEOUT)
    settle(page)


def signed_in_without_results(page) -> bool:
    """On the Review queue before any run: signed in shows the pointer to Setup, signed out
    the sign-in button (waits until the page shows one of them and not the other)."""
    main = page.get_by_test_id("stMain")  # the sidebar says "No results yet" too
    signed_out = main.get_by_text("Sign in to see and review the queue")
    signed_in = main.get_by_text("No results yet")
    deadline = time.monotonic() + STEP_TIMEOUT / 1000
    while time.monotonic() < deadline:
        shown = (signed_in.is_visible(),
                 signed_out.is_visible() and sign_in_button(page).is_visible())
        if shown == (True, False):
            return True
        if shown == (False, True):
            return False
        page.wait_for_timeout(200)
    raise AssertionError("the Review queue showed neither the signed-in nor the signed-out page")


def user_cookie(page) -> dict:
    [cookie] = [c for c in page.context.cookies() if c["name"] == USER_COOKIE]
    return cookie


def stored_reviews(store: Path) -> list[tuple[str, str]]:
    """(reviewer, status) of every review event, read from the SQLite file itself."""
    connection = sqlite3.connect(store)
    try:
        return list(connection.execute("SELECT reviewer, status FROM review_events"))
    finally:
        connection.close()


def test_sign_in_reviews_under_the_providers_identity_and_sign_out_ends_it(
        page, dashboard) -> None:
    from playwright.sync_api import expect

    url = dashboard["url"]
    login, password, email = ADA
    # A wrong password stays at the provider.
    queue(page, url)
    sign_in_button(page).click()
    page.get_by_label("Username").fill(login)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    assert not [c for c in page.context.cookies() if c["name"] == USER_COOKIE]

    page.get_by_label("Username").fill(login)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(re.escape(url) + r"/?$"), timeout=STEP_TIMEOUT)
    settle(page)
    cookie = user_cookie(page)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"

    run_sample(page, url)
    open_page(page, "Review queue")
    reviewer = page.locator(".st-key-reviewer_signed_in input")
    expect(reviewer).to_have_value(email, timeout=STEP_TIMEOUT)
    expect(reviewer).to_be_disabled()
    assert not page.locator(".st-key-reviewer input").count()  # no box for a typed name
    page.locator(".st-key-review_note textarea").fill("checked with the ward")
    page.locator(".st-key-mark_reviewed button").click()
    settle(page)
    expect(page.get_by_text(re.compile(r"Case .+ marked reviewed"))).to_be_visible(
        timeout=STEP_TIMEOUT)
    assert stored_reviews(dashboard["store"]) == [(email, "reviewed")]

    # The provider holds a session for the user (seen in another tab of the same browser): it
    # would sign them in without a form.
    silent = authorization_url(dashboard, prompt="none")
    tab = page.context.new_page()
    with tab.expect_request(re.compile(r"/oauth2callback\?.*code=")):
        tab.goto(silent)
    tab.close()

    # Signing out goes through the provider's logout page and back to the dashboard.
    page.locator(".st-key-sign_out button").click()
    expect(page).to_have_url(re.compile(r"/session/end"), timeout=STEP_TIMEOUT)
    page.get_by_role("button", name=re.compile("Yes", re.IGNORECASE)).click()
    page.wait_for_url(re.compile(re.escape(url) + r"/?$"), timeout=STEP_TIMEOUT)
    settle(page)
    assert not [c for c in page.context.cookies() if c["name"] == USER_COOKIE]
    queue(page, url)
    assert not signed_in_without_results(page)
    # The provider's session ended too: it now answers the same request with login_required.
    with page.expect_request(re.compile(r"/oauth2callback\?.*error=login_required")):
        page.goto(silent)
    settle(page)
    queue(page, url)
    assert not signed_in_without_results(page)


def authorization_url(dashboard: dict, prompt: str) -> str:
    """An authorization request of the dashboard's client, as a browser would send it."""
    from urllib.parse import urlencode

    query = urlencode({"client_id": DASHBOARD_CLIENT[0], "response_type": "code",
                       "scope": "openid", "redirect_uri": f"{dashboard['url']}/oauth2callback",
                       "state": secrets.token_urlsafe(16), "prompt": prompt})
    return f"{dashboard['authorization_endpoint']}?{query}"


@pytest.fixture(scope="module")
def signed_in_cookies(browser, dashboard) -> list[dict]:
    """The cookies of a real sign-in (ada's), taken from a browser context of their own."""
    context = browser.new_context()
    page = context.new_page()
    login, password, _ = ADA
    sign_in(page, dashboard["url"], login, password)
    cookies = context.cookies()
    context.close()
    assert USER_COOKIE in [c["name"] for c in cookies]
    return cookies


def with_user_cookie(cookies: list[dict], value: str) -> list[dict]:
    return [{**c, "value": value} if c["name"] == USER_COOKIE else c for c in cookies]


def serializer(secret: str, signed_at: float | None = None):
    """Streamlit's signer for the identity cookie (itsdangerous, salted with the cookie's
    name), optionally stamping a time of our choosing."""
    from itsdangerous import TimestampSigner, URLSafeTimedSerializer

    class Stamped(TimestampSigner):
        def get_timestamp(self) -> int:
            return int(signed_at if signed_at is not None else time.time())

    return URLSafeTimedSerializer(secret, salt=USER_COOKIE, signer=Stamped)


def queue_in(browser, dashboard, cookies: list[dict]) -> bool:
    """Open the Review queue in a fresh context holding `cookies`: signed in?"""
    context = browser.new_context()
    try:
        context.add_cookies(cookies)
        page = context.new_page()
        queue(page, dashboard["url"])
        return signed_in_without_results(page)
    finally:
        context.close()


def test_the_real_cookie_signs_in_a_new_browser(browser, dashboard, signed_in_cookies) -> None:
    assert queue_in(browser, dashboard, signed_in_cookies)


def test_a_tampered_session_cookie_is_refused(browser, dashboard, signed_in_cookies,
                                              cookie_secret) -> None:
    real = next(c["value"] for c in signed_in_cookies if c["name"] == USER_COOKIE)
    claims = json.loads(serializer(cookie_secret).loads(real))
    assert claims["email"] == ADA[2]
    # Another user's email in the payload, under the original timestamp and signature.
    forged = serializer(cookie_secret).dumps(json.dumps({**claims, "email": GRACE_EMAIL}))
    payload = forged.rsplit(".", 2)[0]
    tampered = ".".join([payload, *real.rsplit(".", 2)[1:]])
    assert tampered != real
    assert not queue_in(browser, dashboard, with_user_cookie(signed_in_cookies, tampered))
    # A signature of any other key is refused as well.
    other_key = serializer(secrets.token_urlsafe(48)).dumps(json.dumps(claims))
    assert not queue_in(browser, dashboard, with_user_cookie(signed_in_cookies, other_key))


def test_an_expired_session_cookie_is_refused(browser, dashboard, signed_in_cookies,
                                              cookie_secret) -> None:
    real = next(c["value"] for c in signed_in_cookies if c["name"] == USER_COOKIE)
    claims = serializer(cookie_secret).loads(real)
    # The same identity, signed with the dashboard's own secret: accepted when signed now...
    fresh = serializer(cookie_secret).dumps(claims)
    assert queue_in(browser, dashboard, with_user_cookie(signed_in_cookies, fresh))
    # ...and refused once older than the cookie's 30 days and Streamlit's day of grace.
    old = serializer(cookie_secret, time.time() - (COOKIE_DAYS + 1) * 86400 - 3600).dumps(claims)
    assert not queue_in(browser, dashboard, with_user_cookie(signed_in_cookies, old))


def test_an_id_token_for_another_audience_without_azp_is_refused_at_the_callback(
        page, dashboard) -> None:
    """Authlib refuses it (azp is required when aud is not the client): the user stays signed
    out and the server log says why."""
    sign_in(page, dashboard["url"], "other-audience", "other-password")
    assert not [c for c in page.context.cookies() if c["name"] == USER_COOKIE]
    queue(page, dashboard["url"])
    assert not signed_in_without_results(page)
    log = dashboard["log"].read_text()
    assert "OAuth token exchange failed" in log and "azp" in log


def test_an_id_token_for_another_audience_naming_the_dashboard_is_refused_by_the_dashboard(
        page, dashboard) -> None:
    """Authlib accepts it (azp is the dashboard); the dashboard checks aud itself."""
    from playwright.sync_api import expect

    sign_in(page, dashboard["url"], "other-audience-azp", "other-password")
    assert USER_COOKIE in [c["name"] for c in page.context.cookies()]  # Authlib let it in
    queue(page, dashboard["url"])
    expect(page.get_by_text("Your sign-in was refused")).to_be_visible(timeout=STEP_TIMEOUT)
    expect(page.get_by_text("issued for another application")).to_be_visible()
    expect(page.get_by_test_id("stMain").get_by_text("No results yet")).not_to_be_visible()
    expect(sign_in_button(page)).to_be_visible()
    # With results to review, the queue still takes no review under that identity.
    run_sample(page, dashboard["url"])
    open_page(page, "Review queue")
    expect(page.get_by_text("Your sign-in was refused")).to_be_visible(timeout=STEP_TIMEOUT)
    assert not page.locator(".st-key-mark_reviewed").count()
