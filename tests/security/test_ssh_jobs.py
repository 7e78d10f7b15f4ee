"""``ssh job-N`` into a running job (issue 23): Debian's OpenSSH client with the config that
``railyard ssh-config`` prints, its ``ProxyCommand`` (``railyard proxy``) through a real root
server to ``sshd -i`` started inside the job as its owner. The session runs as the owner, in
the job's environment and cgroup, and ends with the job; another user, a user without a job
there, and a host that names no job are refused. Nothing listens on a port for any of it."""

from __future__ import annotations

import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.tenants import (
    NEEDS_ROOT,
    Site,
    Tenant,
    finished,
    job,
    require_railyard,
    shared_site,
    submit,
    wait,
)
from tests.parts import needs

pytestmark = [*NEEDS_ROOT, needs("sshd")]
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with shared_site(tmp_path_factory.mktemp("state")) as made:
        for tenant in (made.alice, made.bob):  # each with a key of their own, authorized
            done = tenant.shell(
                "umask 077 && mkdir -p ~/.ssh && ssh-keygen -q -t ed25519 -N '' "
                "-f ~/.ssh/id_ed25519 && cp ~/.ssh/id_ed25519.pub ~/.ssh/authorized_keys"
            )
            assert done.returncode == 0, done.stderr
        yield made


def _ssh(site: Site, tenant: Tenant, host: str, command: str, timeout_s: float = 90) -> tuple:  # type: ignore[type-arg]
    """``ssh -F <railyard ssh-config> HOST COMMAND`` from the tenant's own shell."""
    require_railyard(site)
    env = {"PYTHONPATH": str(SRC), "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": tenant.token}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    railyard = f"env {exports} {shlex.quote(site.python)} -m railyard"
    script = (
        f"{railyard} ssh-config > ssh_config && "
        f"env {exports} ssh -F ssh_config -o BatchMode=yes {host} {shlex.quote(command)}"
    )
    done = tenant.shell(script, timeout_s=timeout_s)
    return done.returncode, done.stdout, done.stderr


def test_ssh_lands_in_the_job_as_its_owner_and_ends_with_it(site: Site) -> None:
    alice = site.alice
    job_id = submit(site.server, alice.token, command=["sleep", "300"], gpus=2)
    wait(lambda: job(site.server, job_id)["state"] == "running")
    probe = "id -u; echo $SLURM_JOB_ID $SLURM_PROCID $CUDA_VISIBLE_DEVICES; cat /proc/self/cgroup"
    code, out, err = _ssh(site, alice, f"job-{job_id}", probe)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == str(alice.account.pw_uid)
    assert lines[1] == f"{job_id} 0 0,1"
    assert any(f"job_{job_id}_0_" in line for line in lines[2:]), out  # the job's step cgroup
    # A byte stream, not keystrokes: 3 MB through scp arrive whole (no input is dropped).
    env = {"PYTHONPATH": str(SRC), "RAILYARD_URL": site.server.url, "RAILYARD_TOKEN": alice.token}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    copied = alice.shell(
        f"head -c 3000000 /dev/urandom > big && env {exports} scp -q -F ssh_config "
        f"-o BatchMode=yes big job-{job_id}:big.copy && sha256sum < big && env {exports} "
        f"ssh -F ssh_config -o BatchMode=yes job-{job_id} 'sha256sum < big.copy; rm big.copy'",
        timeout_s=120,
    )
    assert copied.returncode == 0, copied.stderr
    sent, received = copied.stdout.split()[::2]
    assert sent == received
    # A session that would outlive the job ends with it: nothing of it is left behind.
    alice.shell(
        f"(env {exports} ssh -F ssh_config -o BatchMode=yes job-{job_id} sleep 4242 "
        "> held.out 2>&1; echo $? > held.code) < /dev/null > /dev/null 2>&1 &"
    )
    wait(lambda: alice.shell("pgrep -u $(id -u) -fx 'sleep 4242'").returncode == 0)
    site.server.request("DELETE", f"/v1/jobs/{job_id}", token=alice.token)
    assert finished(site.server, job_id)["state"] == "cancelled"
    wait(lambda: (alice.home / "held.code").exists())
    assert (alice.home / "held.code").read_text().strip() != "0"
    time.sleep(0.5)
    assert alice.shell("pgrep -u $(id -u) -fx 'sleep 4242'").returncode == 1  # none left


def test_another_user_no_job_and_a_bad_host_are_refused(site: Site) -> None:
    alice, bob = site.alice, site.bob
    job_id = submit(site.server, alice.token, command=["sleep", "120"], gpus=1)
    wait(lambda: job(site.server, job_id)["state"] == "running")
    code, out, err = _ssh(site, bob, f"job-{job_id}", "id")
    assert (code, out) == (255, "")
    assert f"railyard: no job '{job_id}'" in err, err
    code, out, err = _ssh(site, alice, "job-999999", "id")
    assert (code, out) == (255, "")
    assert "railyard: no job '999999'" in err, err
    code, _, err = _ssh(site, alice, "job-x", "id")
    assert code == 255
    assert "railyard: host 'job-x' names no job (hint: job-N, or job-N.R for rank R)" in err
    site.server.request("DELETE", f"/v1/jobs/{job_id}", token=alice.token)
