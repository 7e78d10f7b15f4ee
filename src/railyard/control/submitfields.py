"""The submission's Slurm-style fields, parsed once where they are validated.

Each field is read as the user wrote it (its JSON schema and its type errors are those of the
written type, so the API's 422s and ``/openapi.json`` say what they said) and kept as its
parser returns it: memory in MiB, a time limit in seconds, an array's indices, a signal's
name and lead time. Admission and the store read these values; nothing parses them again. The
parsers are those of :mod:`railyard.client.values`, so the API, batch-script directives and CLI
flags accept exactly the same spellings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, NamedTuple

from pydantic import Field, GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from railyard.client.values import (
    MAX_HOSTLIST_TEXT,
    parse_array,
    parse_constraint,
    parse_hostlist,
    parse_mem,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
    priority_label,
)
from railyard.client.values import parse_dependency as check_dependency
from railyard.control.store.limits import ArraySpec, Short
from railyard.sched.dependencies import job_ids
from railyard.sched.dependencies import parse_dependency as dependency_terms
from railyard.sched.model import Dependency, Level, TopologyMode, TopologyRequirement


@dataclass(frozen=True)
class Parsed:
    """``Annotated`` metadata: validate as ``written`` says, then keep ``parse(value)`` (None
    stays None). The field's type is what ``parse`` returns."""

    written: Any
    parse: Callable[[Any], Any]

    def __get_pydantic_core_schema__(
        self, _source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        parse = self.parse
        return core_schema.no_info_after_validator_function(
            lambda value: None if value is None else parse(value),
            handler.generate_schema(self.written),
        )


class AskedPriority(NamedTuple):
    """``--priority`` as its value, and as a refusal shows it: ``'critical' (10000)`` for a
    class's name, else the number."""

    value: int
    shown: str


def _priority(written: int | str) -> AskedPriority:
    value = parse_priority(written)
    named = isinstance(written, str) and not written.strip().isdigit()
    return AskedPriority(value, priority_label(value) if named else str(value))


class AskedSignal(NamedTuple):
    """``--signal=[B:]NAME[@SECONDS]``: the signal, how long before the end, and whether only
    the batch shell gets it (``B:``)."""

    name: str
    lead_s: float
    batch_shell: bool


def _signal(written: str) -> AskedSignal:
    name, lead_s = parse_signal(written)
    return AskedSignal(name, lead_s, written.strip().upper().startswith("B:"))


class AskedArray(NamedTuple):
    """``--array``: as written (stored, and shown as the array's tasks), its indices, and how
    many of them may run at once (None: no bound)."""

    text: str
    indices: list[int]
    max_running: int | None


def _array(written: str) -> AskedArray:
    indices, max_running = parse_array(written)
    return AskedArray(written, indices, max_running)


class AskedConstraint(NamedTuple):
    """``--constraint`` as written (a refusal quotes it) and its alternatives, each the set
    of features a node must have."""

    text: str
    any_of: tuple[frozenset[str], ...]


def _constraint(written: str) -> AskedConstraint:
    return AskedConstraint(written, tuple(parse_constraint(written)))


class AskedDependency(NamedTuple):
    """``--dependency`` as stored (checked, stripped: what SLURM_JOB_DEPENDENCY shows), its
    terms, and the job ids they name (each must exist at submit)."""

    text: str
    terms: tuple[Dependency, ...]
    any_of: bool
    job_ids: frozenset[str]


def _dependency(written: str) -> AskedDependency:
    text = check_dependency(written)
    terms, any_of = dependency_terms(text)
    return AskedDependency(text, terms, any_of, frozenset(job_ids(terms)))


class AskedTopology(NamedTuple):
    """``--topology``: the level and mode as stored, and the scheduler's requirement."""

    level: str
    mode: str
    requirement: TopologyRequirement


def _topology(written: str) -> AskedTopology:
    level, mode = parse_topology(written)
    return AskedTopology(level, mode, TopologyRequirement(Level.parse(level), TopologyMode(mode)))


HostText = Annotated[str, Field(max_length=MAX_HOSTLIST_TEXT)]

MemMiB = Annotated[int | None, Parsed(Short | int | None, parse_mem)]
"""``--mem`` and its per-CPU and per-GPU forms (``16G``, ``512M``, ``64000``), in MiB."""
WalltimeS = Annotated[float | None, Parsed(Short | int | None, parse_walltime)]
"""``--time`` (MM, HH:MM:SS, D-HH:MM:SS...: minutes when an integer, as Slurm), in seconds;
None: no limit."""
PriorityAsked = Annotated[AskedPriority | None, Parsed(int | Short | None, _priority)]
"""``--priority``: an integer or low|normal|high|critical."""
HostNames = Annotated[
    tuple[str, ...] | None, Parsed(HostText | None, lambda text: tuple(parse_hostlist(text)))
]
"""Slurm's hostlist (``gpu[01-04,07]``) as the names it expands to."""
ConstraintAsked = Annotated[AskedConstraint | None, Parsed(HostText | None, _constraint)]
"""Node features it needs: ``ib&nvme``, ``h100|a100`` (sbatch -C)."""
ArrayAsked = Annotated[AskedArray | None, Parsed(ArraySpec | None, _array)]
"""``--array``: ``0-9``, ``1,3,5``, ``0-15:4``, each with an optional ``%N``."""
DependencyAsked = Annotated[
    AskedDependency | None,
    Parsed(Annotated[str, Field(max_length=1024)] | None, _dependency),
]
"""``--dependency``: ``afterok:12``, ``afterany:12:13``, ``afterok:12?afterok:13``..."""
TopologyAsked = Annotated[AskedTopology | None, Parsed(Short | None, _topology)]
"""``--topology``: ``leaf-group``, ``preferred:scalable-unit``."""
SignalAsked = Annotated[AskedSignal | None, Parsed(Short | None, _signal)]
"""``--signal=[B:]NAME[@SECONDS]``."""
