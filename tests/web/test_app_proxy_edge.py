"""The app proxy (`web.appproxy`) against what a client picks (issue 52, item 8): any path is
an answer of the app's or a 4xx, never the proxy's 5xx (``%00`` was a 502), and a request's
body streams to the app as it comes, with a cap (413 past it), instead of being held whole in
the server's memory first. A real root server, the app a job (``tests/web/apps/body_app.py``)."""

from __future__ import annotations

import shlex
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from railyard.client.bounds import MAX_REQUEST_BYTES
from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import NEEDS_ROOT
from tests.security.test_dashboard_session import logged_in
from tests.web.test_app_proxy import get_when_up, start_app

pytestmark = NEEDS_ROOT
BODY_APP = Path(__file__).parent / "apps" / "body_app.py"
PIECE = b"a" * 65536


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("appedge") / "state", gpus=2)
    proc.state_dir.mkdir(parents=True, exist_ok=True)
    proc.start(timeout_s=120)
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def app(server: ServerProcess) -> Iterator[tuple[httpx.Client, str]]:
    """The owner's session and the app's path prefix, once the app answers."""
    job = start_app(server, f"exec {shlex.quote(sys.executable)} {BODY_APP}")
    owner = logged_in(server.url, server.token)
    prefix = f"/ui/jobs/{job}/app"
    assert get_when_up(owner, f"{prefix}/seen").status_code == 200
    yield owner, prefix
    server.request("DELETE", f"/v1/jobs/{job}")
    owner.close()


@pytest.mark.parametrize(
    "rest",
    [
        "%00",
        "a%00b",
        "%0d%0aX-Injected:%201",
        "%ff%fe",
        "..%2f..%2fetc%2fpasswd",
        "%2e%2e/",
        "x%20y",
        "x?q=%00&r=%0a",
        "%",
        "%zz",
        "a" * 6000,
        "caf%C3%A9/\u00e9",
    ],
)
def test_any_path_is_the_apps_answer_or_a_4xx(app: tuple[httpx.Client, str], rest: str) -> None:
    owner, prefix = app
    got = owner.get(f"{prefix}/{rest}")
    assert got.status_code < 500, (got.status_code, got.text[:300])


def test_a_body_reaches_the_app_while_it_is_still_coming(
    server: ServerProcess, app: tuple[httpx.Client, str]
) -> None:
    owner, prefix = app
    seen_first = threading.Event()
    watcher = httpx.Client(base_url=server.url, timeout=10, cookies=owner.cookies)

    def body() -> Iterator[bytes]:
        yield PIECE
        deadline = time.monotonic() + 30  # the proxy holding the body: it never comes
        while time.monotonic() < deadline and not seen_first.is_set():
            if watcher.get(f"{prefix}/seen").json()["seen"] >= len(PIECE):
                seen_first.set()
            time.sleep(0.1)
        yield PIECE

    got = owner.post(f"{prefix}/upload", content=body(), headers={"Origin": server.url})
    watcher.close()
    assert got.status_code == 200, got.text
    assert got.json() == {"bytes": 2 * len(PIECE)}
    assert seen_first.is_set(), "the app saw nothing until the whole body had come"
    sized = owner.put(f"{prefix}/upload", content=PIECE * 3, headers={"Origin": server.url})
    assert sized.json() == {"bytes": 3 * len(PIECE)}


def test_a_body_over_the_cap_is_413_declared_or_streamed(
    server: ServerProcess, app: tuple[httpx.Client, str]
) -> None:
    owner, prefix = app
    over = MAX_REQUEST_BYTES // len(PIECE) + 1
    declared = owner.post(f"{prefix}/upload", content=PIECE * over,
                          headers={"Origin": server.url})  # fmt: skip
    assert declared.status_code == 413

    def streamed() -> Iterator[bytes]:
        for _ in range(over):
            yield PIECE

    got = owner.post(f"{prefix}/upload", content=streamed(), headers={"Origin": server.url})
    assert got.status_code == 413
    assert owner.get(f"{prefix}/seen").status_code == 200
