"""A 2,048-GPU fabric (256 nodes of 8 GPUs, 2 scalable units of 8 leaf groups) in headless
Chromium: the heat-map fits on one screen at 1280 x 900, in its hierarchy's order, with a
failed node in the attention list; a picked job's nodes are in its color. With
RAILYARD_SCREENSHOTS=DIR it saves the map (docs/dashboard-fabric-2048.png)."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator

import pytest

from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import JobRow, NodeRow, QueueRow, User
from railyard.control.usecases.auth import issue_token
from railyard.web.routes import router
from tests.parts import require
from tests.web.test_dashboard_browser import SHOTS, WebDriverWait, chrome, shot

require("chromium")
import uvicorn  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

NODES, GPUS = 256, 8


def _seed(store: Store) -> str:
    """The cluster, about 70% busy with jobs of 1 to 64 GPUs; node 77 is down for a bad
    cable and node 130 failed its health check. Returns an admin token."""
    now = time.time()
    rng = random.Random(5)
    with store.session() as s:
        admin = User(name="admin", is_admin=True, created_t_s=now)
        s.add(admin)
        s.add(QueueRow(name="default", nominal_gpus={"h100": NODES * GPUS}, created_t_s=now))
        for n in range(NODES):
            s.add(NodeRow(name=f"node{n:03}", flavor="h100", gpus=GPUS,
                          path=[f"su{n // 128}", f"su{n // 128}-lg{n % 128 // 16}"],
                          state="down" if n == 77 else "ready",
                          reason="link flapping on rail 3" if n == 77 else "",
                          health="fail" if n == 130 else "pass", updated_t_s=now))  # fmt: skip
        s.flush()
        node, number = 0, 0
        while node < NODES * 0.7:
            size = rng.choice((1, 2, 4, 8, 8, 16, 32, 64))
            count = max(1, size // GPUS)
            placement = {f"node{node + k:03}": list(range(min(size, GPUS))) for k in range(count)}
            number += 1
            s.add(JobRow(id=str(number), number=number, user_id=admin.id, queue="default",
                         state="running", command=["train"], flavor="h100",
                         workers=count, gpus_per_worker=min(size, GPUS), placement=placement,
                         submit_t_s=now - 600, start_t_s=now - 300, updated_t_s=now))  # fmt: skip
            node += count
        _, token = issue_token(s, admin, "test", now)
    return token


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("fabric")
    store = Store(sqlite_url(tmp / "railyard.db"))
    token = _seed(store)
    app = create_app(store, wake=lambda: None, state_dir=tmp, extra_routers=[router()])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}", token
    server.should_exit = True
    thread.join(10)
    store.close()


def test_a_2048_gpu_fabric_fits_on_one_screen(served: tuple[str, str]) -> None:
    url, token = served
    b = chrome()
    try:
        b.get(f"{url}/ui/login")
        b.find_element(By.NAME, "token").send_keys(token)
        b.find_element(By.TAG_NAME, "button").click()
        WebDriverWait(b, 10).until(lambda d: d.find_element(By.TAG_NAME, "h1").text == "Overview")
        b.get(f"{url}/ui/fabric")
        squares = b.find_elements(By.CSS_SELECTOR, "a.cell")
        assert len(squares) == NODES
        bottom = max(sq.rect["y"] + sq.rect["height"] for sq in squares)
        assert bottom <= 900, f"the map ends {bottom} px down: more than one screen"
        units = [e.text for e in b.find_elements(By.CSS_SELECTOR, "div.su > b")]
        assert units == ["su0", "su1"]
        bad = b.find_element(By.ID, "bad-nodes").text
        assert "node077" in bad
        assert "link flapping on rail 3" in bad
        assert "node130" in bad
        if SHOTS:
            shot(b, "fabric-2048")
        b.get(f"{url}/ui/fabric?job=3")
        assert b.find_elements(By.CSS_SELECTOR, "a.cell.pick")  # job 3's nodes, in its color
        assert b.find_elements(By.CSS_SELECTOR, "a.cell.dim")  # and the others faded
    finally:
        b.quit()
