"""``ssh job-N``: an OpenSSH server for one connection, started inside a running job's rank.

Nothing listens: ``railyard proxy`` (an OpenSSH ``ProxyCommand``) carries the connection over
the control plane's WebSocket to one more process of the rank's step (`exec.terminals.attach`),
which
execs ``sshd -i``: inetd mode, one session on its stdin and stdout. It runs as the job's
user, so it can log in only that user (with the user's own ``~/.ssh/authorized_keys``), and
everything the session starts is in the job's cgroups, sees its GPUs only and ends with it,
as Slurm's ``pam_slurm_adopt`` puts an SSH into the job. VSCode Remote-SSH works through it
(its port forwarding is a channel of the same connection). Its options are all on the
command line: nothing system-wide changes and no root sshd is needed.

The host key is the user's (``~/.railyard/ssh_host_ed25519_key``, made on first use, 0600):
one key for every job, so ``railyard ssh-config`` pins it under one alias and a new job is
not a new unknown host. The rank's environment (``SLURM_*``, ``CUDA_VISIBLE_DEVICES``, ...)
reaches the session through ``SetEnv``, as sshd clears the environment it was started with.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Mapping

SSHD = "/usr/sbin/sshd"
HOST_KEY = ".railyard/ssh_host_ed25519_key"  # under the user's home
_OWN = frozenset(("PATH", "HOME", "USER", "LOGNAME", "SHELL", "MAIL", "TERM", "PWD", "OLDPWD"))
OPTIONS = (
    "PidFile=none", "UsePAM=no", "PasswordAuthentication=no", "KbdInteractiveAuthentication=no",
    "PubkeyAuthentication=yes", "AuthorizedKeysFile=.ssh/authorized_keys", "StrictModes=yes",
    "X11Forwarding=no", "AllowAgentForwarding=no", "AllowTcpForwarding=local",
    "PermitTunnel=no", "PermitUserEnvironment=no", "PrintMotd=no", "LogLevel=ERROR",
    "ClientAliveInterval=30", "Subsystem=sftp internal-sftp",  # scp and sftp (VSCode's too)
)  # fmt: skip


def sshd_path() -> str | None:
    """Debian's ``openssh-server`` sshd, or one on the PATH; None where there is none."""
    return SSHD if shutil.which(SSHD) else shutil.which("sshd")


def set_env(env: Mapping[str, str]) -> str:
    """The rank's variables as one ``SetEnv`` value, each ``"NAME=VALUE"`` quoted; those
    the login sets itself, and values sshd's quoting cannot carry, are left out."""
    words = []
    for name, value in sorted(env.items()):
        if name in _OWN or name.startswith("SSH_") or not name.isidentifier():
            continue
        if any(c in value for c in '"\\') or not value.isprintable():
            continue
        words.append(f'"{name}={value}"')
    return " ".join(words)


def command(sshd: str, env: Mapping[str, str], account: str | None) -> list[str]:
    """What the rank's step runs for one SSH connection: make the user's host key if it is
    missing, then become ``sshd -i`` (errors to stderr, which the proxy shows) that lets in
    the job's account alone. A job of root's (single-user mode) runs sshd as root, which
    wants its privilege-separation directory (Debian's ``/run/sshd``)."""
    options = [f"-o{o}" for o in OPTIONS]
    if account:
        options.append(f"-oAllowUsers={account}")
    setenv = set_env(env)
    if setenv:
        options.append(f"-oSetEnv={setenv}")
    script = (
        'k="$HOME/' + HOST_KEY + '"\n'
        'if [ ! -f "$k" ]; then\n'
        '  umask 077 && mkdir -p "${k%/*}" && ssh-keygen -q -t ed25519 -N "" -C railyard-jobs'
        ' -f "$k" </dev/null >/dev/null || { echo "railyard: cannot make $k" >&2; exit 1; }\n'
        "fi\n"
        'if [ "$(id -u)" = 0 ]; then mkdir -p -m 0755 /run/sshd; fi\n'
        f'exec {shlex.quote(sshd)} -i -e -f /dev/null -h "$k" '
        + " ".join(shlex.quote(o) for o in options)
    )
    return ["/bin/sh", "-c", script]
