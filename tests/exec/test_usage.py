"""What a running job's processes use, read from /proc by the local executor: real
processes, tracked by the step's cgroup (or, without one, the ranks' process trees), the
ranks' wrappers left out, a process that left early counted by its parent once reaped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from exec_helpers import MakeExecutor, py, spec, wait_for

from railyard.exec import usage

MIB = 2**20

# Two ranks; each holds 64 MiB, starts a child that burns CPU for 0.5 s and is reaped, then
# burns CPU itself until told to stop (a file), then waits.
WORK = """
import os, subprocess, sys, time
d, rank = sys.argv[1], os.environ["RANK"]
held = bytearray(64 * 2**20)
for i in range(0, len(held), 4096):
    held[i] = 1  # resident, not just reserved
burn = "import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.5: pass"
subprocess.run([sys.executable, "-c", burn])
open(os.path.join(d, "ready-" + rank), "w").close()
while not os.path.exists(os.path.join(d, "stop")):
    pass
time.sleep(60)
"""


def test_a_jobs_processes_cpu_and_memory(make_executor: MakeExecutor, tmp_path: Path) -> None:
    executor = make_executor()
    executor.start(spec(tmp_path, py(WORK, str(tmp_path)), workers=2))
    wait_for(lambda: all((tmp_path / f"ready-{r}").exists() for r in range(2)))
    first = executor.usage("job")
    assert first is not None
    assert first.processes == 2  # the two ranks; their wrappers are railyard's
    assert first.rss_bytes >= 2 * 64 * MIB
    assert first.cpu_s >= 2 * 0.5  # the children's time, reaped into their parents'

    def grew() -> bool:  # the busy ranks' time goes on adding up, however slow the machine
        later = executor.usage("job")
        return later is not None and later.cpu_s > first.cpu_s + 0.5

    wait_for(grew)
    (tmp_path / "stop").touch()
    assert executor.usage("not-a-job") is None


def test_measure_sums_live_processes_once_and_skips_gone_ones() -> None:
    code = "import time; print('ready', flush=True); time.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
        one = usage.measure([child.pid])
        twice = usage.measure([child.pid, child.pid, 2**22 + 7])  # a pid no process has
        assert one.processes == twice.processes == 1
        assert twice.rss_bytes == one.rss_bytes
    finally:
        child.kill()
        child.wait()
    assert usage.measure([child.pid]).processes == 0


def test_descendants_walks_the_tree() -> None:
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        wait_for(lambda: len(list(usage.descendants([shell.pid]))) == 3)
    finally:
        subprocess.run(["pkill", "-P", str(shell.pid)], check=False)
        shell.wait()
