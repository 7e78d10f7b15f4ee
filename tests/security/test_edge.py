"""The API's edge against one plain user who would stall it for everyone (issue 52, items 2
and 3): a WebSocket message of tiny terminal frames to bob's own interactive job, and
thousands of half-sent requests from bob's own Unix account. Meanwhile another client's
``/healthz`` must answer; the bounds here are generous (seconds, against minutes before the
fix): fine timing is `benchmarks/attacks_edge.py`'s."""

from __future__ import annotations

import struct
import threading
import time

import httpx

from railyard.client.client import Client
from railyard.client.websocket import WebSocket
from tests.integration.tenants import NEEDS_ROOT, Site, job, submit, wait

pytestmark = NEEDS_ROOT
PROMPT_S = 5.0  # an answer "at once" on a loaded test machine; the stall was 6 s to minutes


def tiny_frames(size_bytes: int) -> tuple[bytes, int]:
    """One message of ``size_bytes`` made of 6-byte stdin frames (one byte each), and how
    many bytes of input it carries."""
    count = size_bytes // 6
    return b"i\x00\x00\x00\x01x" * count, count


class Prober:
    """``/healthz`` from another client, again and again, while an attack runs: the slowest
    answer (inf for one that never came)."""

    def __init__(self, url: str) -> None:
        self.url, self.slowest_s = url, 0.0
        self.failures: list[int | str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            start = time.monotonic()
            status: int | str
            try:
                status = httpx.get(f"{self.url}/healthz", timeout=PROMPT_S * 4).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            took = time.monotonic() - start
            self.slowest_s = max(self.slowest_s, took)
            if status != 200:
                self.failures.append(status)
            time.sleep(0.05)

    def __enter__(self) -> Prober:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(PROMPT_S * 5)


def interactive(site: Site, command: list[str]) -> str:
    """Bob's interactive job on pipes, once it runs."""
    job_id = submit(site.server, site.bob.token, gpus=0, command=command, terminal="pipes")
    wait(lambda: job(site.server, job_id)["state"] == "running", 120)
    return job_id


def output_of(ws: WebSocket, timeout_s: float = 60) -> tuple[bytes, int | None]:
    """What the job wrote to stdout until its exit frame, and its exit status."""
    stream, out, code = b"", b"", None
    deadline = time.monotonic() + timeout_s
    while code is None and time.monotonic() < deadline:
        message = ws.recv(timeout_s=max(0.1, deadline - time.monotonic()))
        if message is None:
            break
        stream += message[1]
        while len(stream) >= 5:
            kind, length = struct.unpack(">cI", stream[:5])
            if len(stream) < 5 + length:
                break
            payload, stream = stream[5 : 5 + length], stream[5 + length :]
            if kind == b"o":
                out += payload
            elif kind == b"x":
                code = int(payload)
    return out, code


def test_a_megabyte_of_tiny_frames_neither_stalls_the_api_nor_breaks_the_terminal(
    site: Site,
) -> None:
    job_id = interactive(site, ["wc", "-c"])
    message, carried = tiny_frames(1 << 20)
    with Client(site.server.url, site.bob.token) as bob, Prober(site.server.url) as probe:
        ws = bob.terminal(job_id)
        ws.send_binary(message)
        ws.send_binary(b"e\x00\x00\x00\x00")  # end of input: wc counts what came
        out, code = output_of(ws)
        ws.close()
        time.sleep(1.0)  # a probe sent during the parse has answered
    assert (out.strip(), code) == (str(carried).encode(), 0)
    assert probe.slowest_s < PROMPT_S, f"/healthz waited {probe.slowest_s:.1f} s"
    assert not probe.failures, probe.failures


def test_a_message_over_the_cap_is_closed_with_1009_and_the_api_answers(site: Site) -> None:
    job_id = interactive(site, ["sleep", "120"])
    message, _ = tiny_frames(4 << 20)
    with Client(site.server.url, site.bob.token) as bob, Prober(site.server.url) as probe:
        ws = bob.terminal(job_id)
        try:
            ws.send_binary(message)
            while ws.recv(timeout_s=PROMPT_S * 4) is not None:
                pass
        except (TimeoutError, ConnectionError):
            pass
        time.sleep(1.0)
    site.server.call("DELETE", f"/v1/jobs/{job_id}", token=site.bob.token)
    assert ws.close_code == 1009
    assert probe.slowest_s < PROMPT_S, f"/healthz waited {probe.slowest_s:.1f} s"
    assert not probe.failures, probe.failures
