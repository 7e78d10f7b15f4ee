"""`exec.terminals.sshd`: the rank's environment as sshd's ``SetEnv`` and the command a connection
runs
(the whole path, through a real sshd, is `tests/security/test_ssh_jobs.py`)."""

from __future__ import annotations

import subprocess

from tests.parts import needs

from railyard.exec.terminals import sshd


def test_set_env_quotes_each_variable_and_leaves_out_what_it_cannot_carry() -> None:
    env = {
        "SLURM_JOB_ID": "7",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NOTE": "two words",
        "PATH": "/usr/bin",  # the login's own
        "SSH_AUTH_SOCK": "/tmp/agent",
        "QUOTED": 'say "hi"',  # sshd's quoting cannot carry it
        "MULTI": "a\nb",
    }
    assert sshd.set_env(env) == '"CUDA_VISIBLE_DEVICES=0,1" "NOTE=two words" "SLURM_JOB_ID=7"'


@needs("sshd")  # ssh-keygen comes with it
def test_the_command_makes_the_host_key_once_and_becomes_sshd(tmp_path) -> None:  # type: ignore[no-untyped-def]
    argv = sshd.command("/bin/echo", {"SLURM_JOB_ID": "7"}, "alice")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    first = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
    key = tmp_path / sshd.HOST_KEY
    assert key.stat().st_mode & 0o777 == 0o600
    assert first.stdout.startswith(f"-i -e -f /dev/null -h {key} -oPidFile=none")
    assert '-oSetEnv="SLURM_JOB_ID=7"' in first.stdout
    assert "-oAllowUsers=alice" in first.stdout  # a root sshd would let others in
    made = key.read_bytes()
    subprocess.run(argv, env=env, capture_output=True, check=True)
    assert key.read_bytes() == made  # one key for every job: ssh-config pins it once
