"""``railyard show hostnames [LIST]`` and ``railyard show hostlist LIST``: Slurm's
``scontrol show hostnames`` and ``scontrol show hostlist``, which scripts use to turn
``SLURM_JOB_NODELIST`` into names and back. Pure text: no server is asked, so a script may call
it in a loop (and the same rules run as ``scontrol`` inside a job,
:mod:`railyard.exec.task.scontrol`)."""

from __future__ import annotations

import os

from railyard.cli.args import emit_json, fail
from railyard.client.hostlists import compress_hostlist, expand_hostlist


def show_hostlist(view: str, given: str | None, *, as_json: bool = False) -> None:
    """Print ``given`` (else ``$SLURM_JOB_NODELIST``, for ``hostnames``) expanded one name a
    line, or compressed; a malformed or missing list is one line on stderr, exit 2."""
    text = given if given is not None else os.environ.get("SLURM_JOB_NODELIST")
    if view == "hostlist" and given is None:
        fail("show hostlist: give the names to compress (hint: show hostlist gpu1,gpu2,gpu3)")
    if not text:
        fail("show hostnames: give a list, or run it in a job (hint: show hostnames gpu[1-3])")
    try:
        names = expand_hostlist(text)
        out = compress_hostlist(names) if view == "hostlist" else "\n".join(names)
    except ValueError as exc:
        fail(f"show {view}: {exc}")
    if as_json:
        emit_json(out if view == "hostlist" else names)
    elif out:
        print(out)
