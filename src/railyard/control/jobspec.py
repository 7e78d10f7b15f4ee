"""Slurm-style values of a job request that the API, batch directives and CLI flags share:
memory sizes, dependencies, the exported environment's bounds, and a job's shape (chunks the
scheduler places, tasks per node). Kept apart from :mod:`railyard.control.schemas` so each
file stays small; the schemas import them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from railyard.control.bounds import MAX_ARG_BYTES, MAX_ENV_BYTES, MAX_ENV_ENTRIES
from railyard.control.errors import Invalid as ServiceInvalid

_MEM_RE = re.compile(r"^(\d+)([KMGT]?)B?$", re.IGNORECASE)
_MEM_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024 * 1024}
DEPENDENCY_TYPES = ("after", "afterany", "afternotok", "afterok")  # as sched.dependencies
_DEP_ID_RE = re.compile(r"^\d+(?:_\d+)?$")
UNIX_NAME_RE = r"^[a-z_][a-z0-9_.-]{0,31}\$?$"  # useradd's portable names
# The API's bounds (README "Limits"): argv and environment together stay far below Linux's
# ARG_MAX (about 2 MiB), and no one "NAME=value" string passes MAX_ARG_STRLEN.
ENV_MAX_VARS = MAX_ENV_ENTRIES
ENV_MAX_BYTES = MAX_ENV_BYTES
ENV_MAX_VALUE_BYTES = MAX_ARG_BYTES


def parse_mem(value: str | int) -> int:
    """Slurm ``--mem`` to MiB: a number with an optional unit K, M (the default), G or T."""
    match = _MEM_RE.match(str(value).strip())
    if not match:
        raise ValueError(f"bad memory size {value!r} (hint: e.g. 16G, 512M, 64000)")
    number, unit = int(match.group(1)), match.group(2).upper()
    return max(1, round(number * _MEM_MIB[unit])) if number else 0


def parse_dependency(value: str) -> str:
    """Slurm ``--dependency``: ``TYPE:ID[:ID...]`` terms joined by ``,`` (all) or ``?`` (any),
    or ``singleton``. Returns the value, checked with the scheduler's own rules (the client
    checks the spelling; `railyard.sched.dependencies` holds what each type means)."""
    text = value.strip()
    hint = "(hint: e.g. afterok:12, afterany:12:13, afternotok:12_3, singleton)"
    if "," in text and "?" in text:
        raise ValueError(f"bad dependency {value!r}: use ',' (all) or '?' (any), not both {hint}")
    for term in re.split(r"[,?]", text):
        kind, _, ids = term.partition(":")
        if kind == "singleton" and not ids:
            continue
        if kind in ("aftercorr", "afterburstbuffer"):
            raise ValueError(f"dependency type {kind!r} is not supported {hint}")
        if kind not in DEPENDENCY_TYPES:
            raise ValueError(f"unknown dependency type {kind!r} in {value!r} {hint}")
        parts = ids.split(":") if ids else []
        if any("+" in p for p in parts):
            raise ValueError(f"'+MINUTES' after a job id is not supported, in {value!r} {hint}")
        if not parts or not all(_DEP_ID_RE.match(p) for p in parts):
            raise ValueError(f"bad job ids {ids!r} in dependency {value!r} {hint}")
    return text


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


class Shape(NamedTuple):
    """How a job splits into chunks the scheduler places, and tasks per node (None: one per
    GPU)."""

    workers: int
    gpus_per_worker: int
    distinct_nodes: bool
    ntasks_per_node: int | None


def match_gpu_type(gpu_type: str, flavors: set[str]) -> str:
    """The flavor a Slurm GPU type names: ``h100`` matches ``H100-SXM-80GB`` (case apart, the
    type is the flavor, its start before a ``-``, or one of its ``-`` parts). An unknown type
    is an error naming the known flavors; one matching several asks for a longer type."""
    want = gpu_type.strip().lower()
    found = sorted(
        f
        for f in flavors
        if f.lower() == want or f.lower().startswith(want + "-") or want in f.lower().split("-")
    )
    known = ", ".join(sorted(flavors)) or "none"
    if not found:
        raise ServiceInvalid("gpu_type", f"no node has GPU type {gpu_type!r}", f"known: {known}")
    if len(found) > 1:
        raise ServiceInvalid(
            "gpu_type",
            f"GPU type {gpu_type!r} matches {', '.join(found)}",
            "give a longer type, or --flavor",
        )
    return found[0]
