"""Interactive work through the control plane (issue 23): ``railyard run`` against ``srun``.

Figures, on a real ``railyard up`` (SQLite, loopback):

- ``railyard run -- true`` as a new process, start to exit (median of ``--runs``), and
  ``srun true`` the same where a Slurm runs here (``benchmarks/slurm/setup_local_slurm.sh``;
  target: within 2x of srun);
- keystroke echo: one byte to ``cat`` in a running interactive job and back, through the
  WebSocket, the API's bridge and the wrapper's relay (p50, p99; target p99 < 20 ms);
- 50 sessions at once, each sending 100 numbered lines to its own ``cat`` and reading them
  back, then ending it: lines lost or out of order (target 0), wall time.

With ``--ray``, the first two again with the job on a Ray node that is not the server's (a
local Ray cluster of one joined machine, ``tests/multinode``): the bytes go through the node
agent's relay (`exec.terminals.relay`), one more TCP hop and a Ray call to open it.

Run: ``python benchmarks/bench_interactive.py [--runs 20] [--keys 300] [--sessions 50]
[--ray]``; prints a table and writes ``benchmarks/results/bench_interactive.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import p99
from tests.integration.server_proc import ServerProcess

from railyard.client import frames
from railyard.client.client import Client
from railyard.client.websocket import WebSocket

RESULTS = Path(__file__).parent / "results" / "bench_interactive.json"


def run_round_trips(server: ServerProcess, runs: int) -> list[float]:
    env = {**os.environ, "RAILYARD_URL": server.url, "RAILYARD_TOKEN": server.token}
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-m", "railyard", "run", "--", "true"], env=env,
                       check=True, capture_output=True)  # fmt: skip
        took.append(time.perf_counter() - began)
    return took


def srun_round_trips(runs: int) -> list[float] | None:
    if shutil.which("srun") is None:
        return None
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        done = subprocess.run(["srun", "true"], capture_output=True, timeout=60, check=False)
        if done.returncode != 0:
            return None
        took.append(time.perf_counter() - began)
    return took


def cat_session(client: Client, server: ServerProcess) -> tuple[str, WebSocket]:
    """A running interactive ``cat`` and a WebSocket joined to it."""
    (job,) = server.request("POST", "/v1/jobs", json={"command": ["cat"], "terminal": "pipes"})
    while server.request("GET", f"/v1/jobs/{job['id']}")["state"] != "running":
        time.sleep(0.05)
    return job["id"], client.terminal(job["id"])


def echo_latency(server: ServerProcess, keys: int) -> list[float]:
    with Client(server.url, server.token) as client:
        _, ws = cat_session(client, server)
        reader = frames.FrameReader()
        took = []
        for _ in range(keys):
            began = time.perf_counter()
            ws.send_binary(frames.frame(frames.STDIN, b"x\n"))
            got = b""
            while got != b"x\n":
                message = ws.recv(timeout_s=10)
                assert message is not None
                got += b"".join(p for k, p in reader.feed(message[1]) if k == frames.STDOUT)
            took.append(time.perf_counter() - began)
        ws.send_binary(frames.frame(frames.STDIN_END))
        ws.close()
    return took


def one_session(server: ServerProcess, lines: int) -> int:
    """Lines lost or out of order in one session of ``lines`` lines."""
    with Client(server.url, server.token) as client:
        _, ws = cat_session(client, server)
        sent = b"".join(f"{i}\n".encode() for i in range(lines))
        ws.send_binary(frames.frame(frames.STDIN, sent))
        ws.send_binary(frames.frame(frames.STDIN_END))
        reader, out, code = frames.FrameReader(), b"", None
        while code is None and (message := ws.recv(timeout_s=120)) is not None:
            for kind, payload in reader.feed(message[1]):
                if kind == frames.STDOUT:
                    out += payload
                elif kind == frames.EXIT:
                    code = int(payload)
        ws.close()
    got = out.decode().splitlines()
    return sum(1 for i in range(lines) if i >= len(got) or got[i] != str(i)) + (code != 0)


def ray_figures(runs: int, keys: int) -> tuple[list[float], list[float]]:
    """``run -- true`` and keystroke echo with the job on a Ray node (its agent's relay)."""
    from tests.multinode.conftest import LocalRay

    cluster = LocalRay(("n1",))
    tmp = Path(tempfile.mkdtemp(prefix="bench-interactive-ray-"))
    server = ServerProcess(tmp / "state", gpus=None, extra=cluster.up_args)
    server.state_dir.mkdir()
    try:
        server.start(timeout_s=300)
        while not any(n["state"] == "ready" for n in server.request("GET", "/v1/nodes")):
            time.sleep(0.2)
        return run_round_trips(server, runs), echo_latency(server, keys)
    finally:
        server.stop()
        cluster.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--keys", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--lines", type=int, default=100)
    parser.add_argument("--ray", action="store_true", help="also through a Ray node's relay")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-interactive-"))
    server = ServerProcess(tmp / "state", gpus=0)
    server.state_dir.mkdir()
    server.start(timeout_s=300)
    try:
        runs = run_round_trips(server, args.runs)
        sruns = srun_round_trips(args.runs)
        keys = echo_latency(server, args.keys)
        began = time.perf_counter()
        with ThreadPoolExecutor(args.sessions) as pool:
            lost = sum(pool.map(lambda _: one_session(server, args.lines), range(args.sessions)))
        sessions_s = time.perf_counter() - began
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    ray_runs, ray_keys = ray_figures(args.runs, args.keys) if args.ray else ([], [])
    run_s, srun_s = statistics.median(runs), statistics.median(sruns) if sruns else None
    rows = [
        ("railyard run -- true, median s", run_s, "<= 2x srun"),
        ("srun true, median s", srun_s, "(no Slurm here)" if srun_s is None else ""),
        ("run / srun", run_s / srun_s if srun_s else None, "<= 2"),
        ("keystroke echo p50 ms", statistics.median(keys) * 1e3, ""),
        ("keystroke echo p99 ms", p99(keys) * 1e3, "< 20"),
        (f"{args.sessions} sessions x {args.lines} lines: lost", float(lost), "0"),
        (f"{args.sessions} sessions: wall s", sessions_s, ""),
    ]
    if ray_runs:
        rows += [
            ("Ray node: run -- true, median s", statistics.median(ray_runs), ""),
            ("Ray node: keystroke echo p50 ms", statistics.median(ray_keys) * 1e3, ""),
            ("Ray node: keystroke echo p99 ms", p99(ray_keys) * 1e3, "< 20"),
        ]
    for name, value, target in rows:
        shown = "-" if value is None else f"{value:.3f}"
        print(f"{name:<40} {shown:>10}  {target}")
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps([{"figure": n, "value": v, "target": t} for n, v, t in rows],
                                  indent=1) + "\n")  # fmt: skip
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
