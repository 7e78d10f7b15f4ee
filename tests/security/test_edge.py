"""The API's edge against one plain user who would stall it for everyone (issue 52, items 2
and 3): a WebSocket message of tiny terminal frames to bob's own interactive job, and
thousands of half-sent requests from bob's own Unix account. Meanwhile another client's
``/healthz`` must answer; the bounds here are generous (seconds, against minutes before the
fix): fine timing is `benchmarks/attacks_edge.py`'s."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from railyard.client.client import Client
from railyard.client.frames import EXIT, STDOUT, FrameReader
from railyard.client.websocket import WebSocket
from railyard.control.api.edge import EdgeLimits, descriptor_budget
from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import NEEDS_ROOT, Site, job, submit, wait
from tests.security.test_dashboard_session import log_in

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
    reader, out, code = FrameReader(), b"", None
    deadline = time.monotonic() + timeout_s
    while code is None and time.monotonic() < deadline:
        message = ws.recv(timeout_s=max(0.1, deadline - time.monotonic()))
        if message is None:
            break
        for kind, payload in reader.feed(message[1]):  # the client's own frame parser
            out += payload if kind == STDOUT else b""
            code = int(payload) if kind == EXIT else code
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


# Bob's half-sent requests: each connection sends a request line and one header, never the
# blank line that ends them, then a byte a second (slowloris). The first line out says they
# are open; the last, how many the server closed.
HALF_SENT = r"""
import json, resource, socket, sys, time
port, source, count, hold_s = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks, refused = [], 0
for _ in range(count):
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    except OSError:
        refused += 1
        s.close()
print(json.dumps({"open": len(socks), "refused": refused}), flush=True)
closed, end = set(), time.monotonic() + hold_s
while time.monotonic() < end:
    for i, s in enumerate(socks):
        if i in closed:
            continue
        try:
            s.setblocking(False)
            if not s.recv(4096):
                closed.add(i)
        except BlockingIOError:
            try:
                s.send(b"X")
            except OSError:
                closed.add(i)
        except OSError:
            closed.add(i)
    time.sleep(1.0)
print(json.dumps({"open": len(socks), "refused": refused, "closed": len(closed)}), flush=True)
"""


def descriptors(tmp: Path, limit: int) -> str:
    """A Python that starts with ``limit`` descriptors, soft and hard: a shell that lowers
    them, then runs this interpreter (this process could not raise its own hard limit back)."""
    wrapper = tmp / "python-nofile"
    wrapper.write_text(f"#!/bin/sh\nulimit -S -n {limit} && ulimit -H -n {limit} && "
                       f'exec {shlex.quote(sys.executable)} "$@"\n')  # fmt: skip
    wrapper.chmod(0o755)
    return str(wrapper)


@contextmanager
def edge_server(site: Site, tmp: Path, nofile: int, *flags: str) -> Iterator[ServerProcess]:
    state = tmp / "state"
    state.mkdir()
    server = ServerProcess(state, gpus=0, spool_dir=site.scratch / tmp.name, extra=flags,
                           python=descriptors(tmp, nofile))  # fmt: skip
    server.start(timeout_s=120)
    try:
        yield server
    finally:
        server.stop()


def half_sent(
    site: Site, server: ServerProcess, count: int, hold_s: float, source: str = "127.0.0.1"
) -> tuple[subprocess.Popen[str], dict[str, int]]:
    """Bob's connections, from his own account; the first report once they are all made."""
    argv = ["runuser", "-u", site.bob.account.pw_name, "--", site.python, "-c", HALF_SENT,
            str(server.port), source, str(count), str(hold_s)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=site.bob.home)
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline() or "{}")


def listen_queue(port: int) -> int:
    """The listening socket's accept queue as the kernel holds it (`ss`: its Send-Q)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    return int(out.split()[2])


def last_report(proc: subprocess.Popen[str], timeout_s: float = 120) -> dict[str, int]:
    out, _ = proc.communicate(timeout=timeout_s)
    report: dict[str, int] = json.loads(out.strip().splitlines()[-1])
    return report


def test_thousands_of_half_sent_requests_leave_the_server_its_descriptors(
    site: Site, tmp_path: Path
) -> None:
    """1,024 descriptors in all, no flags: bob's 3,000 half-sent requests would take every
    one (the kernel's backlog holds the rest); the server keeps its connections within a
    budget under the limit and closes the oldest half-sent ones to admit new clients."""
    with edge_server(site, tmp_path, 1024) as server:
        assert listen_queue(server.port) == EdgeLimits().listen_backlog
        proc, opened = half_sent(site, server, 3000, hold_s=8.0)
        with Prober(server.url) as probe:
            time.sleep(6.0)
        report = last_report(proc)
    assert opened["open"] + opened["refused"] == 3000
    assert probe.slowest_s < PROMPT_S, f"/healthz waited {probe.slowest_s:.1f} s"
    assert not probe.failures, probe.failures[:5]
    held = report["open"] - report["closed"]
    assert held <= descriptor_budget(1024), report  # the rest were closed to make room


def stalled_body(server: ServerProcess) -> float:
    """Seconds until the server closes a request whose body stopped after a byte (inf:
    not within a minute)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100\r\n\r\n{")  # fmt: skip
        start = time.monotonic()
        try:
            while sock.recv(4096):
                pass
        except TimeoutError:
            return float("inf")
        except OSError:
            pass
        return time.monotonic() - start


def test_one_peers_slow_requests_are_capped_and_timed_out(site: Site, tmp_path: Path) -> None:
    """From another address (127.0.0.2: another machine, as the server sees it), bob's
    1,000 connections are held to the per-peer cap, and those left, still sending a byte a
    second, are closed at the header timeout; a request whose body stops, at the body's."""
    flags = ("--max-connections-per-peer", "100", "--header-timeout", "3", "--body-timeout", "2")
    with edge_server(site, tmp_path, 4096, *flags) as server:
        proc, opened = half_sent(site, server, 1000, hold_s=7.0, source="127.0.0.2")
        with Prober(server.url) as probe:
            time.sleep(2.0)
        report = last_report(proc)
        body_closed_s = stalled_body(server)
    assert body_closed_s < 30, "a body that stopped coming kept its connection"
    assert opened["open"] >= 100, opened
    assert report["closed"] == report["open"], report  # capped, then timed out
    assert probe.slowest_s < PROMPT_S, f"/healthz waited {probe.slowest_s:.1f} s"
    assert not probe.failures, probe.failures[:5]


def test_a_tls_proxy_on_loopback_is_still_believed_behind_the_guard(site: Site) -> None:
    """The guard reads the real peer, and the proxy headers are applied after it: a proxy
    on 127.0.0.1 that terminates TLS still gets Secure cookies (README, the dashboard)."""
    with httpx.Client(base_url=site.server.url, timeout=10) as client:
        done = log_in(client, site.bob.token, **{"X-Forwarded-Proto": "https"})
    assert done.status_code == 303, done.text
    assert "secure" in done.headers["set-cookie"].lower()
