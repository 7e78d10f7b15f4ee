"""Batch scripts and CLI flags: ``#RAILYARD`` and ``#SBATCH`` directives become submission options.

People moving from Slurm keep their scripts. As in sbatch, directives count only before the
first command line, and command-line flags override them. Every bad directive of a script is
reported in one pass (``file:line: message (hint: ...)``), never one per submit. Unlike sbatch,
an option railyard does not know is an error with a suggestion, never silently ignored: a
mistyped ``--gpu`` must not turn an 8-GPU job into a CPU job. Options that change nothing here
(``--mail-type``, ``--account`` without accounts...) are accepted with a one-line note.

Options follow sbatch 22.05's meaning: ``--gres=gpu[:TYPE]:N`` and ``--gpus-per-node`` are per
node, ``--gpus`` per job, ``--mem`` per node in MiB unless a unit (K, M, G, T) says otherwise,
``--export`` ``ALL`` (the default), ``NONE`` or a list (:func:`resolve_export`).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from railyard.client.values import (
    parse_array,
    parse_constraint,
    parse_dependency,
    parse_hostlist,
    parse_mem,
    parse_nice,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
    whole_minutes,
)

PREFIXES = ("#RAILYARD", "#SBATCH")
_GPU_SHAPE = {"gpus", "nodes", "gpus_per_node", "gres", "workers", "gpus_per_worker",
              "gpu_type", "gpus_per_task"}  # fmt: skip
SHAPE_GROUPS = {  # setting one of these on the command line drops the script's others
    "gpus": _GPU_SHAPE - {"gpus"},
    "nodes": {"gpus", "workers", "gpus_per_worker"},
    "gpus_per_node": _GPU_SHAPE - {"gpus_per_node", "nodes"},
    "workers": _GPU_SHAPE - {"workers", "gpus_per_worker"},
    "gpus_per_worker": _GPU_SHAPE - {"workers", "gpus_per_worker"},
    "gpus_per_task": {"gpus_per_node", "gres", "workers", "gpus_per_worker"},
    "mem": {"mem_per_cpu", "mem_per_gpu"},  # one memory spelling: the command line's
    "mem_per_cpu": {"mem", "mem_per_gpu"},
    "mem_per_gpu": {"mem", "mem_per_cpu"},
}


class ScriptError(ValueError):
    """A directive railyard cannot honour, located as ``file:line``."""

    def __init__(self, filename: str, line_no: int, message: str, hint: str | None = None):
        self.filename, self.line_no, self.message, self.hint = filename, line_no, message, hint
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.filename}:{self.line_no}: {self.message}"
        return f"{where} (hint: {self.hint})" if self.hint else where


class ScriptErrors(ValueError):
    """Every bad directive of one script; ``str()`` is one line each."""

    def __init__(self, errors: list[ScriptError]) -> None:
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


class OptionError(ValueError):
    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message, self.hint = message, hint
        super().__init__(f"{message} (hint: {hint})" if hint else message)


def _count(value: str, minimum: int = 1) -> int:
    if not value.isdigit() or int(value) < minimum:
        word = "a positive integer" if minimum else "an integer >= 0"
        raise OptionError(f"expected {word}, got {value!r}")
    return int(value)


def _float(value: str) -> float:
    try:
        out = float(value)
    except ValueError:
        raise OptionError(f"expected seconds, got {value!r}") from None
    if out < 0:
        raise OptionError(f"expected seconds >= 0, got {value!r}")
    return out


def _typed_count(value: str, field: str, minimum: int) -> dict[str, Any]:
    """``N`` or Slurm's ``TYPE:N``: a count, and the GPU type that picks the flavor."""
    gpu_type, _, count = value.rpartition(":")
    out: dict[str, Any] = {field: _count(count, minimum)}
    if gpu_type:
        out["gpu_type"] = gpu_type
    return out


def _gres(value: str) -> dict[str, Any]:
    """``gpu``, ``gpu:N`` or ``gpu:TYPE:N``: GPUs per node, marked as asked by ``--gres``
    (sbatch then sets no SLURM_GPUS_PER_NODE); ``gpu:0`` or ``none``: no GPU, as Slurm reads
    them (a script that turns off a GPU default)."""
    parts = value.split(":")
    if value == "none" or (parts[0] == "gpu" and len(parts) in (2, 3) and parts[-1] == "0"):
        return {"gpus": 0, "gpus_per_node": None}
    if parts[0] != "gpu" or len(parts) > 3 or "," in value:
        raise OptionError(f"unsupported --gres {value!r}", "use gpu:N or gpu:TYPE:N (per node)")
    if len(parts) == 1:
        return {"gpus_per_node": 1, "gres": True}
    return {**_typed_count(":".join(parts[1:]), "gpus_per_node", 1), "gres": True}


