"""The dashboard in a real headless browser (Debian's Chromium through Selenium) against a
real `railyard up --blueprint gaggle-h100` server: log in, submit from the CLI and watch the
job appear and finish on the jobs page without a reload, read its log as it is written, drain
a node from the fabric map (confirming the dialog) and see it drained there, find the job's
GPU time on the accounting page; another user is refused the job's page. With
RAILYARD_SCREENSHOTS=DIR it saves each page there (docs/ holds the ones
docs/how-to/dashboard.md shows)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server_proc import ServerProcess
from tests.parts import require

require("chromium")
from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    WebDriverException,
)
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait as _Wait  # noqa: E402


def WebDriverWait(driver: object, timeout_s: float) -> _Wait:
    """The jobs table is replaced every 2 s, and a login's redirect replaces the page: an
    element found a moment ago may be gone when read. Chromium says so as a stale element or,
    mid-navigation, as an unknown error ("Node with given id does not belong to the
    document"); a wait takes either as "not yet" (it still fails at its timeout)."""
    ignored = (StaleElementReferenceException, WebDriverException)
    return _Wait(driver, timeout_s, ignored_exceptions=ignored)


SHOTS = os.environ.get("RAILYARD_SCREENSHOTS")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    state = tmp_path_factory.mktemp("state")
    proc = ServerProcess(state, gpus=None,
                         extra=("--blueprint", "gaggle-h100", "--node-name", "dgx003",
                                "--sample-interval", "0.5"))  # fmt: skip
    proc.start()
    yield proc
    proc.stop()


def chrome() -> webdriver.Chrome:
    """Headless Chromium at 1280 x 900, through Debian's chromedriver."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,900"):  # fmt: skip
        options.add_argument(arg)
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    driver = chrome()
    try:
        yield driver
    finally:
        driver.quit()


def shot(browser: object, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(SHOTS) / f"dashboard-{name}.png"))  # type: ignore[attr-defined]


def log_in(browser: object, server: ServerProcess, token: str) -> None:
    b = browser
    b.get(f"{server.url}/ui/login")  # type: ignore[attr-defined]
    b.find_element(By.NAME, "token").send_keys(token)  # type: ignore[attr-defined]
    b.find_element(By.TAG_NAME, "button").click()  # type: ignore[attr-defined]
    WebDriverWait(b, 10).until(lambda d: d.find_element(By.TAG_NAME, "h1").text == "Overview")


def cli(server: ServerProcess, token: str, *args: str) -> str:
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": token}
    done = subprocess.run([sys.executable, "-m", "railyard", *args], env=env,
                          capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
    return done.stdout.strip()


def test_the_dashboard_in_a_browser(server: ServerProcess, browser: object) -> None:
    b: object = browser
    log_in(b, server, server.token)
    shot(b, "overview")
    b.get(f"{server.url}/ui/jobs")  # type: ignore[attr-defined]
    code = (
        "import time; print('hello from the browser test', flush=True); "
        "held = b'x' * 2**26; t = time.time()\n"
        "while time.time() - t < 4: pass"
    )  # a core busy, 64 MiB held: its graphs
    job = cli(server, server.token, "submit", "--parsable", "--gpus", "2", "--name", "hello", "--",
              sys.executable, "-c", code)  # fmt: skip
    row = f"//tbody[@id='jobs']//a[text()='{job}']/../.."
    WebDriverWait(b, 30).until(lambda d: d.find_elements(By.XPATH, row))  # live: no reload
    WebDriverWait(b, 60).until(lambda d: "completed" in d.find_element(By.XPATH, row).text)
    shot(b, "jobs")
    b.find_element(By.LINK_TEXT, job).click()  # type: ignore[attr-defined]
    WebDriverWait(b, 30).until(
        lambda d: "hello from the browser test" in d.find_element(By.ID, "log").text
    )
    resident = "svg[aria-label='memory of its processes (resident)']"  # read while it ran
    assert b.find_elements(By.CSS_SELECTOR, resident)  # type: ignore[attr-defined]
    shot(b, "job")
    resources = b.find_element(By.XPATH, "//h2[text()='Resources']")  # type: ignore[attr-defined]
    _ = resources.location_once_scrolled_into_view  # scrolls there
    shot(b, "job-resources")
    b.get(f"{server.url}/ui/fabric")  # type: ignore[attr-defined]
    node = b.find_element(By.ID, "node-dgx003")  # type: ignore[attr-defined]
    assert node.get_attribute("data-state") == "ready"
    node.find_element(By.TAG_NAME, "button").click()
    WebDriverWait(b, 10).until(lambda d: d.switch_to.alert).accept()  # the confirmation
    WebDriverWait(b, 30).until(
        lambda d: (
            d.find_element(By.ID, "node-dgx003").get_attribute("data-state")
            in ("draining", "drained")
        )
    )
    shot(b, "fabric")
    b.get(f"{server.url}/ui/queues")  # type: ignore[attr-defined]
    shot(b, "queues")
    b.get(f"{server.url}/ui/queues/whatif")  # type: ignore[attr-defined]
    shot(b, "whatif")
    b.find_element(By.LINK_TEXT, "Accounting").click()  # type: ignore[attr-defined]
    WebDriverWait(b, 10).until(lambda d: d.find_element(By.TAG_NAME, "h1").text == "Accounting")
    usage = b.find_element(By.ID, "usage").text  # type: ignore[attr-defined]
    assert usage.splitlines()[0].startswith("admin")  # the job's 2 GPUs for 3 s, today
    shot(b, "accounting")

    # another user: the admin's job page is "no job", as for an id that does not exist
    server.request("POST", "/v1/users", json={"name": "carol", "unix_user": "root"})
    server.request("POST", "/v1/queues/default/members", json={"user": "carol"})
    carol = server.request("POST", "/v1/tokens", json={"user": "carol"})["token"]
    b.delete_all_cookies()  # type: ignore[attr-defined]
    log_in(b, server, carol)
    b.get(f"{server.url}/ui/jobs/{job}")  # type: ignore[attr-defined]
    assert b.find_element(By.TAG_NAME, "h1").text == "No such job"  # type: ignore[attr-defined]
    assert f"No job {job}." in b.page_source  # type: ignore[attr-defined]
    status = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}",
                             "-b", f"railyard_session={carol}", f"{server.url}/ui/jobs/{job}"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    if status.returncode == 0:  # a token is not a session: the login page, never the job
        assert status.stdout == "303"
