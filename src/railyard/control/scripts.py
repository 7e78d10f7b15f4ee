"""Batch scripts: ``#RAILYARD`` and ``#SBATCH`` directives become submission options.

People moving from Slurm keep their scripts. As in sbatch, directives count only before the
first command line, and command-line flags override them. Unlike sbatch, an option railyard
does not know is an error with a suggestion, never silently ignored: a mistyped ``--gpu``
must not turn an 8-GPU job into a 1-GPU job.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from railyard.control.values import (
    parse_array,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
)

PREFIXES = ("#RAILYARD", "#SBATCH")
SHAPE_GROUPS = {  # setting one of these on the command line drops the script's others
    "gpus": {"nodes", "gpus_per_node", "workers", "gpus_per_worker"},
    "nodes": {"gpus", "workers", "gpus_per_worker"},
    "gpus_per_node": {"gpus", "workers", "gpus_per_worker"},
    "workers": {"gpus", "nodes", "gpus_per_node"},
    "gpus_per_worker": {"gpus", "nodes", "gpus_per_node"},
}


class ScriptError(ValueError):
    """A directive railyard cannot honour, located as ``file:line``."""

    def __init__(self, filename: str, line_no: int, message: str, hint: str | None = None):
        self.filename, self.line_no, self.message, self.hint = filename, line_no, message, hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.filename}:{self.line_no}: {self.message}"
        return f"{where} (hint: {self.hint})" if self.hint else where


class OptionError(ValueError):
    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message, self.hint = message, hint
        super().__init__(f"{message} (hint: {hint})" if hint else message)


def _int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise OptionError(f"expected a positive integer, got {value!r}")
    return int(value)


def _float(value: str) -> float:
    try:
        out = float(value)
    except ValueError:
        raise OptionError(f"expected seconds, got {value!r}") from None
    if out < 0:
        raise OptionError(f"expected seconds >= 0, got {value!r}")
    return out


def _gres(value: str) -> int:
    """``gpu:8`` or ``gpu:h100:8``: GPUs per node."""
    parts = value.split(":")
    if parts[0] != "gpu" or len(parts) not in (2, 3) or not parts[-1].isdigit():
        raise OptionError(f"unsupported --gres {value!r}", "use gpu:N (GPUs per node)")
    return _int(parts[-1])


def _gpus(value: str) -> int:
    """``8`` or Slurm's ``h100:8`` (the type is ignored: use --flavor)."""
    return _int(value.rpartition(":")[2])


def _checked(parse: Callable[[str], object]) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            parse(value)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        return value

    return check


def _qos(value: str) -> str:
    _checked(parse_priority)(value)
    return value


@dataclass(frozen=True)
class Option:
    field: str
    convert: Callable[[str], Any] | None = str  # None: a switch, takes no value
    switch_value: bool = True
    note: str | None = None  # accepted but ignored, with this note


_OPTIONS: dict[str, Option] = {
    "--gpus": Option("gpus", _gpus),
    "--nodes": Option("nodes", _int),
    "--gpus-per-node": Option("gpus_per_node", _gpus),
    "--gres": Option("gpus_per_node", _gres),
    "--workers": Option("workers", _int),
    "--gpus-per-worker": Option("gpus_per_worker", _int),
    "--flavor": Option("flavor"),
    "--queue": Option("queue"),
    "--partition": Option("queue"),
    "--priority": Option("priority", _checked(parse_priority)),
    "--qos": Option("priority", _qos),
    "--time": Option("time", _checked(parse_walltime)),
    "--preemptible": Option("preemptible", None),
    "--array": Option("array", _checked(parse_array)),
    "--job-name": Option("name"),
    "--name": Option("name"),
    "--signal": Option("signal", _checked(parse_signal)),
    "--requeue": Option("requeue", None),
    "--no-requeue": Option("requeue", None, switch_value=False),
    "--chdir": Option("workdir"),
    "--export": Option("env"),
    "--env": Option("env"),
    "--topology": Option("topology", _checked(parse_topology)),
    "--checkpoint-grace": Option("checkpoint_grace_s", _float),
    "--min-runtime": Option("min_runtime_s", _float),
    "--output": Option("output", note="logs go to railyard's log dir (railyard logs ID)"),
    "--error": Option("error", note="logs go to railyard's log dir (railyard logs ID)"),
}
_SHORT = {
    "-G": "--gpus",
    "-N": "--nodes",
    "-p": "--partition",
    "-q": "--qos",
    "-t": "--time",
    "-a": "--array",
    "-J": "--job-name",
    "-D": "--chdir",
    "-o": "--output",
    "-e": "--error",
}
_UNSUPPORTED = {  # real Slurm options, with what to do instead
    "--ntasks": "railyard runs one process per GPU; use --gpus or --nodes/--gpus-per-node",
    "--ntasks-per-node": "railyard runs one process per GPU; use --gpus-per-node",
    "--cpus-per-task": "CPUs come with the GPUs of a node; remove it",
    "--mem": "memory comes with the GPUs of a node; remove it",
    "--account": "use --queue: queues carry quota and fair share",
    "--exclusive": "ask for whole nodes with --nodes and --gpus-per-node",
    "--mail-type": "railyard sends no mail; remove it",
    "--mail-user": "railyard sends no mail; remove it",
    "--constraint": "use --flavor to pick a GPU type",
}
_SHORT_UNSUPPORTED = {"-n": "--ntasks", "-c": "--cpus-per-task", "-A": "--account"}


