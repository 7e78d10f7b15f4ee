"""Dashboard sessions (issue 20, item 7): the cookie holds a server-side session's random id,
never the token, and is refused on the API; a token put in the cookie is refused on `/ui`;
logout, revoking or expiry of the token, idle and absolute limits end a session; the login
form refuses cross-site and forged POSTs; every `/ui` response carries the security headers.

Over real HTTP against the shared root site (bob's attacks from his own shell, with curl), and
at the app level (FastAPI's TestClient, both stores) where a clock or https must be faked."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import JobRow, UiSession, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases import jobs, uisessions
from railyard.web.routes import router
from railyard.web.session import COOKIE, LOGIN_COOKIE
from tests.control.conftest import Seeder, fresh_pg_database
from tests.integration.tenants import NEEDS_ROOT, Site, Tenant

F = TypeVar("F", bound=Callable[..., Any])
SECURITY_HEADERS = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def needs_root(test: F) -> F:
    for mark in NEEDS_ROOT:
        test = mark(test)
    return test


def form_csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found is not None, html
    return found.group(1)


def log_in(client: httpx.Client | TestClient, token: str, **headers: str) -> httpx.Response:
    """The browser's way: fetch the form (and its pre-login cookie), post it back."""
    csrf = form_csrf(client.get("/ui/login").text)
    return client.post("/ui/login", data={"token": token, "csrf": csrf}, headers=headers,
                       follow_redirects=False)  # fmt: skip


def logged_in(url: str, token: str) -> httpx.Client:
    client = httpx.Client(base_url=url, timeout=10)
    done = log_in(client, token)
    assert done.status_code == 303, done.text
    return client


def cookie_only(url: str, value: str) -> httpx.Client:
    """A client that holds nothing but this session cookie (a copied or stolen one)."""
    return httpx.Client(base_url=url, timeout=10, cookies={COOKIE: value})


def lands_on_login(client: httpx.Client | TestClient, path: str = "/ui/") -> bool:
    got = client.get(path, follow_redirects=False)
    return got.status_code == 303 and got.headers["location"] == "/ui/login"


def curl(tenant: Tenant, script: str) -> str:
    """``script`` with a fresh cookie jar ($jar) in bash, as the tenant's account."""
    done = tenant.shell(f'set -e; jar=$(mktemp -p .); {script}; rm -f "$jar"')
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def curl_login(tenant: Tenant, url: str, token: str, *headers: str) -> str:
    """The status of a login POST with the form's own CSRF value and ``headers``."""
    extra = " ".join(f"-H '{h}'" for h in headers)
    return curl(tenant, (
        f'csrf=$(curl -s -c "$jar" -b "$jar" {url}/ui/login | '
        "sed -n 's/.*name=\"csrf\" value=\"\\([^\"]*\\)\".*/\\1/p'); "
        f'curl -s -o /dev/null -w "%{{http_code}}" -c "$jar" -b "$jar" {extra} '
        f'--data-urlencode "token={token}" --data-urlencode "csrf=$csrf" {url}/ui/login'
    ))  # fmt: skip


# -- over real HTTP, against the shared root site ----------------------------------------------


@needs_root
def test_the_cookie_is_a_session_id_and_the_token_is_no_cookie(site: Site) -> None:
    url = site.server.url
    alice = logged_in(url, site.alice.token)
    session_id = alice.cookies[COOKIE]
    assert session_id != site.alice.token
    assert not session_id.startswith("ry_")
    assert "<h1>Overview</h1>" in alice.get("/ui/").text
    # the session id is no bearer token on the API
    api = httpx.get(f"{url}/v1/jobs", headers={"Authorization": f"Bearer {session_id}"})
    assert api.status_code == 401
    # bob puts his own token (or alice's session id, mangled) in the cookie: the login page
    for value in (site.bob.token, session_id + "x"):
        status = curl(site.bob, f'curl -s -o /dev/null -w "%{{http_code}} %{{redirect_url}}" '
                                f"-b '{COOKIE}={value}' {url}/ui/")  # fmt: skip
        assert status == f"303 {url}/ui/login"


@needs_root
def test_logout_ends_the_session_for_every_copy_of_the_cookie(site: Site) -> None:
    url = site.server.url
    alice = logged_in(url, site.alice.token)
    copy = cookie_only(url, alice.cookies[COOKIE])
    assert not lands_on_login(copy)
    csrf = form_csrf(alice.get("/ui/").text)
    out = alice.post("/ui/logout", data={"csrf": csrf}, follow_redirects=False)
    assert out.status_code == 303
    assert out.headers["location"] == "/ui/login"
    assert lands_on_login(copy)  # ended in the store, not only in alice's browser
    assert lands_on_login(copy, "/ui/jobs")


