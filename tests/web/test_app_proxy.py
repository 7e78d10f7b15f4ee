"""A web app as a job, served through the dashboard (issue 23): ``railyard jupyter --app`` on
a real root server, a small app (``tests/web/apps/echo_app.py``) on the job's Unix socket,
reached with a logged-in dashboard session over real HTTP and WebSockets. The owner alone gets
through; the app never sees the dashboard's cookie or a bearer token and cannot set the
dashboard's cookie; a WebSocket from another origin, another user, no session, and a listener
of another account (a planted symlink, a port squatter) are all refused."""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import NEEDS_ROOT
from tests.security.test_dashboard_session import logged_in
from tests.waiting import wait_for

pytestmark = NEEDS_ROOT
APP = Path(__file__).parent / "apps" / "echo_app.py"
NOBODY = pwd.getpwnam("nobody")
SYSTEM_PYTHON = "/usr/bin/python3"  # one the nobody account may run


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("apps") / "state", gpus=2)
    proc.state_dir.mkdir(parents=True, exist_ok=True)
    proc.start(timeout_s=120)
    yield proc
    proc.stop()


def start_app(server: ServerProcess, command: str) -> str:
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "jupyter", "--gpus", "1", "--app", command],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    url = done.stdout.splitlines()[-1]
    assert url.startswith(f"{server.url}/ui/jobs/"), done.stdout
    assert url.endswith("/app/"), done.stdout
    return url.split("/")[-3]


def get_when_up(client: httpx.Client, path: str) -> httpx.Response:
    """The first answer once the job's socket or port has a listener (the app starts)."""
    for _ in range(300):
        got = client.get(path)
        if got.status_code != 409 or "answered by" in got.text or "its socket is a" in got.text:
            return got
        time.sleep(0.2)
    return got


def test_the_owner_reaches_the_app_and_nothing_of_the_dashboard_reaches_it(
    server: ServerProcess,
) -> None:
    job = start_app(server, f"exec {shlex.quote(sys.executable)} {APP}")
    owner = logged_in(server.url, server.token)
    got = get_when_up(owner, f"/ui/jobs/{job}/app/info?x=1")
    assert got.status_code == 200, got.text
    seen = got.json()
    assert (seen["uid"], seen["gpus"], seen["path"]) == (0, "0", f"/ui/jobs/{job}/app/info?x=1")
    assert "railyard" not in seen["cookie"]  # the dashboard's session never reaches the app
    assert got.headers.get_list("set-cookie") == ["appcookie=1; Path=/ui/jobs"]  # not ours
    assert "service-worker-allowed" not in got.headers  # no worker over the dashboard
    assert "clear-site-data" not in got.headers
    bearer = owner.get(f"/ui/jobs/{job}/app/info", headers={"Authorization": "Bearer x"})
    assert bearer.json()["authorization"] == ""
    # WebSockets, from this origin only.
    cookie = "; ".join(f"{k}={v}" for k, v in owner.cookies.items())
    ws_url = f"ws://{server.url.split('://')[1]}/ui/jobs/{job}/app/echo"
    with connect(ws_url, additional_headers={"Cookie": cookie, "Origin": server.url}) as ws:
        ws.send("through the proxy")
        assert ws.recv(timeout=10) == "through the proxy"
    with pytest.raises(InvalidStatus):
        connect(ws_url, additional_headers={"Cookie": cookie, "Origin": "http://evil.example"})
    posted = owner.post(f"/ui/jobs/{job}/app/info", headers={"Origin": "http://127.0.0.1:1"})
    assert posted.status_code == 403  # another port of this host is the same site, not us
    # The dashboard lists the session with its Open link.
    assert f'href="/ui/jobs/{job}/app/">Open</a>' in owner.get("/ui/").text
    # Another user (logged in), or no session at all: the app never sees the request.
    server.request("POST", "/v1/users", json={"name": "mallory", "unix_user": "nobody"})
    other = server.request("POST", "/v1/tokens", json={"user": "mallory"})["token"]
    refused = logged_in(server.url, other).get(f"/ui/jobs/{job}/app/info")
    assert refused.status_code == 404
    assert f"no job &#x27;{job}&#x27;" in refused.text or f"no job '{job}'" in refused.text
    anonymous = httpx.get(f"{server.url}/ui/jobs/{job}/app/info", follow_redirects=False)
    assert (anonymous.status_code, anonymous.headers["location"]) == (303, "/ui/login")
    # Its socket's directory is the job account's alone.
    app_dir = server.spool_dir / job / "app"
    mode = app_dir.stat()
    assert (stat.S_IMODE(mode.st_mode), mode.st_uid) == (0o700, 0)
    server.request("DELETE", f"/v1/jobs/{job}")
    ended = owner.get(f"/ui/jobs/{job}/app/info")
    assert ended.status_code in (404, 409)


def _as_nobody(code: str) -> subprocess.Popen[bytes]:
    """Python code run as another account, in a process group of its own."""
    argv = ["runuser", "-u", "nobody", "--", SYSTEM_PYTHON, "-c", code]
    return subprocess.Popen(argv, start_new_session=True)


def _end(proc: subprocess.Popen[bytes]) -> None:
    """The whole group: killing runuser alone leaves its Python behind."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def nobody_socket() -> Iterator[Path]:
    """A Unix socket that another account (nobody) listens on."""
    where = Path(tempfile.mkdtemp(prefix="railyard-other-"))
    os.chmod(where, 0o755)
    os.chown(where, NOBODY.pw_uid, NOBODY.pw_gid)
    path = where / "theirs.sock"
    code = (f"import socket,time; s=socket.socket(socket.AF_UNIX); s.bind({str(path)!r}); "
            "s.listen(); time.sleep(300)")  # fmt: skip
    proc = _as_nobody(code)
    wait_for(path.exists)
    yield path
    _end(proc)
    shutil.rmtree(where, ignore_errors=True)


def test_a_listener_of_another_account_is_refused(
    server: ServerProcess, nobody_socket: Path, tmp_path: Path
) -> None:
    owner = logged_in(server.url, server.token)
    # The job plants a symlink to nobody's socket where its app should listen.
    job = start_app(server, f'ln -s {nobody_socket} "$RAILYARD_APP_SOCKET"; exec sleep 300')
    got = get_when_up(owner, f"/ui/jobs/{job}/app/")
    assert got.status_code == 409
    assert "its socket is a symbolic link, not the job account" in got.text  # never followed
    server.request("DELETE", f"/v1/jobs/{job}")
    # The job listens nowhere; nobody squats its port.
    port_file = tmp_path / "port"
    job = start_app(server, f'echo "$RAILYARD_APP_PORT" > {port_file}; exec sleep 300')
    wait_for(lambda: port_file.exists() and port_file.read_text().strip() != "")
    port = int(port_file.read_text())
    code = (f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1', {port})); s.listen(); "
            "time.sleep(300)")  # fmt: skip
    squatter = _as_nobody(code)
    try:
        wait_for(lambda: _listening(port))
        got = owner.get(f"/ui/jobs/{job}/app/")
        assert got.status_code == 409
        assert f"port {port} is answered by uid 65534" in got.text
    finally:
        _end(squatter)
        server.request("DELETE", f"/v1/jobs/{job}")
