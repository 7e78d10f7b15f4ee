"""Bounds on what the API accepts: what both stores can hold and a launch can pass to exec.

PostgreSQL's INTEGER is 32-bit and SQLite's is 64-bit, so every stored integer is kept within
32 bits; strings fit their columns; neither store takes a NUL byte or a lone surrogate (not
valid UTF-8), and neither does ``execve``. A command and its environment stay well under
Linux's ``ARG_MAX`` (2 MiB with the default 8 MiB stack; one string at most 128 KiB,
``MAX_ARG_STRLEN``), so a stored job can always be launched. README.md lists these limits.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

INT32_MAX = 2**31 - 1
KiB = 1024
MiB = 1024 * KiB

MAX_REQUEST_BYTES = 16 * MiB  # a request body; larger is 413
MAX_COMMAND_ARGS = 4096
MAX_ARG_BYTES = 128 * KiB  # MAX_ARG_STRLEN
MAX_COMMAND_BYTES = 256 * KiB  # all arguments together
MAX_ENV_ENTRIES = 1024
MAX_ENV_BYTES = 256 * KiB  # all NAME=VALUE strings together
MAX_ENV_NAME = 256
MAX_SCRIPT_BYTES = 1 * MiB
MAX_SUBMIT_STORED_BYTES = 64 * MiB  # command + env + script, times the array's tasks
MAX_JOB_GPUS = 1 << 20  # workers x GPUs per worker
MAX_WALLTIME_S = 10 * 366 * 86400.0
MAX_GRACE_S = 65535.0  # Slurm's --signal @time is 16 bits
MAX_WEIGHT = 1e6
MIN_WEIGHT = 1e-3  # with MAX_WEIGHT: fair-share ratios stay finite for any set of siblings
MAX_QUOTA_FLAVORS = 64
MAX_NAME = 256  # a job's name; a node's drain reason
MAX_QUEUE_NAME = 128
MAX_USER_NAME = 64
MAX_FLAVOR = 64
MAX_LABEL = 128
MAX_WORKDIR = 1024
MAX_SHORT = 64  # the small spellings: time, signal, priority, topology
MAX_ARRAY_SPEC = 1024
MAX_LOG_OFFSET = 2**63 - 1
MAX_TOKEN_LIFETIME_S = 10 * 366 * 86400.0

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
USER_NAME_PATTERN = r"^[A-Za-z0-9_.@-]+$"
JOB_ID_PATTERN = r"^[0-9]{1,10}(_[0-9]{1,10})?$"


def clean_text(value: str) -> str:
    """Refuse what no store (and no ``execve``) takes: NUL bytes and lone surrogates."""
    if "\x00" in value:
        raise ValueError("contains a NUL byte (hint: remove it)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode (a lone surrogate; hint: send UTF-8)") from None
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
Text = Annotated[str, _CLEAN]
Name = Annotated[str, Field(max_length=MAX_NAME), _CLEAN]
Short = Annotated[str, Field(max_length=MAX_SHORT), _CLEAN]
Label = Annotated[str, Field(max_length=MAX_LABEL), _CLEAN]
Arg = Annotated[str, Field(max_length=MAX_ARG_BYTES), _CLEAN]
Script = Annotated[str, Field(max_length=MAX_SCRIPT_BYTES), _CLEAN]
ArraySpec = Annotated[str, Field(max_length=MAX_ARRAY_SPEC), _CLEAN]
Workdir = Annotated[str, Field(max_length=MAX_WORKDIR), _CLEAN]
Flavor = Annotated[str, Field(min_length=1, max_length=MAX_FLAVOR), _CLEAN]
EnvName = Annotated[
    str, Field(min_length=1, max_length=MAX_ENV_NAME), _CLEAN, AfterValidator(env_name)
]
QueueName = Annotated[
    str, Field(min_length=1, max_length=MAX_QUEUE_NAME, pattern=QUEUE_NAME_PATTERN)
]
UserName = Annotated[str, Field(min_length=1, max_length=MAX_USER_NAME, pattern=USER_NAME_PATTERN)]
Gpus = Annotated[int, Field(strict=True, ge=0, le=INT32_MAX)]
"""A quota: GPUs of one flavor, a JSON integer (``true`` or ``1.5`` is not a quota)."""
Quota = Annotated[dict[Flavor, Gpus], Field(max_length=MAX_QUOTA_FLAVORS)]
Count = Annotated[int, Field(ge=1, le=MAX_JOB_GPUS)]
Seconds = Annotated[float, Field(ge=0, le=MAX_WALLTIME_S, allow_inf_nan=False)]
Weight = Annotated[float, Field(ge=MIN_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)]