@needs_root
def test_revoking_the_token_ends_its_sessions(site: Site) -> None:
    url = site.server.url
    made = site.server.request("POST", "/v1/tokens", json={"user": "alice", "label": "ui"})
    alice = logged_in(url, made["token"])
    assert not lands_on_login(alice)
    site.server.request("DELETE", f"/v1/tokens/{made['id']}")
    assert lands_on_login(alice)


@needs_root
def test_the_tokens_expiry_ends_its_sessions(site: Site) -> None:
    url = site.server.url
    made = site.server.request("POST", "/v1/tokens", json={"user": "alice", "expires_in_s": 3})
    alice = logged_in(url, made["token"])
    assert not lands_on_login(alice)
    time.sleep(max(0.0, made["expires_t_s"] - time.time()) + 0.5)
    assert lands_on_login(alice)


@needs_root
def test_a_cross_site_login_post_is_refused(site: Site) -> None:
    url = site.server.url
    token = site.bob.token
    assert curl_login(site.bob, url, token, "Origin: https://evil.example") == "403"
    assert curl_login(site.bob, url, token, "Sec-Fetch-Site: cross-site") == "403"
    assert curl_login(site.bob, url, token, "Sec-Fetch-Site: same-site") == "403"
    # a page elsewhere cannot read the form's value: without it, or with another, refused
    forged = curl(site.bob, f'curl -s -o /dev/null -w "%{{http_code}}" -c "$jar" -b "$jar" '
                            f'--data-urlencode "token={token}" {url}/ui/login')  # fmt: skip
    assert forged == "403"
    other = curl(site.bob, (
        f'curl -s -o /dev/null -c "$jar" -b "$jar" {url}/ui/login; '
        f'curl -s -o /dev/null -w "%{{http_code}}" -c "$jar" -b "$jar" '
        f'--data-urlencode "token={token}" --data-urlencode "csrf={"0" * 64}" {url}/ui/login'
    ))  # fmt: skip
    assert other == "403"
    # the same site, as a browser sends it: logged in
    same = ("Sec-Fetch-Site: same-origin", f"Origin: {url}")
    assert curl_login(site.bob, url, token, *same) == "303"
    assert curl_login(site.bob, url, token) == "303"  # no such headers (curl, scripts)


@needs_root
def test_every_ui_response_carries_the_security_headers(site: Site) -> None:
    url = site.server.url
    alice = logged_in(url, site.alice.token)
    anyone = httpx.Client(base_url=url, timeout=10)
    root = anyone.get("/", follow_redirects=False)
    assert root.status_code == 307
    assert root.headers["location"] == "/ui/"
    answers = {
        "login page": anyone.get("/ui/login"),
        "a page": alice.get("/ui/jobs"),
        "a 404": alice.get("/ui/no-such-page"),
        "a 404 POST": anyone.post("/ui/no-such-action"),
        "a redirect": anyone.get("/ui/", follow_redirects=False),
        "GET /": root,
        "a 422": alice.get("/ui/jobs/1/log", params={"rank": "x"}),
        "a refusal": anyone.post("/ui/login", data={"token": "x"}),
        "a static file": anyone.get("/ui/static/app.js"),
        "the style sheet": anyone.get("/ui/static/app.css"),
    }
    assert answers["a 404"].status_code == 404
    assert answers["a redirect"].status_code == 303
    assert answers["a static file"].headers["content-type"].startswith("text/javascript")
    for what, got in answers.items():
        for name, value in SECURITY_HEADERS.items():
            assert got.headers.get(name) == value, (what, name, got.headers)
        csp = got.headers.get("content-security-policy", "")
        assert "default-src 'self'" in csp, what
        assert "frame-ancestors 'none'" in csp, what
        assert "unsafe-inline" not in csp, what


# -- at the app level: a faked clock, https ---------------------------------------------------


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        made = Store(sqlite_url(tmp_path / "railyard.db"))
        yield made
        made.close()
        return
    with fresh_pg_database() as url:
        made = Store(url)
        yield made
        made.close()


class Clock:
    def __init__(self) -> None:
        self.t_s = time.time()

    def __call__(self) -> float:
        return self.t_s


def app_client(store: Store, tmp_path: Path, clock: Clock, base_url: str = "http://testserver"
               ) -> TestClient:  # fmt: skip
    app = create_app(store, wake=lambda: None, state_dir=tmp_path, clock=clock,
                     extra_routers=[router()])  # fmt: skip
    return TestClient(app, base_url=base_url)


