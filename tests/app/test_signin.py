"""Sign-in: with an [auth] section in the secrets the Review queue needs a signed-in user and
records the provider's identity; without it, the reviewer types a name.

AppTest cannot reach an identity provider, so the signed-in user is AppTest's own `at.user`
(what Streamlit reads as st.user after a real sign-in) and the secrets are `at.secrets`. The
one test that presses "Sign in" loads the example secrets file as Streamlit's real secrets and
checks that st.login accepts it and redirects to Streamlit's login endpoint.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from dashboard_helpers import MAIN, ROOT, errors, run_linear
from streamlit.runtime.secrets import secrets_singleton
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1.util import patch_config_options

from cpdecomp.app.reviews import ReviewStore

EXAMPLE = ROOT / ".streamlit" / "secrets.example.toml"
SECRETS = tomllib.loads(EXAMPLE.read_text())
# What Streamlit keeps from a real sign-in: the ID token's claims (its audience among them) and
# the name of the provider's section ("default": the one set in [auth] itself).
ISSUED = {"is_logged_in": True, "provider": "default", "aud": SECRETS["auth"]["client_id"]}
CLINICIAN = {**ISSUED, "email": "a.clinician@hospital.example", "name": "A. Clinician"}


def new_app(secrets: dict | None = None, user: dict | None = None) -> AppTest:
    at = AppTest.from_file(str(MAIN), default_timeout=60)
    if secrets is not None:
        at.secrets.update(secrets)
    if user is not None:
        at.user = user
    return at.run()


def queue(at: AppTest) -> AppTest:
    return at.switch_page("views/queue.py").run()


def texts(at: AppTest) -> list[str]:
    return [t.value for t in at.text]


def test_the_example_secrets_configure_a_complete_provider() -> None:
    auth = SECRETS["auth"]
    for key in ("redirect_uri", "cookie_secret", "client_id", "client_secret",
                "server_metadata_url"):
        assert auth[key], key
    assert auth["redirect_uri"].endswith("/oauth2callback")


def test_without_sign_in_the_reviewer_types_a_name(review_db: Path) -> None:
    at = queue(run_linear(new_app()))
    assert errors(at) == [] and not [b for b in at.button if b.key.startswith("sign_in")]
    reviewer = at.text_input(key="reviewer")
    assert not reviewer.disabled
    reviewer.input("Dr. Typed")
    at.button(key="mark_reviewed").click().run()
    events = ReviewStore(review_db).history(at.session_state["last_run"].dataset_key)
    assert [e.reviewer for e in events] == ["Dr. Typed"]


def test_with_sign_in_configured_a_signed_out_user_sees_no_queue() -> None:
    at = queue(run_linear(new_app(SECRETS, {"is_logged_in": False})))
    assert errors(at) == []
    assert any("Sign in to see and review the queue" in i.value for i in at.info)
    assert at.button(key="sign_in_default").label == "Sign in"
    assert len(at.dataframe) == 0 and len(at.text_area) == 0
    assert "mark_reviewed" not in [b.key for b in at.button]
    # Nor does the Patient page show the reviews' notes.
    at.switch_page("views/patient.py").run()
    assert errors(at) == []
    assert any("Sign in on the Review queue page" in c.value for c in at.caption)


def test_a_signed_in_reviewer_is_recorded_by_identity_and_cannot_be_edited(
        review_db: Path) -> None:
    at = run_linear(new_app(SECRETS, CLINICIAN))
    at.session_state["reviewer"] = "Mallory"  # a typed name from before does not count
    queue(at)
    assert errors(at) == [] and len(at.info) == 0
    box = at.text_input(key="reviewer_signed_in")
    assert box.disabled and box.value == CLINICIAN["email"]
    assert "reviewer" not in [t.key for t in at.text_input]
    at.text_area(key="review_note").input("checked with the ward")
    at.button(key="mark_reviewed").click().run()
    assert errors(at) == []
    events = ReviewStore(review_db).history(at.session_state["last_run"].dataset_key)
    assert [(e.reviewer, e.note) for e in events] == [(CLINICIAN["email"],
                                                       "checked with the ward")]
    assert any(f"by {CLINICIAN['email']}" in line for line in texts(at))


def test_the_name_is_used_when_the_provider_gives_no_email(review_db: Path) -> None:
    at = queue(run_linear(new_app(SECRETS, {**ISSUED, "name": "B. Nurse"})))
    assert at.text_input(key="reviewer_signed_in").value == "B. Nurse"
    at.button(key="mark_reviewed").click().run()
    events = ReviewStore(review_db).history(at.session_state["last_run"].dataset_key)
    assert [e.reviewer for e in events] == ["B. Nurse"]


def test_an_identity_without_email_or_name_cannot_review() -> None:
    at = queue(new_app(SECRETS, ISSUED))
    assert any("neither an email nor a name" in e.value for e in at.error)
    assert "mark_reviewed" not in [b.key for b in at.button]


@pytest.mark.parametrize("audience", ["other-app", ["other-app"], ["other-app", "more"], None])
def test_an_id_token_for_another_audience_is_refused(review_db: Path, audience) -> None:
    """OpenID Connect Core 3.1.3.7: the dashboard's client id must be in `aud` (Authlib checks
    only azp; tests/e2e/test_oidc_sign_in.py gets such a token through a real provider)."""
    user = {**CLINICIAN, "azp": SECRETS["auth"]["client_id"], "aud": audience}
    if audience is None:
        del user["aud"]
    at = queue(run_linear(new_app(SECRETS, user)))
    assert any("issued for another application" in e and SECRETS["auth"]["client_id"] in e
               for e in errors(at))
    assert "mark_reviewed" not in [b.key for b in at.button] and len(at.text_area) == 0
    assert ReviewStore(review_db).history(at.session_state["last_run"].dataset_key) == []
    at.switch_page("views/patient.py").run()
    assert any("Sign in on the Review queue page" in c.value for c in at.caption)


def test_an_audience_list_holding_the_dashboard_is_accepted() -> None:
    at = queue(run_linear(new_app(SECRETS, {**CLINICIAN, "aud": ["other-app",
                                                              SECRETS["auth"]["client_id"]],
                                            "azp": SECRETS["auth"]["client_id"]})))
    assert errors(at) == []
    assert at.text_input(key="reviewer_signed_in").value == CLINICIAN["email"]


def test_a_named_providers_own_client_id_is_the_audience_checked() -> None:
    secrets = {"auth": {
        "redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "entra": {"client_id": "entra-id", "client_secret": "b", "server_metadata_url": "https://e/"},
        "okta": {"client_id": "okta-id", "client_secret": "d", "server_metadata_url": "https://o/"},
    }}
    signed_in = {**CLINICIAN, "provider": "okta", "aud": "okta-id"}
    at = queue(run_linear(new_app(secrets, signed_in)))
    assert errors(at) == [] and at.text_input(key="reviewer_signed_in").value == CLINICIAN["email"]
    # okta's token presented as if from entra: entra's client id is not its audience
    at = queue(run_linear(new_app(secrets, {**signed_in, "provider": "entra"})))
    assert any("client id 'entra-id'" in e for e in errors(at))


def test_signing_out_closes_the_queue() -> None:
    at = queue(run_linear(new_app(SECRETS, CLINICIAN)))
    at.button(key="sign_out").click().run()
    assert errors(at) == []
    assert at.user == {"is_logged_in": False}
    assert "mark_reviewed" not in [b.key for b in at.button]
    assert at.button(key="sign_in_default").label == "Sign in"


def test_named_providers_get_a_button_each() -> None:
    secrets = {"auth": {
        "redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "entra": {"client_id": "a", "client_secret": "b", "server_metadata_url": "https://e/"},
        "okta": {"client_id": "c", "client_secret": "d", "server_metadata_url": "https://o/"},
    }}
    at = queue(new_app(secrets, {"is_logged_in": False}))
    labels = {b.key: b.label for b in at.button if b.key.startswith("sign_in")}
    assert labels == {"sign_in_entra": "Sign in with entra", "sign_in_okta": "Sign in with okta"}


@pytest.fixture
def example_as_real_secrets(tmp_path: Path):
    """The example file as Streamlit's own secrets, which st.login validates."""
    path = tmp_path / "secrets.toml"
    path.write_text(EXAMPLE.read_text())
    secrets_singleton._reset()
    with patch_config_options({"secrets.files": [str(path)]}):
        yield
    secrets_singleton._reset()


