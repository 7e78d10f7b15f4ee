"""Attacks on the API's edge (issue 52, items 2, 3 and 8) for the attack campaign, each
measured as the other users see it meanwhile: ``/healthz`` p99 and the start latency of
alice's 1-GPU job (targets: < 250 ms, < 2 s).

- bob's 1 MiB WebSocket message of 6-byte terminal frames to his own interactive job
  (quadratic and on the event loop before: ~6-10 s of a frozen API), and a 4 MiB one (minutes
  before; closed with 1009 now);
- bob's ~21,000 half-sent requests from his own account (the descriptors ran out before);
- bob's app behind the dashboard: ``/ui/jobs/N/app/%00`` (a 502 before) and a 17 MiB body
  streamed to it (413, never held whole).

``ATTACKS`` is the campaign's list (``benchmarks/attack_campaign.py`` adds it); run alone,
``python benchmarks/attacks_edge.py`` (as root) makes its own site and prints a table.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.tenants import Site, job, shared_site, submit, wait
from tests.security.test_dashboard_session import logged_in
from tests.security.test_edge import interactive, output_of

from railyard.client.client import Client

Attack = Callable[[Site], tuple[str, bool]]
HEALTHZ_P99_S = 0.25
START_S = 2.0
HALF_SENT_TOTAL = 21_000
HALF_SENT_PER_PROCESS = 7_000  # under a plain account's usual hard descriptor limit
BODY_APP = Path(__file__).resolve().parent.parent / "tests" / "web" / "apps" / "body_app.py"


class Meanwhile:
    """What alice sees while an attack runs: ``/healthz`` every 50 ms (its latencies and
    failures) and, once, how long her 1-GPU job takes to start."""

    def __init__(self, site: Site) -> None:
        self.site = site
        self.times_s: list[float] = []
        self.failures: list[int | str] = []
        self.start_s: float | None = None
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._probe, daemon=True),
                         threading.Thread(target=self._alice_job, daemon=True)]  # fmt: skip

    def _probe(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            status: int | str
            try:
                status = httpx.get(f"{self.site.server.url}/healthz", timeout=60).status_code
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            self.times_s.append(time.perf_counter() - start)
            if status != 200:
                self.failures.append(status)
            time.sleep(0.05)

    def _alice_job(self) -> None:
        time.sleep(0.5)  # into the attack
        start = time.perf_counter()
        try:
            job_id = submit(self.site.server, self.site.alice.token, gpus=1,
                            command=["sleep", "2"])  # fmt: skip
            wait(lambda: job(self.site.server, job_id)["state"] != "pending", 120)
            self.start_s = time.perf_counter() - start
        except (AssertionError, httpx.HTTPError):
            self.start_s = None

    def __enter__(self) -> Meanwhile:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._threads[1].join(180)
        self._stop.set()
        self._threads[0].join(120)

    def p99_s(self) -> float:
        ordered = sorted(self.times_s)
        return ordered[int(0.99 * (len(ordered) - 1))] if ordered else float("inf")

    def verdict(self) -> tuple[str, bool]:
        start = f"{self.start_s:.2f} s" if self.start_s is not None else "never"
        said = f"/healthz p99 {self.p99_s() * 1000:.0f} ms, alice's job started in {start}"
        if self.failures:
            said += f", /healthz failed {len(self.failures)}x ({self.failures[0]})"
        good = (not self.failures and self.p99_s() < HEALTHZ_P99_S
                and self.start_s is not None and self.start_s < START_S)  # fmt: skip
        return said, good


# -- WebSocket frames (item 2) ------------------------------------------------------------------


def frame_flood(site: Site) -> tuple[str, bool]:
    """1 MiB of 6-byte stdin frames in one message, to ``wc -c``: it must count them all."""
    job_id = interactive(site, ["wc", "-c"])
    count = (1 << 20) // 6
    with Client(site.server.url, site.bob.token) as bob, Meanwhile(site) as seen:
        ws = bob.terminal(job_id)
        start = time.perf_counter()
        ws.send_binary(b"i\x00\x00\x00\x01x" * count)
        ws.send_binary(b"e\x00\x00\x00\x00")
        out, code = output_of(ws)
        took_s = time.perf_counter() - start
        ws.close()
    said, good = seen.verdict()
    counted = out.strip() == str(count).encode() and code == 0
    return f"wc saw {out.strip().decode() or '?'} of {count} in {took_s:.2f} s; {said}", (
        good and counted
    )


def oversized_message(site: Site) -> tuple[str, bool]:
    """4 MiB of tiny frames in one message: closed with 1009, nothing parsed."""
    job_id = interactive(site, ["sleep", "60"])
    with Client(site.server.url, site.bob.token) as bob, Meanwhile(site) as seen:
        ws = bob.terminal(job_id)
        try:
            ws.send_binary(b"i\x00\x00\x00\x01x" * ((4 << 20) // 6))
            while ws.recv(timeout_s=60) is not None:
                pass
        except (TimeoutError, ConnectionError):
            pass
    site.server.call("DELETE", f"/v1/jobs/{job_id}", token=site.bob.token)
    said, good = seen.verdict()
    return f"closed {ws.close_code}; {said}", good and ws.close_code == 1009


# -- half-sent requests (item 3) ------------------------------------------------------------------

HALF_SENT = r"""
import resource, socket, sys, time
port, count, hold_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
socks, refused = [], 0
for _ in range(count):
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    except OSError:
        refused += 1
        s.close()
