"""Logging in to the dashboard with a token: an HttpOnly, SameSite=Strict cookie holding it,
checked like a bearer token on every page (revoked or expired tokens stop working at once),
and a CSRF field derived from it on every form that changes something."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from fastapi import Request
from sqlalchemy.orm import Session

from railyard.control import auth
from railyard.control.tables import User

COOKIE = "railyard_session"


@dataclass(frozen=True)
class Viewer:
    """Who is looking: the user, and the CSRF value their forms carry."""

    user: User
    csrf: str

    @property
    def admin(self) -> bool:
        return bool(self.user.is_admin)


def csrf_of(token: str) -> str:
    return hashlib.sha256(b"railyard-csrf:" + token.encode()).hexdigest()[:32]


def viewer(request: Request, session: Session, now_t_s: float) -> Viewer | None:
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    user, _ = auth.identify(session, token, now_t_s)
    return Viewer(user, csrf_of(token)) if user is not None else None


def csrf_ok(request: Request, form_value: str | None) -> bool:
    token = request.cookies.get(COOKIE) or ""
    return bool(token) and hmac.compare_digest(csrf_of(token), form_value or "")
