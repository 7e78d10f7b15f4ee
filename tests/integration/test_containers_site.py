"""Containerised jobs through a root `railyard up` serving two Unix accounts (issue 24): the
queue's mount prefixes at submit, a batch script in its image as its user, and a running
container through cancel and through kill -9 of the server."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.exec.container_image import OS_NAME, imported_image
from tests.integration.tenants import NEEDS_ROOT, finished, job, shared_site, submit, wait
from tests.parts import needs

pytestmark = [needs("podman"), *NEEDS_ROOT, pytest.mark.long]

USR = "/usr:/usr:ro"


def containers_of(job_id: str) -> list[str]:
    """Every container of ``job_id``'s steps, running or not (step names carry the job id)."""
    listed = subprocess.run(
        ["podman", "ps", "--all", "--format", "{{.Names}}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [n for n in listed.stdout.split() if n.startswith(f"railyard-job_{job_id}_")]


def container(*mounts: str) -> dict[str, Any]:
    return {"image": imported_image(), "mounts": [USR, *mounts]}


def test_mounts_scripts_cancel_and_restart(tmp_path: Path) -> None:
    with shared_site(tmp_path) as site:
        server, alice = site.server, site.alice
        data = site.scratch / "datasets"
        data.mkdir(mode=0o755)
        (data / "corpus.txt").write_text("tokens\n")
        data.joinpath("corpus.txt").chmod(0o644)
        server.request("PATCH", "/v1/queues/default",
                       json={"container_mounts": ["/usr", str(data)]})  # fmt: skip

        # A mount outside the queue's prefixes: one line, 403, nothing stored.
        refused = server.call(
            "POST", "/v1/jobs", token=alice.token,
            json={"command": ["true"], "gpus": 1, "container": container("/etc:/host-etc")},
        )  # fmt: skip
        assert refused.status_code == 403, refused.text
        detail = refused.json()
        assert "container.mounts[1]" in str(detail), detail
        assert "/etc is outside" in str(detail), detail

        # A batch script in the image, as alice, reading the mounted data set.
        script = (
            "#!/bin/sh\ncat /etc/os-release\necho user=$(id -un) uid=$(id -u)\n"
            "cat /data/corpus.txt\necho cwd=$(pwd)\n"
        )
        batch = submit(
            server, alice.token, script=script, workdir=str(alice.home),
            container=container(f"{data}:/data:ro"),
        )  # fmt: skip
        ended = finished(server, batch, timeout_s=120)
        output = (alice.home / f"slurm-{batch}.out").read_text()
        assert ended["state"] == "completed", output
        assert f'NAME="{OS_NAME}"' in output
        assert f"user={alice.account.pw_name} uid={alice.account.pw_uid}" in output, output
        assert "tokens" in output, output
        assert f"cwd={alice.home}" in output, output
        assert containers_of(batch) == []
        # the wrapper said when the image was ready; the time limit ran from then
        assert ended["start_t_s"] <= ended["run_t_s"] <= ended["end_t_s"], ended

        # Cancel: the running container goes, with its record.
        long = submit(server, alice.token, command=["sleep", "600"], workdir=str(alice.home),
                      container=container())  # fmt: skip
        wait(lambda: len(containers_of(long)) == 1, 120)
        server.request("DELETE", f"/v1/jobs/{long}", token=alice.token)
        assert finished(server, long)["state"] == "cancelled"
        wait(lambda: containers_of(long) == [], 30)

        # kill -9 of the server: the container runs on, is adopted, and ends once.
        kept = submit(server, alice.token, workdir=str(alice.home), container=container(),
                      command=["sh", "-c", "sleep 4; echo survived"])  # fmt: skip
        wait(lambda: len(containers_of(kept)) == 1, 120)
        server.kill9()
        assert len(containers_of(kept)) == 1
        server.start(timeout_s=90, any_health=True)
        ended = finished(server, kept, timeout_s=120)
        assert (ended["state"], ended["restart_count"]) == ("completed", 0), ended
        log = job(server, kept)
        assert log["exit_code"] == 0, log
        wait(lambda: containers_of(kept) == [], 30)
