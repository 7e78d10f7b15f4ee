"""A live `railyard up` keeps a running job's resource history: a real job that holds
memory and burns a core is read every half second, and `railyard stats` (like sstat) and
its CSV show it, as the job page does."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.server_proc import ServerProcess

BUSY = """
import os, time
held = bytearray(96 * 2**20)
for i in range(0, len(held), 4096):
    held[i] = 1
open(os.environ["READY"], "w").close()
t = time.time()
while time.time() - t < 60:
    pass
"""


def _stats(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RAILYARD_HOME": str(server.state_dir)}
    cmd = [sys.executable, "-m", "railyard", "stats", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60, check=False)


def test_a_running_jobs_cpu_and_memory_are_kept_and_shown(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path, gpus=1, extra=("--sample-interval", "0.5"))
    server.start()
    try:
        ready = tmp_path / "ready"
        body = {"command": [sys.executable, "-c", BUSY], "env": {"READY": str(ready)}}
        (job,) = server.request("POST", "/v1/jobs", json=body)
        deadline = time.monotonic() + 60
        while True:
            found = server.request("GET", f"/v1/jobs/{job['id']}/samples")
            busy = [p for p in found["points"] if (p["cpu_pct"] or 0) > 30]
            if ready.exists() and len(busy) >= 3:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.5)
        assert found["bucket_s"] == 1.0  # half-second readings, buckets of at least 1 s
        assert max(p["host_mem_bytes"] for p in busy) >= 96 * 2**20
        shown = _stats(server, job["id"])
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert lines[0].startswith(f"job {job['id']}: ")
        assert lines[1].split() == ["FIGURE", "LAST", "MEAN", "MAX"]
        cpu = next(line for line in lines if line.startswith("CPU (100% = 1 core)"))
        assert float(cpu.split()[-1].rstrip("%")) > 30
        memory = next(line for line in lines if line.startswith("memory (resident)"))
        assert memory.split()[-1] == "MiB"
        exported = _stats(server, job["id"], "--csv")
        rows = list(csv.DictReader(io.StringIO(exported.stdout)))
        assert len(rows) >= 3
        assert max(float(r["host_mem_bytes"]) for r in rows) >= 96 * 2**20
        refused = _stats(server, job["id"], "--points", "0")
        assert refused.returncode == 2
        assert refused.stderr.count("\n") == 1
        server.request("DELETE", f"/v1/jobs/{job['id']}")
    finally:
        server.stop()
