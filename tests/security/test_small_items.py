"""The smaller holes of the security review of b858d76 (issue 20, item 8), one test each: a
job name that forges `railyard queue` rows, a dependency that tells bob about alice's job,
a wrapper that blames /bin/sh for an output file it cannot open, a spool job users cannot
reach, paths with control characters, and a plain user whose jobs would run as root."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.integration.server_proc import ServerProcess
from tests.integration.tenants import NEEDS_ROOT, Site, finished, submit, user

pytestmark = NEEDS_ROOT


def post_job(site: Site, token: str, **body: Any) -> Any:
    body.setdefault("gpus", 1)
    return site.server.call("POST", "/v1/jobs", token=token, json=body)


def test_a_job_name_with_cr_lf_is_refused(site: Site) -> None:
    forged = "mine\r\n99      default  alice  fake  RUNNING"
    response = post_job(site, site.bob.token, command=["true"], name=forged)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail.startswith("name: ")
    assert "control character U+000D" in detail
    assert "\n" not in detail
    assert "(hint: " in detail


@pytest.mark.parametrize(("field", "value"), [("output", "out\x00.txt"), ("error", "a\nb.err")])
def test_output_and_error_paths_with_control_characters_are_refused(
    site: Site, field: str, value: str
) -> None:
    response = post_job(site, site.bob.token, command=["true"], **{field: value})
    assert response.status_code == 422
    assert response.json()["detail"].startswith(f"{field}: ")


def test_a_dependency_on_alices_job_is_no_such_job(site: Site) -> None:
    alice_job = submit(site.server, site.alice.token, command=["true"])
    finished(site.server, alice_job)
    theirs = post_job(site, site.bob.token, command=["true"], dependency=f"afterok:{alice_job}")
    assert theirs.status_code == 422
    missing_id = str(int(alice_job) + 100000)
    nobodys = post_job(site, site.bob.token, command=["true"], dependency=f"afterok:{missing_id}")
    assert nobodys.status_code == 422
    said = theirs.json()["detail"]
    assert said == nobodys.json()["detail"].replace(missing_id, alice_job)
    admin = post_job(site, site.server.token, command=["true"], dependency=f"afterany:{alice_job}")
    assert admin.status_code == 201, admin.text  # an admin sees every job


def test_the_wrapper_names_the_output_file_it_cannot_open(site: Site) -> None:
    target = site.alice.home / "bob.out"  # alice's 0700 directory: bob cannot create it
    job_id = submit(site.server, site.bob.token, command=["true"], output=str(target))
    assert finished(site.server, job_id)["state"] == "failed"
    said = (site.spool / job_id / "logs" / "rank-0.log").read_text()
    assert f"Could not open stdout file {target}: Permission denied" in said
    assert "/bin/sh" not in said
    assert "cannot run" not in said
    assert not target.exists()


def test_up_refuses_a_spool_job_users_cannot_reach(site: Site, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    first = ServerProcess(state, gpus=1, spool_dir=site.scratch / "spool-reachable")
    first.start(timeout_s=120)
    try:
        user(first, "bob", site.bob.account.pw_name)
    finally:
        first.stop()
    inside = ServerProcess(state, gpus=1, spool_dir=state / "jobs")  # up makes state 0700
    with pytest.raises(RuntimeError) as refused:
        inside.start(timeout_s=120)  # refused: it exits, with its log in the error
    assert inside.proc is not None
    assert inside.proc.returncode == 2
    lines = [line for line in str(refused.value).splitlines() if "cannot reach" in line]
    assert len(lines) == 1
    assert re.search(rf"job users cannot reach {state}/jobs: {state} is mode 0700", lines[0])
    assert "(hint: " in lines[0]


def test_a_plain_user_mapped_to_root_runs_nothing(site: Site) -> None:
    token = user(site.server, "rooted", "root")
    response = post_job(site, token, command=["id", "-u"])
    assert response.status_code == 403
    assert "only an admin's jobs may run as root" in response.json()["detail"]
