"""Logging in and out of the dashboard (`/ui/login`, `/ui/logout`).

A login turns a token into a server-side session (`control.uisessions`) and sets a cookie with
the session's id only; the POST must carry the login form's CSRF value (`session.LoginForms`)
and must not come from another site. Logout ends the session in the store, not just in the
browser, so a copied cookie stops working too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from railyard.control.usecases import uisessions
from railyard.web.headers import SecureRoute
from railyard.web.page import esc, page
from railyard.web.session import (
    COOKIE,
    LOGIN_COOKIE,
    LOGIN_FORM_S,
    LoginForms,
    cross_site,
    csrf_ok,
    drop_cookie,
    set_cookie,
)

LOGIN_PATH = "/ui/login"


def form(body: bytes) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


def refused(line: str, status: int = 403) -> HTMLResponse:
    """A one-line refusal page."""
    return page("Refused", f'<p class="err">{esc(line)}</p>', user=None, status=status)


def router() -> APIRouter:
    r = APIRouter(prefix="/ui", route_class=SecureRoute, include_in_schema=False)
    forms = LoginForms()  # its key lives as long as this process: forms expire with it

    def context(request: Request) -> Any:
        return request.app.state.railyard

    @r.get("/login")
    def login_form(request: Request) -> HTMLResponse:
        cookie, value = forms.issue(context(request).clock())
        body = (
            '<form method="post" action="/ui/login">'
            f'<input type="hidden" name="csrf" value="{esc(value)}">'
            '<label>Token <input type="password" name="token" size="60" autofocus></label> '
            "<button>Log in</button></form>"
            '<p class="muted">The token `railyard up` printed, or one from '
            "`railyard admin tokens create USER`.</p>"
        )
        shown = page("Log in", body, user=None)
        set_cookie(shown, request, LOGIN_COOKIE, cookie, path=LOGIN_PATH, max_age_s=LOGIN_FORM_S)
        return shown

    @r.post("/login")
    async def login(request: Request) -> Response:
        ctx = context(request)
        fields = form(await request.body())
        other = cross_site(request)
        if other is not None:
            return refused(f"login from another site refused: {other} (hint: open "
                           f"{LOGIN_PATH} on this server and log in there)")  # fmt: skip
        if not forms.valid(request.cookies.get(LOGIN_COOKIE), fields.get("csrf"), ctx.clock()):
            return refused("login refused: the form's CSRF value is missing, stale or not this "
                           f"server's (hint: reload {LOGIN_PATH} and log in within "
                           f"{LOGIN_FORM_S // 60} minutes)")  # fmt: skip
        token = fields.get("token", "").strip()

        def start() -> tuple[str | None, str]:
            with ctx.store.session() as session:
                return uisessions.open_session(session, token, ctx.clock())

        session_id, problem = await run_in_threadpool(start) if token else (None, "no token")
        if session_id is None:
            body = f'<p class="err">{esc(problem)}</p><p><a href="{LOGIN_PATH}">Try again</a></p>'
            return page("Log in", body, user=None, status=401)
        done = RedirectResponse("/ui/", status_code=303)
        set_cookie(done, request, COOKIE, session_id)
        drop_cookie(done, request, LOGIN_COOKIE, path=LOGIN_PATH)
        return done

    @r.post("/logout")
    async def logout(request: Request) -> Response:
        ctx = context(request)
        fields = form(await request.body())
        if cross_site(request) is not None or not csrf_ok(request, fields.get("csrf")):
            return refused("the form is stale or forged (CSRF); reload the page")
        session_id = request.cookies.get(COOKIE) or ""

        def end() -> None:
            with ctx.store.session() as session:
                uisessions.close(session, session_id, ctx.clock())

        await run_in_threadpool(end)
        done = RedirectResponse(LOGIN_PATH, status_code=303)
        drop_cookie(done, request, COOKIE)
        return done

    return r
