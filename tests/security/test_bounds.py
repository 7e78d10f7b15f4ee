"""Every size a user types is bounded by what the cluster could ever run (issue 52 item 1,
issue 60 item 4; the 1,000-job admin cancel of item 8).

bob, from his own account against the root site, asks for 3,000 tasks on one node (the loop
spent ~0.15 s per rank on such a job, and another user's job waited 452 s behind it): each
way in (the route, the raw-ASGI fast submit, a batch, an array, the CLI) answers one 422 line
naming the bound, and nothing is stored. A second site started with ``--max-array-size`` and
``--max-tasks-per-job`` refuses an array or a job over them, naming the flag. An admin's
``railyard cancel -u bob`` reaches all of bob's 1,200 jobs, past the 1,000 ids one cancel
request takes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import railyard
from railyard.client.bounds import MAX_JOBS_LISTED as ALL_JOBS
from tests.integration.tenants import (
    NEEDS_ROOT,
    Site,
    Tenant,
    require_railyard,
    shared_site,
    submit,
)

pytestmark = NEEDS_ROOT

SRC = Path(railyard.__file__).resolve().parents[1]  # the CLI needs the standard library only
GREEDY = {"command": ["true"], "ntasks_per_node": 3000, "export": "ALL",
          "env": {"PATH": "/usr/bin:/bin"}}  # fmt: skip
BOUND = "ntasks_per_node: 3000 tasks on one node, the largest"


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """A second root site whose admin set the site limits low."""
    state: Path = tmp_path_factory.mktemp("limited")
    extra = ("--max-array-size", "100", "--max-tasks-per-job", "2")
    with shared_site(state, extra=extra) as made:
        yield made


def _jobs_of(site: Site, tenant: Tenant) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = site.server.request(
        "GET", "/v1/jobs", token=tenant.token, params={"limit": ALL_JOBS}
    )  # the API pages by default
    return answer


def _refused(site: Site, path: str, body: dict[str, Any]) -> str:
    """bob's POST is a 422 with one line; its detail."""
    response = site.server.call("POST", path, token=site.bob.token, json=body)
    assert response.status_code == 422, response.text
    detail: str = response.json()["detail"]
    assert "\n" not in detail
    assert "(hint: " in detail
    return detail


def _cli(site: Site, tenant: Tenant, args: str, token: str | None = None) -> tuple[int, str, str]:
    require_railyard(site)
    env = {"PYTHONPATH": str(SRC), "RAILYARD_URL": site.server.url,
           "RAILYARD_TOKEN": token or tenant.token}  # fmt: skip
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    done = tenant.shell(f"env {exports} {shlex.quote(site.python)} -m railyard {args}")
    return done.returncode, done.stdout, done.stderr


def test_3000_tasks_on_one_node_are_refused_on_every_way_in(site: Site) -> None:
    before = len(_jobs_of(site, site.bob))
    # the fast path: bob's token is one the cache knows once he has been seen
    submit(site.server, site.bob.token, command=["true"], gpus=0, hold=True)
    before += 1
    assert _refused(site, "/v1/jobs", GREEDY).startswith(BOUND)
    assert _refused(site, "/v1/jobs", {**GREEDY, "array": "0-1"}).startswith(BOUND)
    batch = {"jobs": [{**GREEDY, "ntasks_per_node": 1}, GREEDY]}
    assert _refused(site, "/v1/jobs/batch", batch).startswith(f"jobs[1].{BOUND}")
    assert _refused(site, "/v1/jobs", {**GREEDY, "ntasks_per_node": 1_048_576}).startswith(
        "ntasks_per_node: 1048576 tasks on one node"
    )
    spread = {"command": ["true"], "nodes": 1, "ntasks": 3000}
    assert _refused(site, "/v1/jobs", spread).startswith("ntasks: 3000 tasks on one node")
    code, out, err = _cli(site, site.bob, "submit --ntasks-per-node 3000 -- true")
    assert (code, out) == (2, ""), err
    assert err.startswith(f"railyard: {BOUND}"), err
    assert len(_jobs_of(site, site.bob)) == before  # nothing stored


