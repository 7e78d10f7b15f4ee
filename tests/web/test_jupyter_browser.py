"""A notebook through the dashboard in a real browser (issue 23): Debian's Chromium logs in,
``railyard jupyter`` starts JupyterLab (the test extra's) as a job of the user, the Lab page
loads at ``/ui/jobs/N/app/lab`` through the proxy, and code run in a kernel (over the
kernel's WebSocket, from the page) prints the job's CUDA_VISIBLE_DEVICES and user id. Another
user's session gets "no job" at the same URL; the app's socket is the job account's alone."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import NEEDS_ROOT
from tests.parts import require
from tests.security.test_dashboard_session import logged_in

require("chromium")
pytest.importorskip("jupyterlab", reason="pip install 'railyard[dev]' (JupyterLab)")
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from tests.web import test_dashboard_browser as dashboard  # noqa: E402

browser = dashboard.browser  # the same headless Chromium fixture

pytestmark = [*NEEDS_ROOT, pytest.mark.slow]

RUN_CELL = """
const done = arguments[arguments.length - 1];
(async () => {
  const base = location.pathname.split('lab')[0];
  const xsrf = decodeURIComponent(document.cookie.split('; ')
    .find(c => c.startsWith('_xsrf=')).slice(6));
  const made = await fetch(base + 'api/kernels', {method: 'POST', body: '{}',
    headers: {'X-XSRFToken': xsrf, 'Content-Type': 'application/json'}});
  const kernel = await made.json();
  const ws = new WebSocket(`ws://${location.host}${base}api/kernels/${kernel.id}/channels`);
  let out = '';
  ws.onopen = () => ws.send(JSON.stringify({channel: 'shell', buffers: [], metadata: {},
    parent_header: {}, header: {msg_id: 'cell1', username: 'test', session: 'browser',
      msg_type: 'execute_request', version: '5.3', date: new Date().toISOString()},
    content: {code: arguments[0], silent: false, store_history: false,
      user_expressions: {}, allow_stdin: false, stop_on_error: true}}));
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.msg_type === 'stream') out += m.content.text;
    if (m.msg_type === 'status' && m.content.execution_state === 'idle'
        && m.parent_header.msg_id === 'cell1') { ws.close(); done(out); }
  };
  ws.onerror = () => done('websocket error');
})().catch(e => done('error: ' + e));
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path_factory.mktemp("lab") / "state", gpus=2)
    proc.state_dir.mkdir(parents=True, exist_ok=True)
    proc.start(timeout_s=120)
    yield proc
    proc.stop()


def test_a_notebook_runs_a_cell_in_the_job_through_the_dashboard(
    server: ServerProcess, browser: object
) -> None:
    b = browser
    dashboard.log_in(b, server, server.token)
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "jupyter", "--gpus", "1"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    url = done.stdout.splitlines()[-1]
    job = url.split("/")[-3]
    assert url == f"{server.url}/ui/jobs/{job}/app/lab"

    def lab_loaded(driver: object) -> bool:
        driver.get(url)  # type: ignore[attr-defined]
        return "JupyterLab" in driver.title  # type: ignore[attr-defined]

    WebDriverWait(b, 120, poll_frequency=1).until(lab_loaded)
    b.set_script_timeout(120)  # type: ignore[attr-defined]
    code = "import os; print('gpus', os.environ.get('CUDA_VISIBLE_DEVICES'), 'uid', os.getuid())"
    printed = b.execute_async_script(RUN_CELL.replace("arguments[0]", repr(code)))  # type: ignore[attr-defined]
    assert printed == "gpus 0 uid 0\n"
    # Another user's session: the same URL is "no job", and the app never sees it.
    server.request("POST", "/v1/users", json={"name": "eve", "unix_user": "nobody"})
    other = server.request("POST", "/v1/tokens", json={"user": "eve"})["token"]
    assert logged_in(server.url, other).get(f"/ui/jobs/{job}/app/lab").status_code == 404
    sock = server.spool_dir / job / "app" / "app.sock"  # JupyterLab's own socket: 0600
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert stat.S_IMODE(sock.parent.stat().st_mode) == 0o700
    server.request("DELETE", f"/v1/jobs/{job}")
