"""``scontrol`` inside a railyard batch script: only ``show hostnames`` and ``show hostlist``.

Multi-node scripts written for Slurm take their first node as
``MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)``; a tiny
``scontrol`` beside the job's ``srun`` (:func:`railyard.exec.task.jobfiles.install_shims`) runs
this module so they work unchanged. It reads no server and no allocation, only its arguments
and ``SLURM_JOB_NODELIST``, and imports nothing of railyard's but the hostlist rules. Anything
else scontrol does is refused in one line, with where to ask instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from railyard.client.hostlists import compress_hostlist, expand_hostlist

REFUSED = (
    "scontrol: error: only 'show hostnames' and 'show hostlist' work inside a railyard job"
    " (hint: railyard show job $SLURM_JOB_ID from a login node)"
)


def run(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, str]:
    """The exit code and what to print: names one per line (``hostnames``, the list given or
    the job's), or the list compressed (``hostlist``, whose names may be given with spaces
    between them as well as commas); an error line for anything else."""
    args = list(argv)
    if len(args) < 2 or args[0] != "show" or args[1] not in ("hostnames", "hostlist"):
        return 1, REFUSED
    given = args[2:]
    try:
        if args[1] == "hostnames":
            text = ",".join(given) if given else env.get("SLURM_JOB_NODELIST", "")
            if not text:
                return 1, "scontrol: error: no host list given and SLURM_JOB_NODELIST is unset"
            return 0, "\n".join(expand_hostlist(text))
        if not given:
            return 1, "scontrol: error: show hostlist needs a list of names"
        return 0, compress_hostlist(expand_hostlist(",".join(given)))
    except ValueError as exc:
        return 1, f"scontrol: error: {exc}"


def main() -> None:
    code, text = run(sys.argv[1:], os.environ)
    if text:  # an empty list prints nothing, as Slurm's
        print(text, file=sys.stdout if code == 0 else sys.stderr)
    raise SystemExit(code)


if __name__ == "__main__":
    main()
