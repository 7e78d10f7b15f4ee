"""What the client's own HTTP and WebSocket code saves against httpx and websockets.

``client/transport.py`` and ``client/websocket.py`` exist so that a ``railyard`` call does
not import a third-party HTTP stack. This measures the trade, each a fresh process:

- the import alone (``python -X importtime``'s cumulative figure, and the wall time of
  ``python -c "import M"`` less ``python -c pass``): ours against ``httpx`` and
  ``websockets.sync.client``;
- a whole ``railyard queue`` against a real ``railyard up`` on loopback, as shipped and with
  the client's connection swapped for an httpx one (the prototype below: same requests, one
  keep-alive ``httpx.Client``).

Each figure is the median of ``--repeat`` runs (after one warm-up), wall and CPU time of the
process. Prints a table and writes ``benchmarks/results/bench_transport.json``.

    python benchmarks/bench_transport.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.integration.server_proc import ServerProcess

RESULTS = Path(__file__).parent / "results" / "bench_transport.json"

QUEUE = "import sys; from railyard.cli.main import main; sys.exit(main(['queue']))"
HTTPX_QUEUE = '''
import sys
import httpx
import railyard.client.transport as transport

class HttpxConnection:
    """transport.Connection's surface over one keep-alive httpx.Client."""

    def __init__(self, scheme, host, port, timeout_s):
        netloc = f"[{host}]" if ":" in host else host
        base = f"{scheme}://{netloc}" + (f":{port}" if port else "")
        self._client = httpx.Client(base_url=base, timeout=timeout_s)
        self.open = False

    def dropped(self):
        return False

    def connect(self):
        self.open = True

    def close(self):
        self._client.close()
        self.open = False

    def request(self, method, target, headers, body=None):
        self.open = True
        r = self._client.request(method, target, headers=headers, content=body)
        return transport.Response(r.status_code, r.content)

transport.Connection = HttpxConnection
from railyard.cli.main import main
sys.exit(main(["queue"]))
'''


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[-1][:60]!r} exited {done.returncode}: {done.stderr[-500:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def import_us(module: str, env: dict[str, str]) -> int:
    """``-X importtime``'s cumulative microseconds of ``module`` (its imports included)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"],
                         env=env, capture_output=True, text=True, check=True).stderr  # fmt: skip
    for line in out.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \|\s*(\S+)$", line)
        if m and m.group(2) == module:
            return int(m.group(1))
    raise RuntimeError(f"no importtime line for {module}")


def medians(cases: dict[str, list[str]], env: dict[str, str], repeat: int) -> dict[str, dict]:
    walls: dict[str, list[float]] = {k: [] for k in cases}
    cpus: dict[str, list[float]] = {k: [] for k in cases}
    for i in range(repeat + 1):  # alternate, so that every case sees the same load
        for name, argv in cases.items():
            wall, cpu = timed(argv, env)
            if i:
                walls[name].append(wall)
                cpus[name].append(cpu)
    return {k: {"wall_ms": 1e3 * statistics.median(walls[k]),
                "cpu_ms": 1e3 * statistics.median(cpus[k])} for k in cases}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    env = dict(os.environ)
    py = sys.executable
    modules = {"railyard.client.transport": "httpx",
               "railyard.client.websocket": "websockets.sync.client"}  # fmt: skip
    imports = {m: statistics.median(import_us(m, env) for _ in range(args.repeat))
               for pair in modules.items() for m in pair}  # fmt: skip
    bare = medians({
        "python -c pass": [py, "-c", "pass"],
        **{f"import {m}": [py, "-c", f"import {m}"] for pair in modules.items() for m in pair},
    }, env, args.repeat)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp) / "state", gpus=8, cycle_interval_s=2.0)
        server.state_dir.mkdir()
        server.start()
        try:
            for _ in range(20):  # a queue with some lines in it
                server.request("POST", "/v1/jobs", json={"command": ["true"], "hold": True})
            qenv = env | {"RAILYARD_HOME": str(server.state_dir), "COLUMNS": "160"}
            qenv.pop("RAILYARD_URL", None)
            qenv.pop("RAILYARD_TOKEN", None)
            queue = medians({"railyard queue (own transport)": [py, "-c", QUEUE],
                             "railyard queue (httpx)": [py, "-c", HTTPX_QUEUE]},
                            qenv, args.repeat)  # fmt: skip
        finally:
            server.stop()
    print(f"{'':44} {'importtime ms':>14} {'wall ms':>9} {'cpu ms':>8}")
    for name, fig in {**bare, **queue}.items():
        module = name.removeprefix("import ")
        it = f"{imports[module] / 1e3:.1f}" if module in imports else ""
        print(f"{name:44} {it:>14} {fig['wall_ms']:9.1f} {fig['cpu_ms']:8.1f}")
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "repeat": args.repeat,
        "importtime_us": imports,
        "processes": {**bare, **queue},
    }
    if not args.no_write:
        RESULTS.parent.mkdir(exist_ok=True)
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
