"""Issue 52, item 4, as bob meets it: a CPU-only job, then a GPU array and a CPU array in the
same queue. When the GPU tasks ended while a CPU job of the queue still ran, the scheduler's
kept booking raised KeyError at every later step: nothing started for anyone and `/healthz`
said "failing". Here the queue's jobs all settle, alice's job after them starts, and the
server stays healthy throughout."""

from __future__ import annotations

import os

import httpx

from tests.integration.tenants import NEEDS_ROOT, Site, finished, submit, wait

pytestmark = NEEDS_ROOT


def test_a_cpu_job_outliving_a_gpu_array_of_its_queue_keeps_the_loop_going(site: Site) -> None:
    server, bob = site.server, site.bob
    log = server.state_dir / "server.log"
    seen_bytes = log.stat().st_size
    unhealthy: list[str] = []

    def healthy() -> bool:
        answer = httpx.get(f"{server.url}/healthz", timeout=10)
        if answer.status_code != 200:
            unhealthy.append(answer.text)
        return answer.status_code == 200

    cores = os.cpu_count() or 1  # the server's one node, as `railyard up` counts it
    cpu_job = submit(server, bob.token, command=["sleep", "12"], gpus=0, cpus_per_task=1)
    wait(lambda: server.request("GET", f"/v1/jobs/{cpu_job}")["state"] == "running")
    gpu_array = submit(server, bob.token, command=["sleep", "1"], gpus=1, array="0-3")
    # every core of the node: the CPU tasks wait behind the CPU job, so each step books it
    cpu_array = submit(
        server, bob.token, command=["sleep", "1"], gpus=0, array="0-3", cpus_per_task=cores
    )
    for array in (gpu_array, cpu_array):
        for task in range(4):
            assert finished(server, f"{array}_{task}")["state"] == "completed"
            healthy()
    assert finished(server, cpu_job)["state"] == "completed"
    after = submit(server, site.alice.token, command=["true"], gpus=1)
    assert finished(server, after, timeout_s=60)["state"] == "completed"
    assert healthy(), unhealthy
    assert not unhealthy, unhealthy
    said = log.read_bytes()[seen_bytes:].decode(errors="replace")
    assert "Traceback" not in said, said[-3000:]
