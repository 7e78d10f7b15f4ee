"""The shared site comes up: both tenants' jobs run as their own accounts."""

from __future__ import annotations

import pytest

from tests.integration.tenants import NEEDS_ROOT, Site, finished, submit

pytestmark = NEEDS_ROOT


def test_each_tenant_runs_as_itself(site: Site) -> None:
    for tenant in (site.alice, site.bob):
        out = tenant.home / "whoami.txt"
        job_id = submit(site.server, tenant.token, command=["bash", "-c", f"id -un > {out}"],
                        workdir=str(tenant.home))  # fmt: skip
        assert finished(site.server, job_id)["state"] == "completed"
        assert out.read_text().strip() == tenant.account.pw_name
    done = site.bob.shell("id -un")
    assert done.stdout.strip() == site.bob.account.pw_name
    if not site.python:
        pytest.fail("no python for jobs")
