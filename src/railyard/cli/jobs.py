"""User commands against a running control plane: submit, queue, show, cancel, logs, nodes,
queues. Thin: parse, call :class:`~railyard.control.client.Client`, print.

Exit codes: 2 for bad input (flags, scripts, 422), 1 for refusals and an unreachable server.
Register with :func:`register` (or ``app.command()(submit)`` one by one).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table

from railyard.control.client import Client, ClientError
from railyard.control.schemas import JobOut, JobSubmit, validation_line
from railyard.control.scripts import (
    OptionError,
    ScriptErrors,
    apply_option,
    merge,
    parse_script,
    resolve_export,
)
from railyard.control.tables import JobState

ACTIVE = [s.value for s in JobState if not s.finished]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable output")]


def fail(message: str, code: int = 2) -> NoReturn:
    """One line on stderr, then exit: 2 for bad input, 1 for a refusal."""
    print(f"railyard: {message}", file=sys.stderr)
    raise typer.Exit(code)


@contextmanager
def connect() -> Iterator[Client]:
    """A client from the environment; server refusals become one-line exits."""
    try:
        with Client.from_env() as client:
            yield client
    except ClientError as exc:
        fail(exc.detail, 2 if exc.status in (400, 422) else 1)


def emit_json(data: BaseModel | Sequence[BaseModel]) -> None:
    if isinstance(data, BaseModel):
        print(json.dumps(data.model_dump(mode="json"), indent=2))
    else:
        print(json.dumps([d.model_dump(mode="json") for d in data], indent=2))


def duration(seconds: float | None) -> str:
    """Slurm's TIME format: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``."""
    if seconds is None:
        return ""
    total = int(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02}:{minutes:02}:{secs:02}"
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