def set_cookie_of(response: httpx.Response, name: str) -> str:
    [line] = [h for h in response.headers.get_list("set-cookie") if h.startswith(f"{name}=")]
    return line.lower()


def test_the_cookies_are_secure_over_https_only(store: Store, tmp_path: Path) -> None:
    tokens = Seeder(store).cluster()
    for scheme in ("https", "http"):
        client = app_client(store, tmp_path, Clock(), f"{scheme}://testserver")
        form = client.get("/ui/login")
        done = log_in(client, tokens["alice"])
        assert done.status_code == 303, done.text
        for line in (set_cookie_of(form, LOGIN_COOKIE), set_cookie_of(done, COOKIE)):
            assert "httponly" in line
            assert "samesite=strict" in line
            assert ("; secure" in line) == (scheme == "https"), line
        assert "path=/ui" in set_cookie_of(done, COOKIE)
        assert tokens["alice"] not in done.headers["set-cookie"]
        assert "<h1>Overview</h1>" in client.get("/ui/").text


def test_idle_and_absolute_limits_end_a_session(store: Store, tmp_path: Path) -> None:
    tokens = Seeder(store).cluster()
    clock = Clock()
    client = app_client(store, tmp_path, clock)
    assert log_in(client, tokens["alice"]).status_code == 303
    clock.t_s += uisessions.IDLE_S - 60
    assert not lands_on_login(client)  # a request: the idle limit starts again
    clock.t_s += uisessions.IDLE_S - 60
    assert not lands_on_login(client)
    clock.t_s += uisessions.IDLE_S
    assert lands_on_login(client)  # idle too long

    assert log_in(client, tokens["alice"]).status_code == 303
    began = clock.t_s
    while clock.t_s + 3600 < began + uisessions.ABSOLUTE_S:
        clock.t_s += 3600
        assert not lands_on_login(client)  # busy all day
    clock.t_s = began + uisessions.ABSOLUTE_S
    assert lands_on_login(client)  # but 12 hours is the end


def test_a_login_sweeps_ended_sessions(store: Store, tmp_path: Path) -> None:
    tokens = Seeder(store).cluster()
    clock = Clock()
    for _ in range(3):
        assert log_in(app_client(store, tmp_path, clock), tokens["bob"]).status_code == 303
    clock.t_s += uisessions.IDLE_S + 1
    assert log_in(app_client(store, tmp_path, clock), tokens["alice"]).status_code == 303
    with store.session() as session:
        left = session.scalar(select(func.count()).select_from(UiSession))
    assert left == 1  # bob's three idle sessions are gone; alice's new one stays


def test_a_demoted_or_deleted_user_loses_what_the_session_gave(store: Store, tmp_path: Path
                                                                ) -> None:  # fmt: skip
    seeder = Seeder(store)
    seeder.cluster()
    carol = seeder.user("carol", admin=True, queues=("default",))
    client = app_client(store, tmp_path, Clock())
    assert log_in(client, carol).status_code == 303
    assert "drain</button>" in client.get("/ui/fabric").text
    with store.session() as session:
        session.scalars(select(User).where(User.name == "carol")).one().is_admin = False
    assert "drain</button>" not in client.get("/ui/fabric").text  # read at every request
    with store.session() as session:
        session.delete(session.scalars(select(User).where(User.name == "carol")).one())
    assert lands_on_login(client)


def test_pages_have_no_inline_script_or_style(store: Store, tmp_path: Path) -> None:
    tokens = Seeder(store).cluster()
    client = app_client(store, tmp_path, Clock())
    assert log_in(client, tokens["root"]).status_code == 303
    with store.session() as session:
        root = session.scalars(select(User).where(User.name == "root")).one()
        spec = JobSubmit.model_validate({"command": ["true"], "gpus": 1})
        [submitted] = jobs.submit(session, root, spec, time.time(), spool_dir=Path("/x"))
        job_id = submitted.id
        row = session.get(JobRow, job_id)  # submit answers with plain values, not rows
        assert row is not None
        row.state, row.placement, row.start_t_s = "running", {"n01": [0]}, time.time()
    pages = ["/ui/login", "/ui/", "/ui/jobs", "/ui/fabric", "/ui/queues", "/ui/queues/whatif",
             f"/ui/jobs/{job_id}"]  # fmt: skip
    for path in pages:
        text = client.get(path).text
        assert re.search(r"<script(?![^>]*\bsrc=)", text) is None, path
        assert re.search(r"\son[a-z]+=", text) is None, path
        assert " style=" not in text, path
        assert "<style" not in text, path
    fabric = client.get("/ui/fabric", params={"job": job_id}).text
    assert re.search(r'class="gpu h\d+" title="job ' + re.escape(job_id), fabric)