def option_names() -> list[str]:
    return sorted(_OPTIONS)


def short_names() -> dict[str, str]:
    """Short spelling -> long option (``-t`` -> ``--time``), as sbatch spells them."""
    return dict(_SHORT)


def apply_option(
    options: dict[str, Any],
    name: str,
    value: str | None,
    notes: list[str],
    environ: Mapping[str, str] | None = None,
) -> None:
    """Set the submission field of option ``name`` (``--gpus``, ``-p``...) from ``value``."""
    long = _SHORT.get(name) or _SHORT_UNSUPPORTED.get(name) or name
    if long in _UNSUPPORTED:
        raise OptionError(f"unsupported option {name!r}", _UNSUPPORTED[long])
    opt = _OPTIONS.get(long)
    if opt is None:
        close = difflib.get_close_matches(long, list(_OPTIONS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else "see `railyard submit --help`"
        raise OptionError(f"unknown option {name!r}", hint)
    if opt.convert is None:
        if value is not None:
            raise OptionError(f"{long} takes no value")
        options[opt.field] = opt.switch_value
        return
    if value is None or value == "":
        raise OptionError(f"{long} needs a value")
    if opt.note is not None:
        notes.append(f"{long}={value} ignored: {opt.note}")
        return
    try:
        if opt.field == "env":
            options["env"] = {**options.get("env", {}), **parse_export(value, environ or {})}
        else:
            options[opt.field] = opt.convert(value)
    except OptionError as exc:
        raise OptionError(f"{long}: {exc.message}", exc.hint) from None


def parse_export(value: str, environ: Mapping[str, str]) -> dict[str, str]:
    """Slurm ``--export``: ``KEY=VAL,NAME`` (NAME copies the submitter's value); ``ALL`` and
    ``NONE`` add nothing (railyard never copies the whole environment)."""
    out: dict[str, str] = {}
    for item in value.split(","):
        item = item.strip()
        if item in ("", "ALL", "NONE"):
            continue
        key, sep, val = item.partition("=")
        if not key.isidentifier():
            raise OptionError(f"bad variable name {key!r} in {value!r}", "use KEY=VAL,KEY2=VAL2")
        if not sep:
            if key not in environ:
                raise OptionError(f"{key} is not set in this environment", "use KEY=VAL")
            val = environ[key]
        out[key] = val
    return out


def takes_value(name: str) -> bool:
    """Whether option ``name`` (``--time``, ``-t``) is followed by a value; unknown ones are
    assumed to, so the error names the option rather than its value."""
    opt = _OPTIONS.get(_SHORT.get(name, name))
    return opt is None or opt.convert is not None


def parse_args(
    tokens: list[str], notes: list[str], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """Options from sbatch-style tokens: ``--opt=value``, ``--opt value``, ``-p value``."""
    options: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token == "-":
            raise OptionError(f"unexpected argument {token!r}", "options only, e.g. --gpus=8")
        value: str | None = None
        if token.startswith("--"):
            name, eq, raw = token.partition("=")
            value = raw if eq else None
        else:
            name, value = token[:2], (token[2:].lstrip("=") or None)
        if value is None and takes_value(name) and i + 1 < len(tokens):
            i += 1
            value = tokens[i]
        apply_option(options, name, value, notes, environ)
        i += 1
    return options


@dataclass
class ParsedScript:
    options: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def parse_script(
    text: str, filename: str = "script", environ: Mapping[str, str] | None = None
) -> ParsedScript:
    """Directives of a batch script, read up to its first command line (as sbatch does)."""
    parsed = ParsedScript(options={})
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # the first command: later directives are plain comments
        prefix = next((p for p in PREFIXES if line.startswith(p)), None)
        if prefix is None or (line[len(prefix) :] and not line[len(prefix)].isspace()):
            continue
        try:
            tokens = shlex.split(line[len(prefix) :], comments=True)
            found = parse_args(tokens, parsed.notes, environ)
        except OptionError as exc:
            message = exc.message.replace("option", f"{prefix} option", 1)
            raise ScriptError(filename, line_no, message, exc.hint) from None
        except ValueError as exc:  # shlex: unbalanced quotes
            raise ScriptError(filename, line_no, f"cannot split directive: {exc}") from None
        env = {**parsed.options.get("env", {}), **found.get("env", {})}
        parsed.options.update(found)
        if env:
            parsed.options["env"] = env
    return parsed


def merge(script: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """Flags win over directives; a GPU shape on the command line replaces the script's."""
    out = dict(script)
    for key in flags:
        for dropped in SHAPE_GROUPS.get(key, ()):
            if dropped not in flags:
                out.pop(dropped, None)
    env = {**script.get("env", {}), **flags.get("env", {})}
    out.update(flags)
    if env:
        out["env"] = env
    return out
