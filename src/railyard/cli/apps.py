"""``railyard jupyter [submit options] [--app 'CMD']``: JupyterLab (or any web app) as a job
of yours, served through the dashboard at ``/ui/jobs/N/app/`` to you alone (Open OnDemand's
"interactive app", JupyterHub's "start my server").

JupyterLab listens on a Unix socket in a directory of yours that railyard makes for the job
(``$RAILYARD_APP_SOCKET``), with its own token off: only the dashboard's proxy reaches it, for
your logged-in session, after checking that your account is who listens
(`control.usecases.apps`, `web.appproxy`). ``--app`` runs your command instead; it listens
on ``$RAILYARD_APP_SOCKET`` or on ``127.0.0.1:$RAILYARD_APP_PORT`` and serves its pages under
``$RAILYARD_APP_BASE``. The job runs until its time limit, its queue's idle limit (no request
for that long) or ``railyard cancel``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from typing import TYPE_CHECKING

from railyard.cli.args import Command, connect, fail
from railyard.cli.jobs import FINISHED, split_submit_argv

if TYPE_CHECKING:
    from railyard.client.client import Client

USAGE = """usage: {prog} [submit options] [--app 'COMMAND'] [--python PYTHON]

Start JupyterLab as a job of yours (or, with --app, any web app that listens on
$RAILYARD_APP_SOCKET or 127.0.0.1:$RAILYARD_APP_PORT under the path $RAILYARD_APP_BASE) and
print its URL under the dashboard, where only you may open it. The options are submit's
(--gpus, --time, --queue, ...). railyard cancel N ends it."""


NO_JUPYTER_EXIT = 3
STARTING = "railyard: starting JupyterLab"  # the job's log says so once the check passed
READY_WAIT_S = 120.0  # a bound for a hang: the check is one import
CHECK_POLL_S = 0.25


def jupyter_command(python: str) -> str:
    """JupyterLab on the job's socket, under the dashboard's path, its own token off; first a
    check that ``python`` has it, so a Python without it ends the job saying so."""
    py = shlex.quote(python)
    missing = (f"railyard: {python} has no JupyterLab (hint: {python} -m pip install "
               "jupyterlab, or --python a Python that has it)")  # fmt: skip
    return (
        f"if ! {py} -c 'import jupyterlab' 2>/dev/null; then\n"
        f"  echo {shlex.quote(missing)} >&2\n"
        f"  exit {NO_JUPYTER_EXIT}\n"
        "fi\n"
        f"echo '{STARTING}' >&2\n"
        f"exec {py} -m jupyterlab --no-browser --allow-root"
        ' --ServerApp.sock="$RAILYARD_APP_SOCKET" --ServerApp.sock_mode=0600'
        ' --ServerApp.base_url="$RAILYARD_APP_BASE" --IdentityProvider.token='
        ' --ServerApp.allow_remote_access=True --ServerApp.root_dir="$PWD"'
    )


def jupyter(args: argparse.Namespace) -> int:
    """Start JupyterLab (or --app CMD) as a job, served to you at /ui/jobs/N/app/."""

    argv, app, python = _own_options(list(args.argv))
    options, rest, own = split_submit_argv(argv)
    if "--help" in own:
        print(USAGE.format(prog=args.prog))
        return 0
    if rest:
        fail(f"unexpected {rest[0]!r} (hint: give a web app as --app 'COMMAND')")
    from railyard.cli.run import _ended, _wait_started, one_job_body

    notes: list[str] = []
    body = one_job_body(options, notes, "a web app is one job")
    command = app if app is not None else jupyter_command(python or sys.executable)
    body.update(script=f"#!/bin/sh\n{command}\n", terminal="app")
    body.setdefault("name", "app" if app is not None else "jupyter")
    for note in notes:
        print(f"railyard: note: {note}", file=sys.stderr)
    with connect() as client:
        (job,) = client.submit(body)
        job_id = job["id"]
        state = _wait_started(client, job_id)
        if state not in FINISHED and app is None:
            state = _checked(client, job_id)
        if state in FINISHED:
            return _ended(client, job_id)
        url = f"{client.url}/ui/jobs/{job_id}/app/" + ("lab" if app is None else "")
        print(f"railyard: job {job_id} serves {'JupyterLab' if app is None else 'your app'} at")
        print(url)
        print(f"railyard: open it logged in to the dashboard as yourself; railyard cancel "
              f"{job_id} ends it", file=sys.stderr)  # fmt: skip
    return 0


def _checked(client: Client, job_id: str) -> str:
    """Wait until the job's log says JupyterLab is starting, or the job ended; its state. An
    end before it (no JupyterLab in that Python) is said from the log's own line."""
    deadline = time.monotonic() + READY_WAIT_S
    while time.monotonic() < deadline:
        chunk = client.logs(job_id)
        if STARTING in chunk["text"]:
            return chunk["state"]
        if chunk["finished"] or chunk["state"] in FINISHED:
            said = [x for x in chunk["text"].splitlines() if x.startswith("railyard: ")]
            if said:
                print(said[-1], file=sys.stderr)
            return chunk["state"]
        time.sleep(CHECK_POLL_S)
    return client.job(job_id)["state"]


def _own_options(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    """``--app CMD`` and ``--python PY`` (ours, not sbatch's), taken out of ``argv``."""
    found: dict[str, str] = {}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            out += argv[i:]
            break
        name, eq, value = word.partition("=")
        if name in ("--app", "--python"):
            if not eq:
                if i + 1 >= len(argv):
                    fail(f"{name} needs a value (hint: {name} 'COMMAND')")
                value, i = argv[i + 1], i + 1
            found[name] = value
        else:
            out.append(word)
        i += 1
    return out, found.get("--app"), found.get("--python")


COMMANDS = (Command("jupyter", jupyter, None),)