def _ranges(indices: Sequence[int]) -> str:
    """``[0, 1, 2, 3, 6]`` -> ``0-3,6``."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def placement(job: JobOut) -> str:
    """``n01:0-7 n02:0-7``, the GPUs a job holds on each node."""
    return " ".join(f"{n}:{_ranges(g)}" for n, g in sorted((job.placement or {}).items()))


# -- submit --------------------------------------------------------------------------------------

SCRIPT_SUFFIXES = (".sh", ".sbatch", ".slurm", ".bash", ".job")


def _flags(**given: Any) -> tuple[dict[str, Any], list[str]]:
    """Command-line flags through the same converters as script directives; every bad flag
    is reported, one line each."""
    options: dict[str, Any] = {}
    notes: list[str] = []
    errors: list[str] = []
    for flag, value in given.items():
        if value is None or value is False:
            continue
        name = "--" + flag.replace("_", "-")
        values = value if isinstance(value, list) else [value]
        for item in values:
            try:
                apply_option(options, name, None if item is True else str(item), notes)
            except OptionError as exc:
                errors.append(str(exc))
    if errors:
        fail("\n".join(f"railyard: {e}" for e in errors).removeprefix("railyard: "))
    return options, notes


def _looks_like_script(arg: str) -> bool:
    return arg.endswith(SCRIPT_SUFFIXES) or ("/" in arg and " " not in arg)


def _script_or_command(args: list[str]) -> tuple[Path | None, list[str]]:
    """One argument naming a file is a batch script (sbatch's rule); one that looks like a
    script path but names nothing is an error, not a command that fails later."""
    if len(args) == 1:
        path = Path(args[0])
        if path.is_file():
            return path, []
        if path.is_dir():
            fail(f"{args[0]} is a directory, not a batch script")
        if _looks_like_script(args[0]):
            fail(
                f"no such batch script: {args[0]} "
                "(hint: check the path; to run a command, put it after --)"
            )
    return None, args


def submit(
    args: Annotated[
        list[str] | None,
        typer.Argument(help="a batch script (#RAILYARD/#SBATCH directives), or -- COMMAND..."),
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", "-G", help="total GPUs, N or TYPE:N; 0: a CPU job")
    ] = None,
    nodes: Annotated[int | None, typer.Option("--nodes", "-N", help="distinct nodes")] = None,
    gpus_per_node: Annotated[
        str | None, typer.Option("--gpus-per-node", help="N or TYPE:N per node")
    ] = None,
    gres: Annotated[str | None, typer.Option("--gres", help="gpu:N or gpu:TYPE:N per node")] = None,
    workers: Annotated[int | None, typer.Option("--workers")] = None,
    gpus_per_worker: Annotated[int | None, typer.Option("--gpus-per-worker")] = None,
    ntasks: Annotated[int | None, typer.Option("--ntasks", "-n", help="tasks in all")] = None,
    ntasks_per_node: Annotated[
        int | None, typer.Option("--ntasks-per-node", help="tasks per node (default: per GPU)")
    ] = None,
    cpus_per_task: Annotated[int | None, typer.Option("--cpus-per-task", "-c")] = None,
    mem: Annotated[str | None, typer.Option("--mem", help="per node: 64G, 512M, 8000")] = None,
    flavor: Annotated[str | None, typer.Option("--flavor", help="node flavor")] = None,
    queue: Annotated[str | None, typer.Option("--queue", "--partition", "-p")] = None,
    priority: Annotated[str | None, typer.Option("--priority", help="int or class")] = None,
    qos: Annotated[str | None, typer.Option("--qos", "-q", help="low|normal|high|critical")] = None,
    time: Annotated[str | None, typer.Option("--time", "-t", help="walltime, e.g. 2:00:00")] = None,
    preemptible: Annotated[bool, typer.Option("--preemptible")] = False,
    exclusive: Annotated[bool, typer.Option("--exclusive", help="whole nodes only")] = False,
    array: Annotated[str | None, typer.Option("--array", "-a", help="e.g. 0-9%2")] = None,
    job_name: Annotated[str | None, typer.Option("--job-name", "-J", "--name")] = None,
    signal: Annotated[str | None, typer.Option("--signal", help="[B:]USR1@60")] = None,
    requeue: Annotated[bool | None, typer.Option("--requeue/--no-requeue")] = None,
    chdir: Annotated[str | None, typer.Option("--chdir", "-D")] = None,
    export: Annotated[
        str | None, typer.Option("--export", help="ALL (default), NONE, or [ALL,]VAR[=VAL],...")
    ] = None,
    env: Annotated[list[str] | None, typer.Option("--env", help="KEY=VAL (repeat)")] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="e.g. out-%j.txt")] = None,
    error: Annotated[str | None, typer.Option("--error", "-e", help="stderr file")] = None,
    dependency: Annotated[
        str | None, typer.Option("--dependency", "-d", help="afterok:ID[:ID],singleton...")
    ] = None,
    account: Annotated[str | None, typer.Option("--account", "-A")] = None,
    mail_type: Annotated[str | None, typer.Option("--mail-type")] = None,
    mail_user: Annotated[str | None, typer.Option("--mail-user")] = None,
    topology: Annotated[str | None, typer.Option("--topology", help="[mode:]level")] = None,
    checkpoint_grace: Annotated[float | None, typer.Option("--checkpoint-grace")] = None,
    min_runtime: Annotated[float | None, typer.Option("--min-runtime")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Submit a job: `railyard submit --gpus 8 -- python train.py` or `railyard submit job.sh`.

    One argument naming a file is a batch script, run once on the job's first node with an
    srun for its tasks; anything after -- is a command, run as one task per GPU. Flags
    override the script's directives, as with sbatch. The job gets this shell's environment
    and directory (--export=ALL), never the server's.
    """
    args = args or []
    if not args:
        fail("nothing to run: give a batch script, or -- followed by a command")
    flags, notes = _flags(
        gpus=gpus,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        gres=gres,
        workers=workers,
        gpus_per_worker=gpus_per_worker,
        ntasks=ntasks,
        ntasks_per_node=ntasks_per_node,
        cpus_per_task=cpus_per_task,
        mem=mem,
        flavor=flavor,
        queue=queue,
        priority=priority,
        qos=qos,
        time=time,
        preemptible=preemptible,
        exclusive=exclusive,
        array=array,
        job_name=job_name,
        signal=signal,
        chdir=chdir,
        export=export,
        env=env,
        output=output,
        error=error,
        dependency=dependency,
        account=account,
        mail_type=mail_type,
        mail_user=mail_user,
        topology=topology,
        checkpoint_grace=checkpoint_grace,
        min_runtime=min_runtime,
    )
    if requeue is not None:
        flags["requeue"] = requeue
    script, command = _script_or_command(args)
    try:
        if script is not None:
            text = script.read_text()
            parsed = parse_script(text, str(script))
            notes += parsed.notes
            body = {**merge(parsed.options, flags), "script": text}
            body.setdefault("name", script.name)
        else:
            body = {**flags, "command": command}
            body.setdefault("name", Path(command[0]).name)
        spec = _with_environment(body, notes)
    except ScriptErrors as exc:
        fail("\n".join(f"railyard: {e}" for e in exc.errors).removeprefix("railyard: "))
    except OptionError as exc:
        fail(str(exc))
    except ValidationError as exc:
        fail(validation_line(list(exc.errors()))[0])
    except OSError as exc:
        fail(f"cannot read {args[0]}: {exc.strerror}")
    for note in notes:
        print(f"railyard: note: {note}", file=sys.stderr)
    with connect() as client:
        jobs = client.submit(spec)
    if as_json:
        emit_json(jobs)
    else:
        for job in jobs:
            print(job.id)


def _with_environment(body: dict[str, Any], notes: list[str]) -> JobSubmit:
    """Add what sbatch captures at submit: the environment per ``--export``, the working and
    submit directories, the submit host. No token is exported."""
    cwd = os.getcwd()
    value, exported, more = resolve_export(body.pop("export", "ALL"), os.environ)
    notes += more
    exported.pop("RAILYARD_TOKEN", None)  # the server drops token-shaped values too
    workdir = Path(cwd, os.path.expanduser(body.get("workdir") or cwd))
    return JobSubmit.model_validate(
        {
            **body,
            "export": value,
            "env": {**exported, **body.get("env", {})},
            "workdir": str(workdir),
            "submit_dir": cwd,
            "submit_host": socket.gethostname(),
        }
    )


# -- looking at jobs -----------------------------------------------------------------------------


def queue(
    state: Annotated[
        list[str] | None, typer.Option("--state", "-t", help="e.g. pending,running")
    ] = None,
    all_users: Annotated[bool, typer.Option("--all", help="everyone's jobs (admins)")] = False,
    queue_name: Annotated[str | None, typer.Option("--queue", "-p")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Jobs waiting and running, like squeue: why each pending job waits is in REASON."""
    states = [s.strip().lower() for item in state or [] for s in item.split(",") if s.strip()]
    with connect() as client:
        user = None if all_users else client.whoami().name
        jobs = client.jobs(states=states or ACTIVE, queue=queue_name, user=user)
    if as_json:
        emit_json(jobs)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("JOBID", "NAME", "USER", "QUEUE", "STATE", "GPUS", "PLACEMENT", "TIME"):
        table.add_column(column, no_wrap=True, justify="right" if column == "GPUS" else "left")
    table.add_column("REASON")
    for j in jobs:
        started = j.start_t_s is not None
        table.add_row(
            j.id,
            j.name,
            j.user,
            j.queue,
            j.state.upper(),
            str(j.gpus),
            placement(j),
            duration(j.elapsed_s if started else j.age_s),
            j.reason,
        )
    Console().print(table)


def show(job_id: Annotated[str, typer.Argument(help="job id")], as_json: JsonOpt = False) -> None:
    """Everything about one job."""
    with connect() as client:
        job = client.job(job_id)
    if as_json:
        emit_json(job)
        return
    table = Table(show_header=False, box=None)
    for key, value in job.model_dump().items():
        table.add_row(key, "" if value is None else str(value))
    Console().print(table)


def cancel(
    job_ids: Annotated[list[str], typer.Argument(help="job ids (an array id cancels all tasks)")],
    as_json: JsonOpt = False,
) -> None:
    """Cancel jobs: pending ones end at once, running ones are stopped by the service loop."""
    done: list[JobOut] = []
    failed = 0
    with connect() as client:
        for job_id in job_ids:
            try:
                done += client.cancel(job_id)
            except ClientError as exc:
                failed += 1
                print(f"railyard: {job_id}: {exc.detail}", file=sys.stderr)
    if as_json:
        emit_json(done)
    else:
        for job in done:
            print(f"{job.id} {job.state}")
    if failed:
        raise typer.Exit(1)


def logs(
    job_id: Annotated[str, typer.Argument(help="job id")],
    rank: Annotated[int, typer.Option("--rank", "-r")] = 0,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="until the job ends")] = False,
    poll_s: Annotated[float, typer.Option("--poll", help="seconds between polls")] = 1.0,
) -> None:
    """Print one rank's log; with -f, keep printing until the job finishes."""
    with connect() as client:
        if follow:
            for text in client.follow_logs(job_id, rank=rank, poll_s=poll_s):
                sys.stdout.write(text)
                sys.stdout.flush()
            return
        offset = 0
        while True:
            chunk = client.logs(job_id, rank=rank, offset=offset)
            sys.stdout.write(chunk.text)
            if chunk.offset == offset:
                return
            offset = chunk.offset


# -- nodes and queues ----------------------------------------------------------------------------

nodes_app = typer.Typer(help="Nodes, their GPUs in use, and draining.", no_args_is_help=False)


@nodes_app.callback(invoke_without_command=True)
def nodes(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """List nodes."""
    if ctx.invoked_subcommand is not None:
        return
    with connect() as client:
        rows = client.nodes()
    if as_json:
        emit_json(rows)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("NODE", "FLAVOR", "GPUS", "USED", "STATE", "PATH", "REASON"):
        table.add_column(column, no_wrap=True)
    for n in rows:
        used = str(n.gpus_used)
        table.add_row(n.name, n.flavor, str(n.gpus), used, n.state, "/".join(n.path), n.reason)
    Console().print(table)


@nodes_app.command("drain")
def drain(
    name: str,
    reason: Annotated[str, typer.Option("--reason", help="shown in `railyard nodes`")] = "",
    as_json: JsonOpt = False,
) -> None:
    """Stop placing new work on a node (admin); running jobs finish."""
    with connect() as client:
        node = client.drain(name, reason)
    emit_json(node) if as_json else print(f"{node.name} {node.state}")


@nodes_app.command("resume")
def resume(name: str, as_json: JsonOpt = False) -> None:
    """Return a drained node to service (admin)."""
    with connect() as client:
        node = client.resume(name)
    emit_json(node) if as_json else print(f"{node.name} {node.state}")


def _per_flavor(values: dict[str, int]) -> str:
    return " ".join(f"{f}={n}" for f, n in sorted(values.items())) or "-"


def queues(as_json: JsonOpt = False) -> None:
    """Queues: quota per flavor, GPUs in use and borrowed, fair-share usage."""
    with connect() as client:
        rows = client.queues()
    if as_json:
        emit_json(rows)
        return
    table = Table(box=None, pad_edge=False)
    columns = ("QUEUE", "PARENT", "WEIGHT", "NOMINAL", "IN USE", "BORROWED", "USAGE GPU-h")
    for column in (*columns, "PENDING", "RUNNING", "MEMBERS"):
        table.add_column(column, no_wrap=column != "MEMBERS")
    for q in rows:
        table.add_row(
            q.name,
            q.parent or "",
            f"{q.weight:g}",
            _per_flavor(q.nominal_gpus),
            _per_flavor(q.used_gpus),
            _per_flavor(q.borrowed_gpus),
            f"{q.usage_gpu_s / 3600:,.1f}",
            str(q.pending_jobs),
            str(q.running_jobs),
            ",".join(q.members),
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add the job commands to ``app`` (the ``railyard`` command)."""
    no_interspersed = {"allow_interspersed_args": False}
    app.command(context_settings=no_interspersed)(submit)
    for command in (queue, show, cancel, logs, queues):
        app.command()(command)
    app.add_typer(nodes_app, name="nodes")
