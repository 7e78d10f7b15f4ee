"""The dashboard's round 3 (issue 60) in headless Chromium against a seeded store served by
uvicorn: the jobs list's new columns and page sizes; ticking two held jobs and cancelling
them with the bulk form (the confirmation accepted), while alice's bulk hold of the admin's
job is refused by name; the queues page's limits and over-commit flag; the alerts page;
the overview's range picker and "why GPUs stay free"; a node's utilisation page; a job whose
command has a newline and whose start event was stored as a Python dict. With
RAILYARD_SCREENSHOTS=DIR it saves each page (docs/dashboard-*.png)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import insert

from railyard.control.api.app import create_app
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.effects import record
from railyard.control.store.tables import JobRow, NodeRow, QueueMember, QueueRow, SampleRow, User
from railyard.control.usecases.auth import issue_token
from railyard.web.routes import router
from tests.parts import require
from tests.web.test_dashboard_browser import WebDriverWait, chrome, shot

require("chromium")
import uvicorn  # noqa: E402
from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.expected_conditions import staleness_of  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

FLAVOR = "h100"


def _seed(store: Store) -> dict[str, str]:
    """Two 8-GPU nodes; queue default (8) and a parentless "big" (16, a borrowing limit that
    does nothing): 24 nominal on 16 GPUs. The admin's jobs: 3 held, 2 pending behind a
    dependency, 40 finished (exit codes 0 and 3), one running on n01 with a day of readings."""
    now = time.time()
    with store.session() as s:
        admin = User(name="admin", is_admin=True, created_t_s=now)
        alice = User(name="alice", is_admin=False, created_t_s=now)
        s.add_all([admin, alice])
        s.add(QueueRow(name="default", nominal_gpus={FLAVOR: 8}, created_t_s=now))
        s.add(QueueRow(name="big", nominal_gpus={FLAVOR: 16},
                       borrowing_limit_gpus={FLAVOR: 4}, created_t_s=now))  # fmt: skip
        for n in (1, 2):
            s.add(NodeRow(name=f"n0{n}", flavor=FLAVOR, gpus=8, path=["su0", "lg0"],
                          state="ready", updated_t_s=now))  # fmt: skip
        s.flush()
        s.add(QueueMember(queue="default", user_id=alice.id))
        rows = []
        for i in range(1, 47):
            state, hold, reason = "completed", None, "Completed"
            start, end, code = now - 3000 + i * 30, now - 2900 + i * 30, (3 if i % 7 == 0 else 0)
            command = ["python", "train.py", f"--seed={i}"]
            placement = None
            if i <= 3:
                state, hold, reason = "pending", "user", "JobHeldUser"
                start, end, code = None, None, None
            elif i <= 5:
                state, reason, start, end, code = "pending", "Dependency", None, None, None
            elif i == 6:
                state, end, code, reason = "running", None, None, "Fits"
                placement = {"n01": [2, 3]}
                command = ["python", "-c", "import time\nprint('hi')\ntime.sleep(600)"]
            rows.append(JobRow(id=str(i), number=i, user_id=admin.id, queue="default",
                               state=state, hold=hold, reason=reason, command=command,
                               flavor=FLAVOR, workers=1, gpus_per_worker=2 if i == 6 else 1,
                               placement=placement, submit_t_s=now - 3600, start_t_s=start,
                               end_t_s=end, exit_code=code, name=f"run{i}",
                               updated_t_s=now))  # fmt: skip
        s.add_all(rows)
        s.flush()
        record(s, now - 600, "start", "Fits on {'n01': [2, 3]}", "6")
        readings = [{"job_id": "6", "attempt": 0, "t_s": now - 86400 + 60 * k, "node": "n01",
                     "gpu": g, "gpu_util_pct": 40.0 + 50.0 * ((k // 90) % 2)}
                    for k in range(1440) for g in (2, 3)]  # fmt: skip
        s.execute(insert(SampleRow), readings)
        _, root = issue_token(s, admin, "test", now)
        _, user = issue_token(s, alice, "test", now)
    return {"admin": root, "alice": user}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    tmp = tmp_path_factory.mktemp("round3")
    store = Store(sqlite_url(tmp / "railyard.db"))
    tokens = _seed(store)
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
    yield f"http://127.0.0.1:{port}", tokens
    server.should_exit = True
    thread.join(10)
    store.close()


def _log_in(b: object, url: str, token: str) -> None:
    b.delete_all_cookies()  # type: ignore[attr-defined]
    b.get(f"{url}/ui/login")  # type: ignore[attr-defined]
    b.find_element(By.NAME, "token").send_keys(token)  # type: ignore[attr-defined]
    b.find_element(By.TAG_NAME, "button").click()  # type: ignore[attr-defined]
    WebDriverWait(b, 20).until(lambda d: d.find_element(By.TAG_NAME, "h1").text == "Overview")


def _h1(b: object) -> str:
    return str(b.find_element(By.TAG_NAME, "h1").text)  # type: ignore[attr-defined]


def _tick(b: object, job: str) -> None:
    """Tick a job's box; the table is replaced every 2 s, and a box found just before that is
    gone when clicked (stale: the click did nothing), so find it again (CI, 2026-12-06)."""
    for _ in range(10):
        box = b.find_element(By.CSS_SELECTOR, f"#jobs input[value='{job}']")  # type: ignore[attr-defined]
        try:
            box.click()
            return
        except StaleElementReferenceException:
            continue
    raise AssertionError(f"job {job}'s box went stale ten times")


def test_round3_pages_and_actions(served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    b = chrome()
    try:
        _log_in(b, url, tokens["admin"])
        why = b.find_element(By.ID, "why-free").text
        assert "GPUs free while 5 jobs wait" in why
        b.find_element(By.LINK_TEXT, "24h").click()
        WebDriverWait(b, 20).until(lambda d: "last 24 hours" in d.page_source)
        assert b.find_element(By.CSS_SELECTOR, "#range b").text == "24h"
        shot(b, "overview-range")

        b.get(f"{url}/ui/jobs?rows=25")
        headers = [th.text for th in b.find_elements(By.CSS_SELECTOR, "thead th")]
        assert headers[8:12] == ["submitted", "started", "ended", "exit"]
        assert len(b.find_elements(By.CSS_SELECTOR, "#jobs tr")) == 25
        Select(b.find_element(By.NAME, "rows")).select_by_value("100")
        b.find_element(By.XPATH, "//button[text()='Show']").click()
        WebDriverWait(b, 20).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#jobs tr"))
                                   == 46)  # fmt: skip
        assert "3:0" in b.find_element(By.ID, "jobs").text  # job 7's exit code
        for job in ("1", "2"):
            _tick(b, job)
        table = b.find_element(By.ID, "jobs")  # its refresh (every 2 s) must keep the ticks
        WebDriverWait(b, 20).until(staleness_of(table))
        ticked = b.find_elements(By.CSS_SELECTOR, "#jobs input[name=job]:checked")
        assert sorted(box.get_attribute("value") for box in ticked) == ["1", "2"]
        shot(b, "jobs-bulk")
        Select(b.find_element(By.NAME, "action")).select_by_value("cancel")
        b.find_element(By.XPATH, "//form[@id='bulk']/button").click()
        WebDriverWait(b, 10).until(lambda d: d.switch_to.alert).accept()
        WebDriverWait(b, 20).until(lambda d: _h1(d) == "Cancel the selected jobs")
        done = b.find_element(By.ID, "bulk-done").text
        assert done.startswith("Cancelled 2 job(s): ")
        assert sorted(done.split(": ", 1)[1].split(", ")) == ["1", "2"]
        b.get(f"{url}/ui/jobs?state=cancelled")
        assert {"1", "2"} <= {a.text for a in b.find_elements(By.CSS_SELECTOR, "#jobs a")}

        b.get(f"{url}/ui/queues")
        assert "sum to 24 h100 GPUs on a cluster of 16" in b.find_element(By.ID, "overcommit").text
        assert "(no parent: does nothing)" in b.page_source
        shot(b, "queues-limits")

        b.get(f"{url}/ui/alerts")
        assert "firing" in b.find_element(By.ID, "alert-RailyardQuotaOvercommitted").find_element(
            By.XPATH, "../..").text  # fmt: skip
        shot(b, "alerts")

        b.get(f"{url}/ui/fabric")
        b.find_element(By.LINK_TEXT, "n01").click()
        WebDriverWait(b, 20).until(lambda d: _h1(d) == "Node n01")
        assert b.find_elements(By.CSS_SELECTOR, "svg[aria-label^='GPU utilisation of n01']")
        b.find_element(By.LINK_TEXT, "24h").click()
        WebDriverWait(b, 20).until(lambda d: "last 24 hours" in d.page_source)
        gpus = b.find_element(By.ID, "node-gpus").text
        assert "2 " in gpus
        shot(b, "node")

        b.get(f"{url}/ui/jobs/6")
        page = b.find_element(By.TAG_NAME, "main").text
        assert "Fits on n01:2-3" in page
        assert "$'import time\\nprint(\\'hi\\')\\ntime.sleep(600)'" in page
        shot(b, "job-words")

        _log_in(b, url, tokens["alice"])  # alice may not hold the admin's jobs
        b.get(f"{url}/ui/jobs")
        assert not b.find_elements(By.CSS_SELECTOR, "#jobs input[name=job]")  # none of hers
        b.execute_script(  # type: ignore[attr-defined]
            "const f = document.getElementById('bulk'); const i = document.createElement('input');"
            "i.type = 'hidden'; i.name = 'job'; i.value = '3'; f.appendChild(i);"
            "f.removeAttribute('data-confirm'); f.querySelector('select').value = 'release';"
            "f.submit();")  # fmt: skip
        WebDriverWait(b, 20).until(lambda d: _h1(d) == "Release the selected jobs")
        assert "3:" in b.find_element(By.ID, "bulk-refused").text
    finally:
        b.quit()
