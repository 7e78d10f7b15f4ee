"""A plain user cannot raise what an admin bounds: priority (issue 20, item 5).

bob asks a priority above his queue's bound through the API and through an ``#SBATCH``
script submitted with the ``railyard`` CLI from his own shell; both are one-line 403s naming
the bound. At the bound he is accepted, ``--nice`` lowers his job, and in a queue with
priority preemption his job no longer evicts alice's (an admin's still may).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import railyard
from tests.integration.tenants import (
    NEEDS_ROOT,
    Site,
    Tenant,
    finished,
    job,
    require_railyard,
    submit,
    wait,
)

pytestmark = NEEDS_ROOT

SRC = Path(railyard.__file__).resolve().parents[1]  # the CLI needs the standard library only
BOUND = "(hint: at most 'normal' (500); ask an admin)"


def _refused(site: Site, tenant: Tenant, **body: object) -> str:
    body = {"command": ["true"], "gpus": 1, **body}
    response = site.server.call("POST", "/v1/jobs", token=tenant.token, json=body)
    assert response.status_code == 403, response.text
    detail: str = response.json()["detail"]
    return detail


def _cli(site: Site, tenant: Tenant, args: str) -> tuple[int, str, str]:
    """``railyard ARGS`` run from the tenant's shell, with the tenant's token."""
    require_railyard(site)
    env = {"PYTHONPATH": str(SRC), "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": tenant.token}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    done = tenant.shell(f"env {exports} {shlex.quote(site.python)} -m railyard {args}")
    return done.returncode, done.stdout, done.stderr


def test_bob_asks_above_the_bound_through_the_api(site: Site) -> None:
    bob = site.bob
    assert _refused(site, bob, priority=1_000_000) == (
        f"priority 1000000 is above what queue 'default' allows its members {BOUND}"
    )
    assert _refused(site, bob, priority="critical") == (
        f"priority 'critical' (10000) is above what queue 'default' allows its members {BOUND}"
    )
    assert BOUND in _refused(site, bob, priority="high", array="0-1")
    at_bound = submit(site.server, bob.token, command=["true"], priority="normal")
    assert job(site.server, at_bound)["priority"] == 500
    assert finished(site.server, at_bound)["state"] == "completed"


def test_bob_asks_above_the_bound_in_an_sbatch_script(site: Site) -> None:
    bob = site.bob
    asks = (("--priority=1000000", "1000000"), ("--qos=critical", "'critical' (10000)"))
    for directive, shown in asks:
        script = bob.home / "greedy.sh"
        bob.shell(f"printf '#!/bin/bash\\n#SBATCH {directive}\\ntrue\\n' > {script}")
        code, out, err = _cli(site, bob, f"submit {script}")
        assert (code, out) == (1, "")
        assert err == (
            f"railyard: priority {shown} is above what queue 'default' allows its members {BOUND}\n"
        )
    code, out, err = _cli(site, bob, "submit --parsable --gpus 1 --nice 100 -- true")
    assert code == 0, err
    assert job(site.server, out.strip())["priority"] == 400
    code, _, err = _cli(site, bob, "submit --nice=-1 -- true")
    assert code == 1
    assert err.startswith("railyard: nice -1 raises the job's priority: only an admin may")


def test_nice_lowers_and_an_admin_asks_any(site: Site) -> None:
    nice = submit(site.server, site.bob.token, command=["true"], priority="normal", nice=50)
    assert (job(site.server, nice)["priority"], job(site.server, nice)["nice"]) == (450, 50)
    assert "only an admin may give a negative nice" in _refused(site, site.bob, nice=-10)
    made = site.server.request("POST", "/v1/jobs", json={
        "command": ["true"], "gpus": 0, "priority": 1_000_000, "nice": -5, "export": "ALL",
        "env": {"PATH": "/usr/bin:/bin"}})  # fmt: skip
    assert made[0]["priority"] == 1_000_005
    assert finished(site.server, made[0]["id"])["state"] == "completed"


def _running(site: Site, job_id: str) -> bool:
    return bool(job(site.server, job_id)["state"] == "running")


def test_bobs_priority_no_longer_preempts_alices_job(site: Site) -> None:
    server = site.server
    server.request("PATCH", "/v1/queues/default", json={"priority_preemption": True})
    alice = site.alice
    marker = alice.home / "alive"
    long = submit(server, alice.token, command=["bash", "-c", f"touch {marker}; sleep 300"],
                  gpus=4, workdir=str(alice.home))  # fmt: skip
    try:
        wait(lambda: _running(site, long) and marker.exists())
        for asked in (1_000_000, "critical", "high"):
            assert BOUND in _refused(site, site.bob, priority=asked)
        bobs = submit(server, site.bob.token, command=["true"], priority="normal")
        wait(lambda: job(server, bobs)["reason"] != "", timeout_s=30)  # the loop has judged it
        assert _running(site, long), "bob's job at the bound evicted alice's"
        assert job(server, bobs)["state"] == "pending"
        server.request("DELETE", f"/v1/jobs/{bobs}")
        # an admin's higher priority does evict her job here: preemption is live in this queue
        admins = submit(server, server.token, command=["true"], priority="critical")
        # evicted: requeued, and it may be running again before a poll sees it pending
        wait(lambda: job(server, long)["restart_count"] >= 1)
        assert finished(server, admins)["state"] == "completed"
    finally:
        server.request("DELETE", f"/v1/jobs/{long}")
        server.request("PATCH", "/v1/queues/default", json={"priority_preemption": False})
