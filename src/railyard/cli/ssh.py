"""``railyard ssh-config`` and ``railyard proxy``: ``ssh job-N`` into a running job of yours,
for a terminal, ``scp`` or an editor's remote mode (VSCode Remote-SSH), through the control
plane.

``ssh-config`` prints an OpenSSH ``Host job-*`` block to append to ``~/.ssh/config`` (or give
with ``ssh -F``). Its ``ProxyCommand`` is ``railyard proxy %h``: the connection goes over the
API's WebSocket (your token; only a job's owner gets through) to ``sshd -i`` started inside
the job as you (`exec.terminals.sshd`), which checks your own key. ``job-N`` is rank 0 of job N,
``job-N.R`` rank R.
"""

from __future__ import annotations

import argparse
import re
import shlex
import sys

from railyard.cli.args import Command, Parser, connect, fail

HOST = re.compile(r"^job-(?P<job>[0-9]+(?:_[0-9]+)?)(?:\.(?P<rank>[0-9]{1,7}))?$")
ALIAS = "railyard-jobs"  # one host key per user, for every job (exec.terminals.sshd)


def ssh_config(args: argparse.Namespace) -> int:
    """Print an OpenSSH Host block: `ssh job-N` reaches your running job N (editors too)."""
    with connect() as client:
        me = client.whoami()
    account = me.get("unix_user") or me["name"]
    proxy = f"{shlex.quote(sys.executable)} -m railyard proxy %h"
    print(
        f"# railyard: ssh job-N reaches rank 0 of your running job N, job-N.R rank R\n"
        f"# (as {account}, with your own key in ~/.ssh/authorized_keys)\n"
        f"Host job-*\n"
        f"    ProxyCommand {proxy}\n"
        f"    User {account}\n"
        f"    HostKeyAlias {ALIAS}\n"
        f"    UserKnownHostsFile ~/.railyard/known_hosts\n"
        f"    StrictHostKeyChecking accept-new\n"
        f"    ForwardAgent no\n"
        f"    ForwardX11 no"
    )
    return 0


def proxy(args: argparse.Namespace) -> int:
    """Carry one SSH connection to a running job of yours (an OpenSSH ProxyCommand)."""
    from railyard.cli.run import Session

    found = HOST.match(args.host)
    if found is None:
        fail(f"host {args.host!r} names no job (hint: job-N, or job-N.R for rank R)")
    rank = int(found["rank"] or 0)
    with connect() as client:
        code = Session(client.ssh(found["job"], rank), False, lambda: None).run()
    return 255 if code is None else code  # 255: ssh's own "the connection failed"


def _ssh_config_args(p: Parser) -> None:
    del p  # no options: the server and token are the other commands'


def _proxy_args(p: Parser) -> None:
    p.add_argument("host", help="job-N (rank 0 of job N) or job-N.R (rank R), ssh's %%h")


COMMANDS = (
    Command("ssh-config", ssh_config, _ssh_config_args),
    Command("proxy", proxy, _proxy_args),
)