MAIL_TYPES = {"NONE", "BEGIN", "END", "FAIL", "REQUEUE", "ALL", "INVALID_DEPEND", "STAGE_OUT",
              "TIME_LIMIT", "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50",
              "ARRAY_TASKS"}  # fmt: skip


def _mail_types(value: str) -> str:
    """sbatch refuses a mail type it does not know, even where no mail is sent."""
    bad = [t for t in value.upper().split(",") if t not in MAIL_TYPES]
    if bad:
        raise OptionError(f"invalid mail type {bad[0]!r}", f"one of {','.join(sorted(MAIL_TYPES))}")
    return value


def _yes_no(value: str) -> str:
    if value.lower() not in ("yes", "no"):
        raise OptionError(f"expected yes or no, got {value!r}")
    return value


def _nodes(value: str) -> int:
    if "-" in value or "," in value:
        raise OptionError(f"node ranges are not supported: {value!r}", "give one number")
    return _count(value)


def _checked(parse: Callable[[str], object]) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            parse(value)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        return value

    return check


def _minutes(value: str) -> str:
    """``--time`` in whole minutes, rounded up, as sbatch keeps it (``1:30`` is ``2``)."""
    try:
        return whole_minutes(value)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def _nice(value: str) -> int:
    try:
        return parse_nice(value)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


def check_export(value: str) -> str:
    """Slurm's ``--export`` syntax: ``ALL``, ``NONE``, or ``[ALL,|NONE,]NAME[=VALUE],...``
    (``NONE,FOO=bar`` is the list alone: FOO set, none of the submitter's variables)."""
    items = [i.strip() for i in value.split(",")]
    if "NONE" in items and "ALL" in items:
        raise OptionError(f"ALL and NONE together: {value!r}", "ALL,NAME=VALUE or NONE,NAME=VALUE")
    for item in items:
        if item in ("ALL", "NONE"):
            continue
        key = item.partition("=")[0]
        if not key.isidentifier():
            raise OptionError(f"bad variable name {key!r} in {value!r}", "use ALL,KEY=VAL,KEY2")
    return value


def _open_mode(value: str) -> str:
    """sbatch's ``--open-mode``: ``append`` or ``truncate`` (any case, as sbatch reads it)."""
    mode = value.strip().lower()
    if mode not in ("append", "truncate"):
        raise OptionError(f"expected append or truncate, got {value!r}")
    return mode