@pytest.mark.usefixtures("example_as_real_secrets")
def test_pressing_sign_in_starts_streamlits_login() -> None:
    at = queue(new_app(user={"is_logged_in": False}))
    assert at.button(key="sign_in_default").label == "Sign in"
    at.button(key="sign_in_default").click().run()
    assert errors(at) == []  # st.login accepted the example configuration


def test_required_sign_in_without_secrets_fails_closed(monkeypatch) -> None:
    """A secrets mount that went missing must not turn the queue into typed names."""
    monkeypatch.setenv("CPDECOMP_REQUIRE_SIGN_IN", "1")
    at = queue(run_linear(new_app()))
    assert any("Sign-in is required" in e for e in errors(at))
    assert len(at.text_area) == 0 and "mark_reviewed" not in [b.key for b in at.button]
    at.switch_page("views/patient.py").run()
    assert any("Sign in on the Review queue page" in c.value for c in at.caption)


def test_required_sign_in_with_secrets_offers_sign_in(monkeypatch) -> None:
    monkeypatch.setenv("CPDECOMP_REQUIRE_SIGN_IN", "1")
    at = queue(run_linear(new_app(SECRETS, {"is_logged_in": False})))
    assert errors(at) == []
    assert at.button(key="sign_in_default").label == "Sign in"
