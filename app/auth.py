"""Optional sign-in through the hospital's OpenID Connect provider (Streamlit's `st.login`).

Sign-in is on when `.streamlit/secrets.toml` has an `[auth]` section (see
`.streamlit/secrets.example.toml`). Then the Review queue asks the user to sign in, and each
review records the identity the provider vouched for (email, else name), which the user cannot
edit. Without `[auth]`, the reviewer types a name, as on a single-user machine.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import streamlit as st

from cpdecomp.app.reviews.events import MAX_NAME
from cpdecomp.app.text import markdown_text

REQUIRE_ENV = "CPDECOMP_REQUIRE_SIGN_IN"
"""Set to 1 where sign-in is mandatory: a missing [auth] section is then an error, not a
silent fallback to typed names (a secrets mount that went missing fails closed)."""

IDENTITY_CLAIMS = ("email", "name", "preferred_username", "sub")
"""ID-token claims that name a reviewer, in order of preference."""


def configured() -> bool:
    """Whether sign-in is configured: an `[auth]` section in the secrets."""
    try:
        return "auth" in st.secrets
    except FileNotFoundError:  # no secrets.toml at all
        return False


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "").strip().lower() in {"1", "true", "yes"}


def misconfigured() -> str | None:
    """Why reviews must not be shown or taken: sign-in required but not configured."""
    if required() and not configured():
        return (f"Sign-in is required ({REQUIRE_ENV}) but the dashboard's secrets have no "
                "[auth] section, so reviews are unavailable; ask the administrator to mount "
                ".streamlit/secrets.toml.")
    return None


def providers() -> list[str | None]:
    """The providers to offer: None for one set in `[auth]` itself, and the name of each
    `[auth.NAME]` section (a table with a client_id; `client_kwargs` is a table too)."""
    section = st.secrets["auth"]
    named = [name for name, value in section.items()
             if isinstance(value, Mapping) and "client_id" in value]
    return ([None] if "client_id" in section or not named else []) + named


def client_id(provider: object) -> str | None:
    """The dashboard's client id at `provider` ("default": the one set in [auth] itself)."""
    section = st.secrets["auth"]
    if provider not in (None, "default"):
        section = section.get(str(provider))
    value = section.get("client_id") if isinstance(section, Mapping) else None
    return value if isinstance(value, str) and value else None


def wrong_audience() -> str | None:
    """Why the signed-in user's ID token does not count: it was not issued to this dashboard.

    OpenID Connect Core 3.1.3.7 has the client refuse an ID token whose `aud` does not contain
    its client id. Authlib (which Streamlit's sign-in uses) checks only `azp`: a token for
    another application that names the dashboard as its authorized party gets through it, so
    the check is made here, on the claims Streamlit keeps from the ID token."""
    user = st.user
    if user.get("is_logged_in") is not True or not configured():
        return None
    ours = client_id(user.get("provider"))
    audience = user.get("aud")
    audiences = [audience] if isinstance(audience, str) else (
        [a for a in audience if isinstance(a, str)] if isinstance(audience, list) else [])
    if ours is not None and ours in audiences:
        return None
    shown = ", ".join(repr(a[:80]) for a in audiences[:3]) or "none"
    return (f"Your sign-in was refused: the identity provider's ID token was issued for another "
            f"application (audience {shown}), not this dashboard (client id {ours!r}). Sign in "
            "again; if this repeats, ask the administrator to check the dashboard's "
            "registration with the provider.")


def identity() -> str | None:
    """The signed-in user's email (else name, username or subject), or None (also when the ID
    token was issued for another application)."""
    user = st.user
    if user.get("is_logged_in") is not True or wrong_audience() is not None:
        return None
    for claim in IDENTITY_CLAIMS:
        value = user.get(claim)
        if isinstance(value, str) and value.strip():
            return value.strip()[:MAX_NAME]
    return None


def require_sign_in(purpose: str) -> str | None:
    """The signed-in identity when sign-in is configured (None when it is not); otherwise
    offers the sign-in button(s) and stops the page."""
    problem = misconfigured()
    if problem is not None:
        st.error(problem)
        st.stop()
    if not configured():
        return None
    who = identity()
    if who is not None:
        return who
    refused = wrong_audience()
    if refused is not None:
        st.error(markdown_text(refused))
    elif st.user.get("is_logged_in") is True:
        st.error("Your sign-in gave neither an email nor a name, so reviews could not say who "
                 "made them; ask the administrator to add the email or profile scope.")
    else:
        st.info(f"Sign in to {purpose}: each review records who made it.")
    for provider in providers():
        label = f"Sign in with {provider}" if provider else "Sign in"
        if st.button(label, key=f"sign_in_{provider or 'default'}", type="primary",
                     icon=":material/login:"):
            st.login(provider)
    st.stop()


def sign_out_button() -> None:
    # st.logout in the click's callback, not after the button returned True: it queues the
    # browser's redirect to Streamlit's logout (which deletes the identity cookie and ends the
    # provider's session), and a rerun requested after it drops the queue before it is sent,
    # leaving the cookie to sign the user back in on the next page load (seen in
    # tests/e2e/test_oidc_sign_in.py). The callback's run draws the signed-out page meanwhile.
    if configured() and identity() is not None:
        st.button("Sign out", key="sign_out", icon=":material/logout:", on_click=st.logout)