def _env_pair(value: str) -> dict[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key.isidentifier():
        raise OptionError(f"expected KEY=VALUE, got {value!r}")
    return {key: val}


class Option(NamedTuple):
    """How one option sets submission fields: ``convert`` turns the value into the field's
    value (or, with ``multi``, into several fields); a switch takes no value. (A NamedTuple,
    not a dataclass: ``dataclasses`` costs a ``railyard submit`` more than this module.)"""

    field: str  # "": not stored (a note says so)
    convert: Callable[[str], Any] | None = str  # None: a switch, takes no value
    switch_value: bool = True
    multi: bool = False
    note: str | None = None  # accepted, changes nothing here: this note is printed
    bare: str | None = None  # the value when none follows (sbatch's `--nice` alone: 100)
    bare_unless: str = ""  # a next token this pattern matches is the value after all


def _image(value: str) -> str:
    if any(c.isspace() for c in value) or value.startswith(("-", "dir:", "oci:")):
        raise OptionError(
            f"{value!r} is not an image reference",
            "NAME[:TAG], docker-archive:PATH or oci-archive:PATH",
        )
    return value


def _list_of(what: str) -> Callable[[str], list[str]]:
    def split(value: str) -> list[str]:
        items = [v.strip() for v in value.split(",") if v.strip()]
        if not items:
            raise OptionError(f"expected {what}[,{what}...]")
        return items

    return split


def _begin(value: str) -> float:
    """sbatch's ``--begin`` or ``--deadline`` (``16:00``, ``now+1hour``, ``2026-12-01T08:00``...)
    as Unix seconds, in this machine's local time, as sbatch reads it: ``16:00`` once past
    today is tomorrow's."""
    from datetime import datetime

    from railyard.client.timespec import parse_time

    try:
        return parse_time(value, datetime.now(), future=True).timestamp()
    except (ValueError, OverflowError) as exc:  # .timestamp() of a year past 9999 or before 1
        raise OptionError(str(exc)) from None


_OPTIONS: dict[str, Option] = {
    "--gpus": Option("gpus", lambda v: _typed_count(v, "gpus", 0), multi=True),
    "--nodes": Option("nodes", _nodes),
    "--gpus-per-node": Option(
        "gpus_per_node", lambda v: _typed_count(v, "gpus_per_node", 1), multi=True
    ),
    "--gres": Option("gpus_per_node", _gres, multi=True),
    "--workers": Option("workers", _count),
    "--gpus-per-worker": Option("gpus_per_worker", lambda v: _count(v, 0)),
    "--ntasks": Option("ntasks", _count),
    "--ntasks-per-node": Option("ntasks_per_node", _count),
    "--cpus-per-task": Option("cpus_per_task", _count),
    "--mem": Option("mem", _checked(parse_mem)),
    "--gpus-per-task": Option("gpus_per_task", _count),
    "--mem-per-cpu": Option("mem_per_cpu", _checked(parse_mem)),
    "--mem-per-gpu": Option("mem_per_gpu", _checked(parse_mem)),
    "--flavor": Option("flavor"),
    "--queue": Option("queue"),
    "--partition": Option("queue"),
    "--priority": Option("priority", _checked(parse_priority)),
    "--qos": Option("priority", _checked(parse_priority)),
    "--nice": Option("nice", _nice, bare="100", bare_unless=r"[+-]?\d+"),
    "--time": Option("time", _minutes),
    "--preemptible": Option("preemptible", None),
    "--hold": Option("hold", None),
    "--begin": Option("begin_t_s", _begin),
    "--deadline": Option("deadline_t_s", _begin),
    "--exclusive": Option("exclusive", None),
    "--nodelist": Option("nodelist", _checked(parse_hostlist)),
    "--exclude": Option("exclude", _checked(parse_hostlist)),
    "--constraint": Option("constraint", _checked(parse_constraint)),
    "--array": Option("array", _checked(parse_array)),
    "--job-name": Option("name"),
    "--name": Option("name"),
    "--signal": Option("signal", _checked(parse_signal)),
    "--requeue": Option("requeue", None),
    "--no-requeue": Option("requeue", None, switch_value=False),
    "--chdir": Option("workdir"),
    "--export": Option("export", check_export),
    "--env": Option("env", _env_pair),
    "--output": Option("output"),
    "--error": Option("error"),
    "--dependency": Option("dependency", _checked(parse_dependency)),
    "--topology": Option("topology", _checked(parse_topology)),
    "--checkpoint-grace": Option("checkpoint_grace_s", _float),
    "--min-runtime": Option("min_runtime_s", _float),
    "--mail-type": Option("mail_type", _mail_types, note="railyard sends no mail"),
    "--mail-user": Option("mail_user", note="railyard sends no mail"),
    "--account": Option(
        "account", note="railyard has no accounts; quota and fair share are per queue (--queue)"
    ),
    "--comment": Option("comment", note="comments are not kept"),
    "--open-mode": Option("open_mode", _open_mode),
    "--get-user-env": Option("", None, note="--export=NONE starts from the login environment"),
    "--cpus-per-gpu": Option(
        "cpus_per_gpu", _count, note="give CPUs per task (-c), a task per GPU as --gpus runs them"
    ),
    "--kill-on-invalid-dep": Option("kill_on_invalid_dep", lambda v: _yes_no(v).lower() == "yes"),
    "--tmp": Option("", note="a node's local disk is not booked"),
    "--time-min": Option("", _checked(parse_walltime), note="the job runs for its --time"),
    # Pyxis's names (https://github.com/NVIDIA/pyxis/wiki/Usage): the job runs in an image.
    "--container-image": Option("container.image", _image),
    "--container-mounts": Option("container.mounts", _list_of("SRC[:DST[:ro|rw]]")),
    "--container-workdir": Option("container.workdir"),
    "--container-env": Option("container.env", _list_of("NAME")),
    "--container-mount-home": Option("container.mount_home", None),
    "--no-container-mount-home": Option("container.mount_home", None, switch_value=False),
}


_SHORT = {
    "-G": "--gpus",
    "-N": "--nodes",
    "-n": "--ntasks",
    "-c": "--cpus-per-task",
    "-p": "--partition",
    "-q": "--qos",
    "-t": "--time",
    "-a": "--array",
    "-J": "--job-name",
    "-D": "--chdir",
    "-o": "--output",
    "-e": "--error",
    "-d": "--dependency",
    "-A": "--account",
    "-H": "--hold",
    "-w": "--nodelist",
    "-x": "--exclude",
    "-C": "--constraint",
}
_UNSUPPORTED = {  # real Slurm options, with what to do instead
    "--uid": "jobs run as the submitting user's Unix account",
    "--container-name": "each step starts from the image; keep state in a mounted directory",
    "--container-save": "build images outside railyard (podman build, podman save)",
    "--container-remap-root": "a job's processes are its user, in containers too",
}
_SHORT_UNSUPPORTED: dict[str, str] = {}


def option_names() -> list[str]:
    return sorted(_OPTIONS)


def apply_option(options: dict[str, Any], name: str, value: str | None, notes: list[str]) -> None:
    """Set the submission fields of option ``name`` (``--gpus``, ``-p``...) from ``value``."""
    long = _SHORT.get(name) or _SHORT_UNSUPPORTED.get(name) or name
    if long in _UNSUPPORTED:
        raise OptionError(f"unsupported option {name!r}", _UNSUPPORTED[long])
    opt = _OPTIONS.get(long)
    if opt is None:
        import difflib  # only a mistyped option pays for it

        close = difflib.get_close_matches(long, list(_OPTIONS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else "see `railyard submit --help`"
        raise OptionError(f"unknown option {name!r}", hint)
    if opt.convert is None:
        if value is not None:
            raise OptionError(f"{long} takes no value")
        if opt.note is not None:
            notes.append(f"{long}: {opt.note}")
        if opt.field.startswith("container."):
            options.setdefault("container", {})[opt.field.split(".", 1)[1]] = opt.switch_value
        elif opt.field:
            options[opt.field] = opt.switch_value
        return
    if value is None and opt.bare is not None:
        value = opt.bare
    if value is None or value == "":
        raise OptionError(f"{long} needs a value")
    try:
        converted = opt.convert(value)
    except OptionError as exc:
        raise OptionError(f"{long}: {exc.message}", exc.hint) from None
    if opt.note is not None:
        notes.append(f"{long}={value} accepted, ignored: {opt.note}")
    elif opt.field == "env":
        options["env"] = {**options.get("env", {}), **converted}
    elif opt.field.startswith("container."):
        container = options.setdefault("container", {})
        key = opt.field.split(".", 1)[1]
        if isinstance(converted, list):  # repeated: the lists add up
            container[key] = [*container.get(key, []), *converted]
        else:
            container[key] = converted
    elif opt.multi:
        options.pop("gpu_type", None)  # a later GPU option without a type drops the old one
        options.pop("gres", None)  # and --gpus-per-node after --gres says it the other way
        options.update(converted)
    else:
        options[opt.field] = converted


def resolve_export(value: str, environ: Mapping[str, str]) -> tuple[str, dict[str, str], list[str]]:
    """What ``--export=value`` sends, seen from the submitter's ``environ`` (sbatch 22.05):
    ``ALL``: the whole environment; ``NONE``: nothing (the job starts from the account's login
    environment); ``NAME`` copies the submitter's value, ``NAME=VALUE`` sets one; with
    ``ALL,...`` on top of the whole environment, with ``NONE,...`` (or alone) on top of
    nothing. Returns (the value, the variables, notes)."""
    items = [i.strip() for i in check_export(value).split(",") if i.strip()]
    env: dict[str, str] = dict(environ) if "ALL" in items else {}
    notes = []
    for item in items:
        if item in ("ALL", "NONE"):
            continue
        key, sep, val = item.partition("=")
        if sep:
            env[key] = val
        elif key in environ:
            env[key] = environ[key]
        else:
            notes.append(f"--export: {key} is not set here; not exported")
    return value, env, notes


def short_names() -> dict[str, str]:
    """Short spelling -> long option (``-t`` -> ``--time``), as sbatch spells them."""
    return dict(_SHORT)


def takes_value(name: str) -> bool:
    """Whether option ``name`` (``--time``, ``-t``) is followed by a value; unknown ones are
    assumed to, so the error names the option rather than its value."""
    opt = _OPTIONS.get(_SHORT.get(name, name))
    return opt is None or opt.convert is not None


def next_is_value(name: str, token: str) -> bool:
    """Whether ``token`` is option ``name``'s value: always, unless the option may stand alone
    (``--nice``) and the token is not one of its values (``--nice --parsable``)."""
    opt = _OPTIONS.get(_SHORT.get(name, name))
    if opt is None or opt.bare is None:
        return True
    return re.fullmatch(opt.bare_unless, token) is not None


def parse_args(tokens: list[str], notes: list[str]) -> dict[str, Any]:
    """Options from sbatch-style tokens: ``--opt=value``, ``--opt value``, ``-p value``.
    Raises the first bad option; :func:`parse_script` collects them all."""
    options: dict[str, Any] = {}
    for error in _parse_tokens(tokens, options, notes):
        raise error
    return options


def _parse_tokens(
    tokens: list[str], options: dict[str, Any], notes: list[str]
) -> list[OptionError]:
    errors: list[OptionError] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or token == "-":
            errors.append(
                OptionError(f"unexpected argument {token!r}", "options only, e.g. --gpus=8")
            )
            continue
        value: str | None = None
        if token.startswith("--"):
            name, eq, raw = token.partition("=")
            value = raw if eq else None
        else:
            name, value = token[:2], (token[2:].lstrip("=") or None)
        if (
            value is None
            and takes_value(name)
            and i < len(tokens)
            and next_is_value(name, tokens[i])
        ):
            value = tokens[i]
            i += 1
        try:
            apply_option(options, name, value, notes)
        except OptionError as exc:
            errors.append(exc)
    return errors


class ParsedScript(NamedTuple):
    options: dict[str, Any]
    notes: list[str]


def parse_script(text: str, filename: str = "script") -> ParsedScript:
    """Directives of a batch script, read up to its first command line (as sbatch does).
    Raises :class:`ScriptErrors` naming every bad directive."""
    parsed = ParsedScript(options={}, notes=[])
    errors: list[ScriptError] = []
    for line_no, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break  # the first command: later directives are plain comments
        prefix = next((p for p in PREFIXES if line.startswith(p)), None)
        if prefix is None or (line[len(prefix) :] and not line[len(prefix)].isspace()):
            continue
        try:
            tokens = shlex.split(line[len(prefix) :], comments=True)
        except ValueError as exc:  # unbalanced quotes
            errors.append(ScriptError(filename, line_no, f"cannot split directive: {exc}"))
            continue
        found: dict[str, Any] = {}
        for bad in _parse_tokens(tokens, found, parsed.notes):
            message = bad.message.replace("option", f"{prefix} option", 1)
            errors.append(ScriptError(filename, line_no, message, bad.hint))
        env = {**parsed.options.get("env", {}), **found.get("env", {})}
        container = _container_lines(parsed.options.get("container", {}), found.get("container"))
        if found.keys() & {"gpus", "gpus_per_node"}:
            for said in {"gpu_type", "gres"} - found.keys():  # of an earlier line's option
                parsed.options.pop(said, None)
        parsed.options.update(found)
        if env:
            parsed.options["env"] = env
        if container:
            parsed.options["container"] = container
    if errors:
        raise ScriptErrors(errors)
    return parsed


def _container_lines(before: dict[str, Any], line: dict[str, Any] | None) -> dict[str, Any]:
    """The container options of a script so far, with one more line's: lists add up."""
    out = dict(before)
    for key, value in (line or {}).items():
        out[key] = [*out.get(key, []), *value] if isinstance(value, list) else value
    return out


def merge(script: Mapping[str, Any], flags: Mapping[str, Any]) -> dict[str, Any]:
    """Flags win over directives; a GPU shape on the command line replaces the script's."""
    out = dict(script)
    for key in flags:
        for dropped in SHAPE_GROUPS.get(key, ()):
            if dropped not in flags:
                out.pop(dropped, None)
    env = {**script.get("env", {}), **flags.get("env", {})}
    container = {**script.get("container", {}), **flags.get("container", {})}  # flags win
    out.update(flags)
    if env:
        out["env"] = env
    if container:
        out["container"] = container
    return out
