"""No process outlives its job (the trust boundary: "every process of a job lives in a cgroup
that ends with it").

Bob's job detaches two daemons the way people do, ``setsid nohup ... &`` and a
fork-setsid-fork, so that neither is in the job's process group nor a child of its shell.
Whatever ends the job (cancel, its time limit, its main process exiting, a cancel after the
server was killed with -9 and adopted the job) must end both, and remove the job's cgroups.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from railyard.exec.cgroups import proctrack
from railyard.exec.cgroups.containment import Containment
from tests.integration.tenants import NEEDS_ROOT, Site, finished, job, submit, wait

pytestmark = NEEDS_ROOT

DAEMON = """
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(1000)
    os._exit(0)
"""


def detaching(site: Site, name: str, main: str) -> tuple[list[str], Path, Path]:
    """Bob's command: two detached daemons that write their pids, then ``main``."""
    out = site.bob.home / name
    out.mkdir()
    out.chmod(0o777)
    setsid, daemon = out / "setsid.pid", out / "daemon.pid"
    script = (
        f"setsid nohup bash -c 'echo $$ > {setsid}.tmp; mv {setsid}.tmp {setsid}; "
        "exec sleep 1000' >/dev/null 2>&1 &\n"
        f"{shlex.quote(site.python)} -c {shlex.quote(DAEMON)} {daemon}\n"
        f"while [ ! -s {setsid} ] || [ ! -s {daemon} ]; do sleep 0.1; done\n"
        f"{main}\n"
    )
    return ["bash", "-c", script], setsid, daemon


def pids_of(site: Site, *files: Path) -> list[int]:
    wait(lambda: all(f.exists() for f in files), 60)
    pids = [int(f.read_text()) for f in files]
    assert all(alive_as(site, pid) for pid in pids), "the daemons did not start"
    return pids


def alive_as(site: Site, pid: int) -> bool:
    """``pid`` is a live (not zombie) process of bob's."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    uid = int(fields["Uid"].split()[0])
    return uid == site.bob.account.pw_uid and not fields["State"].strip().startswith("Z")


def all_gone(site: Site, pids: list[int], timeout_s: float = 10) -> None:
    try:
        wait(lambda: not any(alive_as(site, pid) for pid in pids), timeout_s)
    except AssertionError:
        left = [pid for pid in pids if alive_as(site, pid)]
        raise AssertionError(f"bob's detached processes {left} outlived the job") from None


def no_cgroups_left(site: Site, job_id: str) -> None:
    """The job's step groups were removed after it ended."""
    records = site.server.state_dir / "attempts" / job_id
    step = proctrack.step_name(job_id, 0, records)
    tracking = proctrack.choose().group(step)
    confinement = Containment().device_guard.parent
    for group in (tracking, confinement / step if confinement else None):
        if group is not None:
            wait(lambda g=group: not g.exists(), 10)  # type: ignore[misc]


def running(site: Site, job_id: str) -> None:
    wait(lambda: job(site.server, job_id)["state"] == "running", 60)


def test_cancel_ends_detached_processes(site: Site) -> None:
    command, *files = detaching(site, "cancel", "sleep 1000")
    job_id = submit(site.server, site.bob.token, command=command, gpus=0,
                    workdir=str(site.bob.home))  # fmt: skip
    running(site, job_id)
    pids = pids_of(site, *files)
    response = site.server.call("DELETE", f"/v1/jobs/{job_id}", token=site.bob.token)
    assert response.status_code == 200, response.text
    assert finished(site.server, job_id)["state"] == "cancelled"
    all_gone(site, pids)
    no_cgroups_left(site, job_id)


def test_time_limit_ends_detached_processes(site: Site) -> None:
    command, *files = detaching(site, "timeout", "sleep 1000")
    job_id = submit(site.server, site.bob.token, command=command, gpus=0, time="0:05",
                    workdir=str(site.bob.home))  # fmt: skip
    pids = pids_of(site, *files)
    assert finished(site.server, job_id)["state"] == "timeout"
    all_gone(site, pids)
    no_cgroups_left(site, job_id)


def test_a_daemon_left_behind_ends_with_the_job(site: Site) -> None:
    """The job's main process exits at once: it completes, and what it left is killed."""
    command, *files = detaching(site, "leftover", "exit 0")
    job_id = submit(site.server, site.bob.token, command=command, gpus=0,
                    workdir=str(site.bob.home))  # fmt: skip
    assert finished(site.server, job_id)["state"] == "completed"
    pids = [int(f.read_text()) for f in files]
    all_gone(site, pids)
    no_cgroups_left(site, job_id)


def test_server_killed_then_cancel_ends_detached_processes(site: Site) -> None:
    """kill -9 of the server; the next one adopts the job by pid and its cancel ends all."""
    command, *files = detaching(site, "adopted", "sleep 1000")
    job_id = submit(site.server, site.bob.token, command=command, gpus=0,
                    workdir=str(site.bob.home))  # fmt: skip
    running(site, job_id)
    pids = pids_of(site, *files)
    site.server.kill9()
    assert all(alive_as(site, pid) for pid in pids)
    site.server.start()
    response = site.server.call("DELETE", f"/v1/jobs/{job_id}", token=site.bob.token)
    assert response.status_code == 200, response.text
    assert finished(site.server, job_id)["state"] == "cancelled"
    all_gone(site, pids)
    no_cgroups_left(site, job_id)


def test_up_says_how_processes_are_tracked(site: Site) -> None:
    log = (site.server.state_dir / "server.log").read_text()
    assert f"railyard up: {proctrack.choose().describe()}\n" in log
    assert f"railyard up: {Containment().device_guard.describe()}\n" in log