def test_a_job_at_the_nodes_bound_is_accepted_and_no_update_grows_it(site: Site) -> None:
    cores = os.cpu_count() or 1
    job_id = submit(site.server, site.bob.token, command=["true"], gpus=0,
                    ntasks_per_node=cores, hold=True)  # fmt: skip
    grow = site.server.call("PATCH", f"/v1/jobs/{job_id}", token=site.bob.token,
                            json={"ntasks_per_node": 3000})  # fmt: skip
    assert grow.status_code == 422, grow.text
    assert site.server.request("GET", f"/v1/jobs/{job_id}")["ntasks_per_node"] == cores
    site.server.request("DELETE", f"/v1/jobs/{job_id}")


def test_a_job_its_queue_could_never_admit_is_refused(site: Site) -> None:
    flavor = site.server.request("GET", "/v1/nodes")[0]["flavor"]
    site.server.request("POST", "/v1/queues", json={"name": "tiny", "nominal_gpus": {flavor: 1}})
    site.server.request("POST", "/v1/queues/tiny/members", json={"user": "bob"})
    detail = _refused(site, "/v1/jobs", {"command": ["true"], "gpus": 2, "queue": "tiny"})
    assert detail.startswith(f"gpus: 2 {flavor} GPUs, queue tiny may never use more than 1 "
                             "(its quota and what it may borrow)")  # fmt: skip
    fits = submit(site.server, site.bob.token, command=["true"], queue="tiny", hold=True)
    site.server.request("DELETE", f"/v1/jobs/{fits}")


def test_site_limits_refuse_an_array_and_a_job_over_them(limited: Site) -> None:
    detail = _refused(limited, "/v1/jobs", {**GREEDY, "ntasks_per_node": 1, "array": "0-100"})
    assert detail.startswith("array: 101 tasks, over this site's limit of 100 per array "
                             "(railyard up --max-array-size)")  # fmt: skip
    detail = _refused(limited, "/v1/jobs", {**GREEDY, "ntasks_per_node": 3, "gpus": 4})
    assert detail.startswith("ntasks_per_node: 3 tasks in one job, over this site's limit of 2 "
                             "(railyard up --max-tasks-per-job)")  # fmt: skip
    at = submit(limited.server, limited.bob.token, command=["true"], gpus=0, hold=True,
                array="0-99", ntasks_per_node=2)  # fmt: skip
    limited.server.request("DELETE", f"/v1/jobs/{at}")
    # a batch of arrays each within the limit, more than 1,000 tasks in all: one request
    batch = {"jobs": [{"command": ["true"], "hold": True, "array": "0-99"}] * 11}
    detail = _refused(limited, "/v1/jobs/batch", batch)
    assert detail.startswith("jobs: 1100 tasks in one batch, over this site's limit of 1000 "
                             "per request (railyard up --max-array-size)")  # fmt: skip


def test_an_admin_cancels_more_than_1000_jobs_of_a_user(site: Site) -> None:
    bob = site.bob
    for _ in range(2):  # 1,200 held jobs: an array and a batch
        submit(site.server, bob.token, command=["true"], gpus=0, hold=True, array="0-499")
    alike = {"command": ["true"], "hold": True, "export": "NONE"}
    made = site.server.call("POST", "/v1/jobs/batch", token=bob.token,
                            json={"jobs": [alike] * 200})  # fmt: skip
    assert made.status_code == 201, made.text
    active = [j for j in _jobs_of(site, bob) if j["state"] == "pending"]
    assert len(active) >= 1200
    env = {**os.environ, "PYTHONPATH": str(SRC), "RAILYARD_URL": site.server.url,
           "RAILYARD_TOKEN": site.server.token}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "railyard", "cancel", "-u", "bob", "--json"],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)) >= len(active)
    assert not [j for j in _jobs_of(site, bob) if j["state"] == "pending"]
