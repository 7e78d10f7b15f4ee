"""What the server checks of a job request beyond its spellings: the exported environment's
bounds, a job's shape (chunks the scheduler places, tasks per node) and what its ``--export``
means for its environment. The spellings the CLI checks too (memory, dependencies) are in
:mod:`railyard.client.values`; a submission's fields in :mod:`railyard.control.submission`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from railyard.client.bounds import MAX_ARG_BYTES, MAX_ENV_BYTES, MAX_ENV_ENTRIES

UNIX_NAME_RE = r"^[a-z_][a-z0-9_.-]{0,31}\$?$"  # useradd's portable names
# The API's bounds (docs/reference/limits.md): argv and environment together stay far below Linux's
# ARG_MAX (about 2 MiB), and no one "NAME=value" string passes MAX_ARG_STRLEN.
ENV_MAX_VARS = MAX_ENV_ENTRIES
ENV_MAX_BYTES = MAX_ENV_BYTES
ENV_MAX_VALUE_BYTES = MAX_ARG_BYTES


def check_env(env: Mapping[str, str]) -> None:
    """A job's exported environment stays small enough to store and to exec: at most
    :data:`ENV_MAX_VARS` variables and :data:`ENV_MAX_BYTES` in all, no value over
    :data:`ENV_MAX_VALUE_BYTES`, names without ``=`` and no NUL anywhere."""
    if len(env) > ENV_MAX_VARS:
        raise ValueError(f"{len(env)} variables, at most {ENV_MAX_VARS} (hint: --export=NONE)")
    total = 0
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ValueError(f"bad variable name {name[:40]!r} (hint: no '=' or NUL)")
        size = len(name.encode()) + len(value.encode()) + 2
        if size > ENV_MAX_VALUE_BYTES:
            raise ValueError(f"{name} is {size} bytes, at most {ENV_MAX_VALUE_BYTES}")
        total += size
    if total > ENV_MAX_BYTES:
        raise ValueError(
            f"the environment is {total} bytes, at most {ENV_MAX_BYTES} "
            "(hint: --export=NONE or --export=VAR,... to send less)"
        )


def loads_login_env(export: str) -> bool:
    """Whether ``--export`` starts the job from its account's login environment: ``NONE`` or
    a list do (sbatch's ``--get-user-env``), ``ALL`` does not (the submitter's is the job's)."""
    return export.split(",")[0].strip().upper() != "ALL"


class Shape(NamedTuple):
    """How a job splits into chunks the scheduler places, and tasks per node (None: one per
    GPU)."""

    workers: int
    gpus_per_worker: int
    distinct_nodes: bool
    ntasks_per_node: int | None
