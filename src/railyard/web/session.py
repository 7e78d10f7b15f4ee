"""Logging in to the dashboard: a server-side session (`control.uisessions`) whose random id is
the only thing the cookie holds, CSRF values for the login form and for every action, and the
cross-site check every POST passes.

Cookies are HttpOnly, SameSite=Strict, Path=/ui, and Secure when the request came over https
(uvicorn with TLS, or behind a proxy it trusts with ``--forwarded-allow-ips``). The login form
is a signed double submit (OWASP's CSRF Prevention Cheat Sheet): ``GET /ui/login`` sets a
short-lived pre-login cookie ``<issued>.<nonce>`` and puts its HMAC under a key this process
drew at start into the form, so a page elsewhere can neither read the pair nor forge one, even
if it plants a cookie. Action forms carry a value derived from the session id, never the token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from fastapi import Request, Response
from sqlalchemy.orm import Session

from railyard.control.usecases import uisessions
from railyard.control.usecases.actor import Actor

COOKIE = "railyard_session"
LOGIN_COOKIE = "railyard_login"
LOGIN_FORM_S = 600  # the login form works for 10 minutes after it was served
SAME_ORIGIN = ("same-origin", "none")  # Sec-Fetch-Site values of our own pages (or typed)


@dataclass(frozen=True)
class Viewer:
    """Who is looking: the user, and the CSRF value their forms carry."""

    user: Actor
    csrf: str

    @property
    def admin(self) -> bool:
        return bool(self.user.is_admin)


def csrf_of(session_id: str) -> str:
    return hashlib.sha256(b"railyard-csrf:" + session_id.encode()).hexdigest()[:32]


def viewer(request: Request, session: Session, now_t_s: float) -> Viewer | None:
    session_id = request.cookies.get(COOKIE) or ""
    user = uisessions.current(session, session_id, now_t_s) if session_id else None
    return Viewer(user, csrf_of(session_id)) if user is not None else None


def csrf_ok(request: Request, form_value: str | None) -> bool:
    session_id = request.cookies.get(COOKIE) or ""
    return bool(session_id) and hmac.compare_digest(csrf_of(session_id), form_value or "")


def set_cookie(response: Response, request: Request, name: str, value: str, *,
               path: str = "/ui", max_age_s: int | None = None) -> None:  # fmt: skip
    response.set_cookie(name, value, max_age=max_age_s, path=path, httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")  # fmt: skip


def drop_cookie(response: Response, request: Request, name: str, *, path: str = "/ui") -> None:
    response.delete_cookie(name, path=path, httponly=True, samesite="strict",
                           secure=request.url.scheme == "https")  # fmt: skip


def cross_site(request: Request) -> str | None:
    """Why a POST is refused as coming from another site, or None. Browsers send
    ``Sec-Fetch-Site`` and ``Origin`` on a form POST; clients without them (curl, the tests)
    still need the CSRF value."""
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site not in SAME_ORIGIN:
        return f"Sec-Fetch-Site is {fetch_site}"
    origin = request.headers.get("origin")
    own = str(request.base_url).rstrip("/")
    if origin is not None and origin != own:
        return f"Origin {origin} is not {own}"
    return None


class LoginForms:
    """Pre-login CSRF values: a cookie and the HMAC the form carries, valid LOGIN_FORM_S."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def _mac(self, cookie: str) -> str:
        return hmac.new(self._key, cookie.encode(), hashlib.sha256).hexdigest()

    def issue(self, now_t_s: float) -> tuple[str, str]:
        """(the cookie's value, the form's value)."""
        cookie = f"{int(now_t_s)}.{secrets.token_urlsafe(16)}"
        return cookie, self._mac(cookie)

    def valid(self, cookie: str | None, form_value: str | None, now_t_s: float) -> bool:
        if not cookie or not form_value or len(cookie) > 64:
            return False
        issued, _, _ = cookie.partition(".")
        if not issued.isdigit() or not 0 <= now_t_s - int(issued) <= LOGIN_FORM_S:
            return False
        return hmac.compare_digest(self._mac(cookie), form_value)
