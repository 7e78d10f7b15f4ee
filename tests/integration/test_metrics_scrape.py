"""`/metrics` of a real `railyard up` over real HTTP: a job it runs shows up in the scrape,
the admin token from client.json reads it and no token does not (unless `--metrics-open`);
and, where a `prometheus` binary is installed, a real Prometheus server scrapes it with the
shipped example's bearer-token config."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.server_proc import ServerProcess, free_port
from tests.parts import needs
from tests.waiting import wait_for

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prometheus" / "prometheus.yml"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(tmp_path / "state")
    proc.state_dir.mkdir()
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def running_gpus(text: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "railyard_queue_allocated_gpus" and s.labels["queue"] == "default"
    )


def test_a_running_job_shows_in_the_scrape_of_a_real_server(server: ServerProcess) -> None:
    assert httpx.get(f"{server.url}/metrics", timeout=10).status_code == 401
    (job,) = server.request("POST", "/v1/jobs", json={"command": ["sleep", "30"], "gpus": 2})
    wait_for(lambda: server.request("GET", f"/v1/jobs/{job['id']}")["state"] == "running")
    response = server.call("GET", "/metrics")
    assert response.status_code == 200
    assert running_gpus(response.text) == 2
    assert 'railyard_jobs{queue="default",state="running"} 1.0' in response.text
    assert "railyard_job_submit_to_start_seconds_count 1.0" in response.text
    server.request("DELETE", f"/v1/jobs/{job['id']}")


def test_metrics_open_needs_no_token(tmp_path: Path) -> None:
    proc = ServerProcess(tmp_path / "state", extra=("--metrics-open",))
    proc.state_dir.mkdir()
    proc.start()
    try:
        response = httpx.get(f"{proc.url}/metrics", timeout=10)
        assert response.status_code == 200
        assert "railyard_build_info" in response.text
        assert httpx.get(f"{proc.url}/v1/jobs", timeout=10).status_code == 401  # only /metrics
    finally:
        proc.stop()


@needs("promtool")
def test_promtool_passes_on_a_real_servers_metrics(server: ServerProcess) -> None:
    (job,) = server.request("POST", "/v1/jobs", json={"command": ["true"]})
    wait_for(lambda: server.request("GET", f"/v1/jobs/{job['id']}")["state"] == "completed")
    text = server.call("GET", "/metrics").text
    assert "railyard_job_submit_to_start_seconds_count 1.0" in text
    checked = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@needs("prometheus")
def test_a_real_prometheus_scrapes_it(server: ServerProcess, tmp_path: Path) -> None:
    token_file = tmp_path / "railyard.token"
    token_file.write_text(server.token)
    config = yaml.safe_load(EXAMPLE.read_text())
    job = config["scrape_configs"][0]
    job["authorization"]["credentials_file"] = str(token_file)
    job["static_configs"][0]["targets"] = [f"127.0.0.1:{server.port}"]
    config["global"]["scrape_interval"] = "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    prometheus = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def scraped() -> bool:
            try:
                result = httpx.get(
                    f"http://127.0.0.1:{port}/api/v1/query",
                    params={"query": 'railyard_node_gpus{state="ready"}'},
                    timeout=2,
                ).json()["data"]["result"]
            except (httpx.HTTPError, KeyError, ValueError):
                return False
            return bool(result) and float(result[0]["value"][1]) == 4

        wait_for(scraped, timeout_s=60)
        targets = httpx.get(f"http://127.0.0.1:{port}/api/v1/targets", timeout=5).json()
        [target] = targets["data"]["activeTargets"]
        assert (target["health"], target["lastError"]) == ("up", "")
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
