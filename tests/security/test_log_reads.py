"""The trust boundary, `railyard logs`: the server never opens a path a user can influence with
root's rights. Each test is one route bob (the attacker) took in the security review of
b858d76: an ``--output`` of his own job that points, through the spool with ``..`` or
through a symlink he planted, at a file he may not read; the server must not read it for him.
The log reader opens a user's output as the job's account and shows only the files the job's
wrapper created."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.integration.tenants import NEEDS_ROOT, Site, Tenant, finished, submit, wait

pytestmark = NEEDS_ROOT


def logs(site: Site, tenant: Tenant, job_id: str, offset: int = 0) -> Any:
    """``GET /v1/jobs/<id>/logs`` as ``tenant``: the raw response."""
    return site.server.call(
        "GET", f"/v1/jobs/{job_id}/logs", token=tenant.token, params={"offset": offset}
    )


def through_spool(site: Site, target: Path) -> str:
    """``<spool>/../../..<target>``: textually inside the spool, really ``target``."""
    return str(site.spool) + "/.." * (len(site.spool.parts) - 1) + str(target)


def bob_outputs_to(site: Site, output: str) -> str:
    """A finished job of bob's whose ``--output`` is ``output``; its id."""
    job_id = submit(site.server, site.bob.token, command=["true"], output=output,
                    workdir=str(site.bob.home))  # fmt: skip
    finished(site.server, job_id)
    return job_id


OWN_WORDS = ("==== ", "railyard: error: Could not open stdout file ")
"""The only lines a refused read may show: the job's own spool log, where its wrapper wrote
its header and why it could not open the output (``railyard logs`` of a job whose
``--output`` never opened shows that log, never the path the user named)."""


def refused(response: Any, secret: str) -> None:
    """Nothing of ``secret`` came back, nor a line of the file named: the answer is a plain
    403, or a 200 of railyard's own lines; never a 5xx."""
    assert response.status_code in (200, 403), response.text
    assert secret not in response.text
    if response.status_code == 200:
        lines = response.json()["text"].splitlines()
        assert all(line.startswith(OWN_WORDS) for line in lines), lines


def alice_checkpoint(site: Site, secret: str) -> tuple[str, Path]:
    """A finished job of alice's that left ``secret`` in its checkpoint; (id, checkpoint)."""
    job_id = submit(site.server, site.alice.token, command=["bash", "-c",
                    f'echo {secret} > "$RAILYARD_CHECKPOINT_DIR/ckpt.txt"'])  # fmt: skip
    assert finished(site.server, job_id)["state"] == "completed"
    ckpt = site.spool / job_id / "checkpoints" / "ckpt.txt"
    assert ckpt.read_text().strip() == secret
    return job_id, ckpt


def test_dotdot_through_the_spool_to_the_admin_token(site: Site) -> None:
    client = site.server.state_dir / "client.json"
    job_id = bob_outputs_to(site, through_spool(site, client))
    refused(logs(site, site.bob, job_id), site.server.token)


def test_dotdot_through_the_spool_to_etc_shadow(site: Site) -> None:
    job_id = bob_outputs_to(site, through_spool(site, Path("/etc/shadow")))
    refused(logs(site, site.bob, job_id), "root:")


def test_alices_checkpoint_by_its_path_in_the_spool(site: Site) -> None:
    _, ckpt = alice_checkpoint(site, "alice-ckpt-direct")
    job_id = bob_outputs_to(site, str(ckpt))
    refused(logs(site, site.bob, job_id), "alice-ckpt-direct")


def test_symlink_planted_in_bobs_own_checkpoints_to_alices_checkpoint(site: Site) -> None:
    alice_job, ckpt = alice_checkpoint(site, "alice-ckpt-secret")
    planted = submit(site.server, site.bob.token, command=["true"])
    finished(site.server, planted)
    link = site.spool / planted / "checkpoints" / "link"
    done = site.bob.shell(f"ln -s {ckpt.parent} {link}")  # his own directory: he may
    assert done.returncode == 0, done.stderr
    job_id = bob_outputs_to(site, f"{link}/ckpt.txt")
    refused(logs(site, site.bob, job_id), "alice-ckpt-secret")
    assert ckpt.read_text().strip() == "alice-ckpt-secret"  # and nothing wrote over it
    assert alice_job


def test_proc_environ_of_alices_job(site: Site) -> None:
    pid_file = site.alice.home / "pid"
    env = {"PATH": "/usr/bin:/bin", "ALICE_ENV_SECRET": "alice-env-secret"}
    alice_job = submit(site.server, site.alice.token, command=["bash", "-c",
                       f"echo $$ > {pid_file}; exec sleep 60"], env=env)  # fmt: skip
    try:
        wait(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        pid = pid_file.read_text().strip()
        job_id = bob_outputs_to(site, through_spool(site, Path(f"/proc/{pid}/environ")))
        refused(logs(site, site.bob, job_id), "alice-env-secret")
    finally:
        site.server.request("DELETE", f"/v1/jobs/{alice_job}")


def test_alices_private_file(site: Site) -> None:
    secret = site.alice.home / "secret.txt"
    done = site.alice.shell(f"umask 077; echo alice-file-secret > {secret}")
    assert done.returncode == 0, done.stderr
    job_id = bob_outputs_to(site, through_spool(site, secret))
    refused(logs(site, site.bob, job_id), "alice-file-secret")
    assert secret.read_text().strip() == "alice-file-secret"


def test_a_proc_file_or_a_fifo_is_never_followed_forever(site: Site) -> None:
    """`/proc` files say size 0 whatever they hold: a reader that trusted the size served the
    same text again at each poll of `logs -f`, forever. A FIFO must not block the server
    (each call below gives up after 10 s)."""
    job_id = bob_outputs_to(site, through_spool(site, Path("/proc/self/status")))
    refused(logs(site, site.bob, job_id), "VmRSS")
    out = site.bob.home / "swapped.out"
    job_id = bob_outputs_to(site, str(out))
    done = site.bob.shell(f"rm -f {out} && mkfifo {out}")  # his own log, now a FIFO
    assert done.returncode == 0, done.stderr
    response = logs(site, site.bob, job_id)
    assert response.status_code == 403
    assert "not a regular file" in response.json()["detail"]


def test_bobs_own_logs_are_still_readable(site: Site) -> None:
    out = site.bob.home / "own.out"
    job_id = submit(site.server, site.bob.token, command=["bash", "-c", "echo 'step 1 ✓'"],
                    output=str(out), workdir=str(site.bob.home))  # fmt: skip
    assert finished(site.server, job_id)["state"] == "completed"
    first = logs(site, site.bob, job_id).json()
    assert first["text"].endswith("step 1 ✓\n")
    assert logs(site, site.bob, job_id, first["offset"]).json()["text"] == ""
    spooled = submit(site.server, site.bob.token, command=["bash", "-c", "echo spooled"])
    finished(site.server, spooled)
    assert logs(site, site.bob, spooled).json()["text"].endswith("spooled\n")
