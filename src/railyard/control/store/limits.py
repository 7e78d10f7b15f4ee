"""Bounds on what the API accepts: what both stores can hold and a launch can pass to exec.

PostgreSQL's INTEGER is 32-bit and SQLite's is 64-bit, so every stored integer is kept within
32 bits; strings fit their columns; neither store takes a NUL byte or a lone surrogate (not
valid UTF-8), and neither does ``execve``. A command and its environment stay well under
Linux's ``ARG_MAX`` (2 MiB with the default 8 MiB stack; one string at most 128 KiB,
``MAX_ARG_STRLEN``), so a stored job can always be launched. docs/reference/limits.md lists
these limits.
"""

from __future__ import annotations

import unicodedata
from typing import Annotated

from pydantic import AfterValidator, Field

from railyard.client.bounds import (
    INT32_MAX,
    MAX_ARG_BYTES,
    MAX_ARRAY_SPEC,
    MAX_ENV_NAME,
    MAX_FLAVOR,
    MAX_JOB_GPUS,
    MAX_LABEL,
    MAX_NAME,
    MAX_QUEUE_NAME,
    MAX_QUOTA_FLAVORS,
    MAX_SCRIPT_BYTES,
    MAX_SHORT,
    MAX_USER_NAME,
    MAX_WALLTIME_S,
    MAX_WEIGHT,
    MAX_WORKDIR,
    MIN_WEIGHT,
    QUEUE_NAME_PATTERN,
    USER_NAME_PATTERN,
)


def clean_text(value: str) -> str:
    """Refuse what no store (and no ``execve``) takes: NUL bytes and lone surrogates."""
    if "\x00" in value:
        raise ValueError("contains a NUL byte (hint: remove it)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode (a lone surrogate; hint: send UTF-8)") from None
    return value


def one_line(value: str) -> str:
    """Refuse control characters (newline, carriage return, escape...): a name or a path
    with them would forge lines in `railyard queue`, in logs and in the wrapper's records."""
    bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise ValueError(
            f"contains the control character U+{ord(bad):04X} (hint: one line of printable text)"
        )
    return value


def env_name(value: str) -> str:
    """A name ``execve`` can pass: not empty, no ``=`` (exported shell functions such as
    ``BASH_FUNC_module%%`` are fine)."""
    if "=" in value:
        raise ValueError(f"{value[:40]!r} has '=' in it (hint: NAME and VALUE are separate)")
    return value


def utf8_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


_CLEAN = AfterValidator(clean_text)
_ONE_LINE = AfterValidator(one_line)
Text = Annotated[str, _CLEAN]
Name = Annotated[str, Field(max_length=MAX_NAME), _CLEAN, _ONE_LINE]
Short = Annotated[str, Field(max_length=MAX_SHORT), _CLEAN]
Label = Annotated[str, Field(max_length=MAX_LABEL), _CLEAN]
Arg = Annotated[str, Field(max_length=MAX_ARG_BYTES), _CLEAN]
Script = Annotated[str, Field(max_length=MAX_SCRIPT_BYTES), _CLEAN]
ArraySpec = Annotated[str, Field(max_length=MAX_ARRAY_SPEC), _CLEAN]
Workdir = Annotated[str, Field(max_length=MAX_WORKDIR), _CLEAN, _ONE_LINE]
"""An ``--output``/``--error`` pattern: a path, relative to the job's working directory."""
OutputPath = Annotated[str, Field(min_length=1, max_length=MAX_WORKDIR), _CLEAN, _ONE_LINE]
Flavor = Annotated[str, Field(min_length=1, max_length=MAX_FLAVOR), _CLEAN]
EnvName = Annotated[
    str, Field(min_length=1, max_length=MAX_ENV_NAME), _CLEAN, AfterValidator(env_name)
]
QueueName = Annotated[
    str, Field(min_length=1, max_length=MAX_QUEUE_NAME, pattern=QUEUE_NAME_PATTERN)
]
PoolName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9-]*$")]
"""A node pool of the blueprint (`blueprint.pools`)."""
UserName = Annotated[str, Field(min_length=1, max_length=MAX_USER_NAME, pattern=USER_NAME_PATTERN)]
Gpus = Annotated[int, Field(strict=True, ge=0, le=INT32_MAX)]
"""A quota: GPUs of one flavor, a JSON integer (``true`` or ``1.5`` is not a quota)."""
Quota = Annotated[dict[Flavor, Gpus], Field(max_length=MAX_QUOTA_FLAVORS)]
Count = Annotated[int, Field(ge=1, le=MAX_JOB_GPUS)]
Seconds = Annotated[float, Field(ge=0, le=MAX_WALLTIME_S, allow_inf_nan=False)]
Weight = Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)]