print(len(socks), refused, flush=True)
time.sleep(hold_s)
closed = 0
for s in socks:
    s.setblocking(False)
    try:
        closed += not s.recv(4096)
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print(len(socks), refused, closed, flush=True)
"""


def half_sent_requests(site: Site) -> tuple[str, bool]:
    """~21,000 half-sent requests from bob's account, in a few processes, held 20 s."""
    procs = []
    for _ in range(HALF_SENT_TOTAL // HALF_SENT_PER_PROCESS):
        argv = ["runuser", "-u", site.bob.account.pw_name, "--", site.python, "-c", HALF_SENT,
                str(site.server.port), str(HALF_SENT_PER_PROCESS), "20"]  # fmt: skip
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, text=True))
    with Meanwhile(site) as seen:
        for proc in procs:
            assert proc.stdout is not None
            proc.stdout.readline()
    totals = [0, 0, 0]
    for proc in procs:
        out, _ = proc.communicate(timeout=180)
        for i, number in enumerate(out.split()[:3]):
            totals[i] += int(number)
    opened, refused, closed = totals
    said, good = seen.verdict()
    return f"{opened} open ({refused} refused), {closed} closed by the server; {said}", good


# -- the app proxy (item 8) ----------------------------------------------------------------------


def _bob_app(site: Site) -> tuple[str, httpx.Client]:
    """Bob's body app as a web-app job, and his dashboard session once it answers."""
    app = site.bob.home / "body_app.py"
    shutil.copy(BODY_APP, app)
    os.chown(app, site.bob.account.pw_uid, site.bob.account.pw_gid)
    env = {**os.environ, "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": site.bob.token}
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "jupyter", "--gpus", "0", "--app",
         f"exec {site.python} {app}"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    job_id = done.stdout.splitlines()[-1].split("/")[-3]
    owner = logged_in(site.server.url, site.bob.token)
    wait(lambda: owner.get(f"/ui/jobs/{job_id}/app/seen").status_code == 200, 120)
    return job_id, owner


def app_proxy_edges(site: Site) -> tuple[str, bool]:
    """``/ui/jobs/N/app/%00`` and a 17 MiB body streamed in 64 KiB pieces."""
    job_id, owner = _bob_app(site)
    prefix = f"/ui/jobs/{job_id}/app"

    def pieces() -> Iterator[bytes]:
        for _ in range(17 * 16):
            yield b"a" * 65536

    with Meanwhile(site) as seen:
        nul = owner.get(f"{prefix}/%00").status_code
        big = owner.post(f"{prefix}/upload", content=pieces(),
                         headers={"Origin": site.server.url}).status_code  # fmt: skip
    site.server.call("DELETE", f"/v1/jobs/{job_id}", token=site.bob.token)
    owner.close()
    said, good = seen.verdict()
    return f"%00 {nul}, 17 MiB streamed {big}; {said}", good and 400 <= nul < 500 and big == 413


ATTACKS: list[tuple[str, str, Attack]] = [
    ("1 MiB WebSocket message of 6-byte terminal frames", "terminal works; healthz p99 < 250 ms",
     frame_flood),
    ("4 MiB WebSocket message to a terminal", "closed 1009; healthz p99 < 250 ms",
     oversized_message),
    ("21,000 half-sent requests from bob's account", "healthz p99 < 250 ms, job < 2 s",
     half_sent_requests),
    ("app proxy: /app/%00 and a 17 MiB streamed body", "4xx and 413; healthz p99 < 250 ms",
     app_proxy_edges),
]  # fmt: skip


def main() -> None:
    if os.geteuid() != 0:
        sys.exit("attacks_edge: run as root (it creates two Unix users)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        state = Path(tmp) / "state"
        state.mkdir()
        with shared_site(state) as site:
            for name, expected, fn in ATTACKS:
                try:
                    result, held = fn(site)
                except Exception as exc:  # an attack that breaks the harness is a row too
                    result, held = f"error: {type(exc).__name__}: {exc}"[:120], False
                rows.append({"attack": name, "expected": expected, "result": result,
                             "held": held})  # fmt: skip
                print(f"{'held' if held else 'BROKE':>5}  {name}: {result}", flush=True)
    print(json.dumps(rows, indent=1))
    sys.exit(0 if all(r["held"] for r in rows) else 1)


if __name__ == "__main__":
    main()
