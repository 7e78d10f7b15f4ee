"""Slurm partitions as railyard queues: what a blueprint's ``partitions:`` section or
``railyard up --partition`` declares (slurm.conf's ``PartitionName=`` lines).

A partition is a queue below ``default`` with no quota of its own: its jobs share the
cluster's (the ``default`` queue's), as a Slurm partition has no quota. A job that names no
partition goes to the one marked default (``Default=YES``). A partition's nodes are a node
pool (``blueprint.pools``): the unpooled nodes unless it names one, since a railyard queue runs
on one pool. Slurm's ``Nodes=`` lists of hosts have no counterpart; ``Nodes=ALL`` is accepted.
"""

from __future__ import annotations

import re
import shlex
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from railyard.client.bounds import QUEUE_NAME_PATTERN
from railyard.client.values import parse_walltime

POOL_PATTERN = r"^[a-z][a-z0-9-]*$"
MAX_NAME = 64
PARENT = "default"
"""The queue partitions go below: where a job that names no partition asks to go."""


def _walltime(value: str | int) -> str:
    parse_walltime(value)  # its ValueError carries the spellings as a hint
    return str(value)


WallTime = Annotated[str | int, AfterValidator(_walltime)]


class Partition(BaseModel):
    """One partition: its time limits, whether it is the default, and its node pool."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: bool = Field(False, description="a job that names no partition goes here")
    pool: str | None = Field(
        None, pattern=POOL_PATTERN, description="its nodes: this node pool (none: unpooled)"
    )
    max_time: WallTime | None = Field(None, description="the largest limit a job may ask")
    default_time: WallTime | None = Field(None, description="the limit of a job that gives none")

    @property
    def max_time_s(self) -> float | None:
        return None if self.max_time is None else parse_walltime(self.max_time)

    @property
    def default_time_s(self) -> float | None:
        return None if self.default_time is None else parse_walltime(self.default_time)


_KEYS = {"maxtime": "max_time", "defaulttime": "default_time", "default": "default"}
_SPELLED = {"max_time": "MaxTime", "default_time": "DefaultTime", "default": "Default",
            "pool": "Pool"}  # fmt: skip
# slurm.conf's usual values of keys railyard has no use for: every node, partition up
_IGNORED = {"nodes": "ALL", "state": "UP"}
NAME_RE = re.compile(QUEUE_NAME_PATTERN)


def parse_partition(text: str) -> tuple[str, Partition]:
    """One slurm.conf partition line, ``PartitionName=debug Nodes=ALL MaxTime=30:00
    DefaultTime=10:00 Default=NO``, or the same with the bare name first (``debug
    MaxTime=30:00``); railyard's ``Pool=NAME`` names a node pool. ValueError: one line, with
    a hint."""
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"{exc} (hint: e.g. 'debug MaxTime=30:00 Default=YES')") from None
    if not words:
        raise ValueError("empty (hint: e.g. 'debug MaxTime=30:00 Default=YES')")
    first = words[0]
    name = first.partition("=")[2] if first.lower().startswith("partitionname=") else first
    if not NAME_RE.match(name) or len(name) > MAX_NAME:
        raise ValueError(f"{words[0]!r} is not a partition name (hint: PartitionName=gpu)")
    fields: dict[str, object] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        lower = key.lower()
        if not sep or not value:
            raise ValueError(f"{word!r} is not KEY=VALUE (hint: e.g. MaxTime=30:00)")
        if lower in _KEYS:
            fields[_KEYS[lower]] = _yes_no(word, value) if lower == "default" else value
        elif lower == "pool":
            fields["pool"] = value
        elif lower in _IGNORED and value.upper() == _IGNORED[lower]:
            continue
        else:
            raise ValueError(
                f"{word!r}: railyard does not take {key}= here (hint: MaxTime=, DefaultTime=, "
                "Default=, Nodes=ALL, or Pool=NAME for a blueprint's node pool)"
            )
    try:
        return name, Partition.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = _SPELLED.get(str(error["loc"][0]), str(error["loc"][0]))
        message = str(error["msg"]).removeprefix("Value error, ")
        raise ValueError(f"{name}: {key}: {message}") from None


def _yes_no(word: str, value: str) -> bool:
    if value.upper() not in ("YES", "NO"):
        raise ValueError(f"{word!r}: Default= is YES or NO")
    return value.upper() == "YES"
