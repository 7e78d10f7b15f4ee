"""``srun`` inside a railyard batch script: launch the tasks of the job's allocation.

A batch script runs once, on the job's first node, as under sbatch; its PATH starts with a
tiny ``srun`` (:func:`railyard.exec.task.jobfiles.install_shims`) that runs this module. It reads
the allocation the executor exported (``RAILYARD_ALLOCATION``), starts one process per task with
the same variables a command job's tasks get (:func:`railyard.exec.task.launch.task_env`: Slurm's
``SLURM_PROCID``/``SLURM_LOCALID``/``SLURM_NODEID``/``SLURM_STEP_*`` and torchrun's), waits for
all of them, and exits 0 or with the code of the first task that failed (128+N for signal
N). So ``srun python train.py`` starts a DDP job, and with ``--ntasks-per-node=1``
``srun torchrun --nnodes $SLURM_NNODES --nproc-per-node 8 train.py`` starts one torchrun per
node. ``--gpus=[TYPE:]N``, ``--gres=gpu[:TYPE]:N``, ``--gpus-per-node`` and ``--gpus-per-task``
give the step that many of the allocation's GPUs, different from those of the job's other
steps running at the time (:mod:`railyard.exec.task.stepgpus`); without them a step sees all of
the job's GPUs on its nodes.

Differences from Slurm's srun, on purpose: when a task fails, the others are terminated
(``--kill-on-bad-exit=1``), since a DDP gang cannot go on without a rank (``srun -K0`` lets
them run on, Slurm's default, and exits with the highest code); ``MASTER_ADDR`` and
``MASTER_PORT`` the script exported are kept, else the first node and a free port there; the
tasks get the batch script's environment as it is when srun runs (``--export=ALL``). Tasks on
another node need an executor that reaches it (the local executor has one node).

Signals: the executor signals the job's process group but the batch shell (SIGTERM and
SIGKILL: all of it), tasks included, so srun notes signals and keeps waiting. With
``--signal=B:...`` (or ``scancel --batch``) the signal goes to the shell alone and srun
ignores the preempt signal in its tasks, which is Slurm's split between the batch shell and
the steps. The shell starts with every signal at its default, so its ``trap`` works.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from railyard.client.hostlists import expand_hostlist
from railyard.exec.task import labels, srunopts, stepgpus
from railyard.exec.task.identity import process_umask
from railyard.exec.task.launch import (
    ALLOCATION_VAR,
    BATCH_SHELL_SIGNAL_VAR,
    STEPS_DIR_VAR,
    NodeAlloc,
    decode_allocation,
    free_port,
    task_env,
    task_layout,
)
from railyard.exec.task.steps import SOCKET_VAR, StepRequest, send_request

USAGE_ERROR = 2
NOTED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
CONTAINER_VALUED = ("--container-image", "--container-mounts", "--container-workdir",
                    "--container-env")  # fmt: skip
CONTAINER_SWITCHES = ("--container-mount-home", "--no-container-mount-home")
CONTAINER_REFUSED = {  # Pyxis's, with why not here
    "--container-name": "each step starts from the image; keep state in a mounted directory",
    "--container-remap-root": "a job's processes are its user, in containers too",
    "--container-save": "build images outside railyard (podman build, podman save)",
}


GPU_OPTIONS = ("--gpus", "--gres", "--gpus-per-node", "--gpus-per-task")
STEP_BUSY_WAIT_S = 0.5  # how often a step waiting for GPUs that other steps hold tries again


class SrunError(Exception):
    """A request srun cannot honour; printed as one line, exit 2."""


@dataclass(frozen=True)
class Step:
    nodes: list[NodeAlloc]
    command: list[str]
    gpus_per_task: int | None = None  # srun --gpus-per-task; None: the job's
    per_node_given: bool = False  # srun --ntasks-per-node was given
    label: bool = False  # srun -l: each output line after its task's rank
    cpus_per_task: int = 0  # srun -c, else the job's; 0: one a task
    kill_on_bad_exit: bool = True  # srun -K0: the others run on when a task fails
    output: str | None = None  # srun -o/-e/-i: the tasks' files (patterns), None: srun's
    error: str | None = None
    stdin: str | None = None
    pty: bool = False  # srun --pty: task 0 keeps this terminal, the others read nothing


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """Options up to the command; the harmless ones of :data:`IGNORED_OPTIONS` become notes."""
    kept: list[str] = []
    notes: list[str] = []
    container: dict[str, str] = {}
    rest = list(argv)
    while rest and rest[0].startswith("-") and rest[0] != "--":
        token = rest.pop(0)
        name, equals, value = token.partition("=")
        if name.startswith(("--container-", "--no-container-")):
            if name in CONTAINER_REFUSED:
                raise SrunError(f"{name} is not supported: {CONTAINER_REFUSED[name]}")
            if name in CONTAINER_SWITCHES:
                container["mount_home"] = "" if name.startswith("--no-") else "1"
                continue
            if name not in CONTAINER_VALUED:
                raise SrunError(f"unknown option {name}")
            if not equals:
                if not rest:
                    raise SrunError(f"{name} takes a value")
                value = rest.pop(0)
            key = name.removeprefix("--container-")
            joined = key in ("mounts", "env") and key in container
            container[key] = f"{container[key]},{value}" if joined else value
            continue
        if name in srunopts.REFUSED:
            raise SrunError(f"{name} is not supported: {srunopts.REFUSED[name]}")
        if name in srunopts.NOTED_SWITCHES or name in srunopts.NOTED_VALUED:
            if name in srunopts.NOTED_VALUED and not equals and rest:
                token = f"{token} {rest.pop(0)}"
            why = srunopts.NOTED_SWITCHES.get(name) or srunopts.NOTED_VALUED[name]
            notes.append(f"{token} ignored: {why}")
            continue
        kept.append(token)
        if token in (*srunopts.VALUED, *GPU_OPTIONS) and rest:
            kept.append(rest.pop(0))
    parser = argparse.ArgumentParser(
        prog="srun",
        description="Launch the tasks of this railyard job's allocation (inside a batch script).",
        allow_abbrev=False,
    )
    parser.add_argument("-n", "--ntasks", type=int, help="total tasks (block over the nodes)")
    parser.add_argument("-N", "--nodes", type=int, help="use the first N nodes of the job")
    parser.add_argument("--ntasks-per-node", type=int, help="tasks on each node")
    parser.add_argument("-G", "--gpus", help="[TYPE:]N GPUs of the allocation for the step")
    parser.add_argument("--gres", help="gpu[:TYPE]:N GPUs on each node of the step")
    parser.add_argument("--gpus-per-node", help="[TYPE:]N GPUs on each node of the step")
    parser.add_argument("--gpus-per-task", help="[TYPE:]N GPUs of its own for each task")
    parser.add_argument(
        "-O", "--overcommit", action="store_true", help="more tasks than the allocation's CPUs"
    )
    parser.add_argument(
        "-l", "--label", action="store_true", help="each output line after its task's rank"
    )
    parser.add_argument("-c", "--cpus-per-task", type=int, help="CPUs of each task")
    parser.add_argument("-K", "--kill-on-bad-exit", type=int, nargs="?", const=1, default=1,
                        choices=(0, 1), help="1 (here the default): a failed task stops the "
                        "others; 0: they run on")  # fmt: skip
    parser.add_argument("-o", "--output", help="each task's stdout to this file (%%t: its rank)")
    parser.add_argument("-e", "--error", help="each task's stderr to this file")
    parser.add_argument("-i", "--input", help="each task's stdin from this file, or none")
    parser.add_argument("-w", "--nodelist", help="nodes of the allocation, comma-separated")
    parser.add_argument("--pty", action="store_true", help="task 0 keeps this terminal")
    args = parser.parse_args(kept)
    args.command = rest[1:] if rest[:1] == ["--"] else rest
    args.container = container
    if container and "image" not in container:
        raise SrunError("--container-* options go with --container-image")
    return args, notes


def on_nodes(allocated: list[NodeAlloc], nodelist: str | None) -> list[NodeAlloc]:
    """``srun -w a,b`` (or a Slurm hostlist, ``gpu[01-02]``): those nodes of the allocation,
    in its order."""
    if nodelist is None:
        return allocated
    try:
        wanted = expand_hostlist(nodelist)
    except ValueError as exc:
        raise SrunError(f"--nodelist={nodelist}: {exc}") from None
    names = [n.name for n in allocated]
    unknown = [n for n in wanted if n not in names]
    if unknown or not wanted:
        raise SrunError(f"--nodelist={nodelist}: {', '.join(unknown) or 'no node'} is not in "
                        f"this job's allocation (hint: one of {', '.join(names)})")  # fmt: skip
    return [n for n in allocated if n.name in wanted]


def plan(
    args: argparse.Namespace, allocated: list[NodeAlloc], cpus_per_task: int = 0
) -> list[NodeAlloc]:
    """The nodes and task counts of this step, within the allocation. As srun 22.05, a step
    may not run more tasks on a node than the CPUs allocated there hold (``cpus_per_task``
    each, else one; a node's CPUs: those booked, at least its tasks' own) unless
    ``--overcommit``: ``srun -n2`` in a one-task allocation is refused."""
    for name in ("ntasks", "nodes", "ntasks_per_node"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise SrunError(f"--{name.replace('_', '-')} must be >= 1")
    nnodes = args.nodes or len(allocated)
    if nnodes > len(allocated):
        raise SrunError(f"--nodes={nnodes}, but the job has {len(allocated)} node(s)")
    chosen = allocated[:nnodes]
    counts = [args.ntasks_per_node or n.ntasks for n in chosen]
    if args.ntasks is not None:
        if args.ntasks_per_node is not None and args.ntasks != sum(counts):
            raise SrunError(
                f"--ntasks={args.ntasks} but --ntasks-per-node={args.ntasks_per_node} "
                f"on {nnodes} node(s) makes {sum(counts)}"
            )
        if args.ntasks < nnodes:
            if args.nodes is not None:
                raise SrunError(f"--ntasks={args.ntasks} is fewer than --nodes={nnodes}")
            nnodes, chosen = args.ntasks, chosen[: args.ntasks]
        base, extra = divmod(args.ntasks, nnodes)
        counts = [base + (1 if i < extra else 0) for i in range(nnodes)]
    per_task = max(1, cpus_per_task)
    for node, count in zip(chosen, counts, strict=True):
        held = max(node.ntasks * per_task, node.cpus)
        if count * per_task > held and not getattr(args, "overcommit", False):
            raise SrunError(
                f"Unable to create step: More processors requested than permitted ({count} "
                f"task(s) x {per_task} CPU(s) on {node.name}, which holds {held}; hint: "
                "srun -O/--overcommit, or ask more tasks of the allocation)"
            )
    out: list[NodeAlloc] = []
    first = 0
    for i, (node, count) in enumerate(zip(chosen, counts, strict=True)):
        out.append(NodeAlloc(node.name, i, node.gpus, count, first))
        first += count
    return out


def with_gpus(
    nodes: list[NodeAlloc], request: stepgpus.GpuRequest, environ: dict[str, str]
) -> list[NodeAlloc]:
    """The step's nodes with the GPUs it asked for, taken from the allocation; while other
    steps of the job hold them, srun waits, saying so once, as srun 22.05 does."""
    wanted = stepgpus.needs(request, nodes)
    job = environ.get("SLURM_JOB_ID", "")
    waited = False
    while (taken := stepgpus.take(nodes, wanted, environ.get(STEPS_DIR_VAR) or None)) is None:
        if not waited:
            print(f"srun: Job {job} step creation temporarily disabled, retrying "
                  "(Requested nodes are busy)", file=sys.stderr, flush=True)  # fmt: skip
            waited = True
        time.sleep(STEP_BUSY_WAIT_S)
    if waited:
        print(f"srun: Step created for job {job}", file=sys.stderr, flush=True)
    return taken


def next_step_id(steps_dir: str | None) -> int:
    """0, 1, 2... per job, as Slurm numbers the steps of a batch script."""
    if not steps_dir:
        return 0
    step = 0
    while True:
        try:
            fd = os.open(Path(steps_dir, f"step-{step}"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            step += 1
            continue
        except OSError:
            return step
        os.close(fd)
        return step


def launch(step: Step, environ: dict[str, str], master_addr: str) -> int:
    """Start the step's tasks on this node, wait for all, return srun's exit status."""
    if shutil.which(step.command[0], path=environ.get("PATH")) is None:  # the shim would exec it
        raise SrunError(f"cannot run {step.command[0]!r}: no such program or not executable")
    step_id, tasks = step_tasks(step, environ, master_addr)
    preempt = environ.get("RAILYARD_PREEMPT_SIGNAL", "SIGUSR1")
    batch_shell_signal = environ.get(BATCH_SHELL_SIGNAL_VAR) == "1"
    disposition = signal.SIG_IGN if batch_shell_signal else signal.SIG_DFL

    def restore() -> None:  # in the task, before exec
        signal.signal(signal.Signals[preempt], disposition)

    note_signals()
    files = srunopts.StepFiles(environ, step.output, step.error, step.stdin, step_id)
    labelled = step.label and step.output is None and step.error is None
    pipe = subprocess.PIPE if labelled else None
    labeller = labels.Labeller(sys.stdout.buffer, sys.stderr.buffer) if labelled else None
    procs: list[tuple[int, subprocess.Popen[bytes]]] = []
    where: dict[int, str] = {}
    try:
        for rank, env in tasks:
            node = env.get("SLURMD_NODENAME", "")
            where[rank] = node
            stdin, out, err = files.for_task(rank, node, int(env.get("SLURM_NODEID") or 0))
            if step.pty and rank and stdin is None:
                stdin = subprocess.DEVNULL  # task 0 has the terminal
            proc = subprocess.Popen([*TASK_PID_SHIM, *step.command], env=env, preexec_fn=restore,
                                    stdin=stdin, stdout=out or pipe,
                                    stderr=err or pipe)  # fmt: skip
            procs.append((rank, proc))
            if labeller is not None and proc.stdout is not None and proc.stderr is not None:
                prefix = labels.label_of(rank, len(tasks))
                labeller.follow(proc.stdout, 1, prefix)
                labeller.follow(proc.stderr, 2, prefix)
    except OSError as exc:
        for _, started in procs:
            started.terminate()
        what = exc.filename or step.command[0]
        raise SrunError(f"cannot open or run {what!r}: {exc.strerror}") from None
    finally:
        files.close()
    status = wait_all(procs, step.kill_on_bad_exit, where)
    if labeller is not None:
        labeller.drain()
    return status


def step_tasks(
    step: Step, environ: dict[str, str], master_addr: str
) -> tuple[int, list[tuple[int, dict[str, str]]]]:
    """The step's id and each task's rank and environment (the script's, then srun's)."""
    # railyard alloc's shell names no node (salloc's); it runs on the allocation's first
    here = environ.get("SLURMD_NODENAME") or step.nodes[0].name
    elsewhere = sorted({n.name for n in step.nodes if n.name != here})
    if elsewhere:
        raise SrunError(
            f"tasks on {', '.join(elsewhere)} need an executor that reaches them "
            f"(this is {here or 'an unknown node'}; the local executor runs one node)"
        )
    addr = environ.get("MASTER_ADDR") or master_addr
    port = int(environ["MASTER_PORT"]) if environ.get("MASTER_PORT") else free_port(addr)
    step_id = next_step_id(environ.get(STEPS_DIR_VAR))
    cpus = step.cpus_per_task or int(environ.get("SLURM_CPUS_PER_TASK") or 0)
    per_task = step.gpus_per_task
    if per_task is None:
        per_task = int(environ.get("SLURM_GPUS_PER_TASK") or 0)
    # srun 22.05 reads SLURM_NTASKS_PER_NODE as --ntasks-per-node and sets it in the tasks only
    # then (srun.c, launch); the batch shell has it when the job asked --ntasks-per-node
    per_node = step.per_node_given or "SLURM_NTASKS_PER_NODE" in environ
    umask = step_umask(environ)
    tasks = []
    for slot in task_layout(step.nodes):
        wiring = task_env(step.nodes, slot, master_addr=addr, master_port=port,
                          step_id=step_id, cpus_per_task=cpus, gpus_per_task=per_task,
                          umask=umask, per_node_given=per_node)  # fmt: skip
        env = {**environ, **wiring}
        env.pop("SLURM_TASK_PID", None)  # the batch shell's: each task gets its own
        if cpus:  # srun -c N sets it in its tasks, as the job's -c sets it in the script
            env["SLURM_CPUS_PER_TASK"] = str(cpus)
        tasks.append((slot.rank, env))
    return step_id, tasks


def step_umask(environ: dict[str, str]) -> int:
    """What srun 22.05 passes its tasks as ``SLURM_UMASK`` (srun_job.c ``_set_umask_env``):
    the value already in its environment, else its own umask, which in a batch script is the
    submitter's as slurmstepd set it, or what the script's ``umask`` made it since."""
    with contextlib.suppress(KeyError, ValueError):
        return int(environ["SLURM_UMASK"], 8) & 0o777
    return process_umask()


def note_signals(forward: Callable[[int], None] | None = None) -> None:
    """The job's signals are for the tasks (the executor signals the whole group): srun
    notes them and keeps waiting; ``forward``: tell the step launcher (whose tasks are not
    in srun's process group; it decides whether they already had it)."""

    def note(signum: int, _frame: FrameType | None) -> None:
        if forward is not None:
            forward(signum)

    for sig in NOTED:
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, note)


def launch_in_image(step: Step, environ: dict[str, str], master_addr: str,
                    options: dict[str, str]) -> int:  # fmt: skip
    """Ask the node's step launcher (root: `exec.task.stepd`) to run the step's tasks in the image,
    srun's stdout and stderr theirs; its answer is the step's exit status."""
    path = environ.get(SOCKET_VAR)
    if not path:
        raise SrunError(
            "no step launcher for --container-image here (it needs a batch script without "
            "--container-image of its own, on a node where railyard runs as root with Podman)"
        )
    step_id, tasks = step_tasks(step, environ, master_addr)
    request = StepRequest(
        image=options["image"], command=tuple(step.command), mounts=options.get("mounts", ""),
        workdir=options.get("workdir", ""), env_names=tuple(
            n for n in options.get("env", "").split(",") if n),
        mount_home=bool(options.get("mount_home", "1")), cwd=os.getcwd(), step_id=step_id,
        tasks=tuple(tasks),
    )  # fmt: skip
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(path)
            send_request(sock, request, (1, 2))
        except OSError as exc:
            raise SrunError(f"cannot reach the step launcher: {exc.strerror or exc}") from None
        note_signals(lambda signum: _tell(sock, f"signal {signum}"))
        with sock.makefile("rb") as answers:
            line = answers.readline().decode(errors="replace").strip()  # retried across signals
    what, _, rest = line.partition(" ")
    if what == "error":
        raise SrunError(rest)
    if what != "exit":
        raise SrunError("the step launcher ended without an answer (the job is ending?)")
    code, _, note = rest.partition(" ")
    if note:
        print(f"srun: error: {note}", file=sys.stderr, flush=True)
    return int(code)


def _tell(sock: socket.socket, line: str) -> None:
    with contextlib.suppress(OSError):  # the launcher is gone: the answer's absence says so
        sock.sendall(line.encode() + b"\n")


# srun's SLURM_TASK_PID is the task's own pid: a shell notes its pid ($$) and execs the task,
# which keeps that pid (the environment cannot change between fork and exec in Python).
TASK_PID_SHIM = ("/bin/sh", "-c", 'SLURM_TASK_PID=$$ exec "$@"', "srun-task")


def wait_all(
    procs: list[tuple[int, subprocess.Popen[bytes]]],
    kill_on_bad_exit: bool = True,
    where: dict[int, str] | None = None,
) -> int:
    """Wait for every task; when one fails, terminate the rest (kill-on-bad-exit) and return
    the first failure's code (128+N for signal N), not that of the tasks srun stopped. With
    ``kill_on_bad_exit`` off (``srun -K0``, Slurm's default) the others run on and the
    highest code is srun's, as srun 22.05 returns it. Each failure is one line, with its
    node (``where``: rank -> node) as srun writes it."""
    first_failure = 0
    highest = 0
    live = dict(procs)
    stopping = False
    while live:
        pid, status = os.wait()  # any child; retried across signals (PEP 475)
        rank = next((r for r, p in live.items() if p.pid == pid), None)
        if rank is None:
            continue
        proc = live.pop(rank)
        proc.returncode = os.waitstatus_to_exitcode(status)
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        if code:
            how = (
                f"Exited with exit code {code}"
                if proc.returncode >= 0
                else f"Killed by signal {-proc.returncode}"
            )
            node = f"{where[rank]}: " if where and where.get(rank) else ""
            print(f"srun: error: {node}task {rank}: {how}", file=sys.stderr, flush=True)
            highest = max(highest, code)
            if not stopping and kill_on_bad_exit:
                stopping, first_failure = True, code
                for other in live.values():
                    other.terminate()
    return first_failure if kill_on_bad_exit else highest


def main(argv: Sequence[str] | None = None) -> int:
    environ = dict(os.environ)
    try:
        args, notes = parse(sys.argv[1:] if argv is None else argv)
        for note in notes:
            print(f"srun: note: {note}", file=sys.stderr)
        command = args.command
        if not command:
            raise SrunError("nothing to run (hint: srun python train.py)")
        if ALLOCATION_VAR not in environ:
            raise SrunError(
                "no railyard allocation here (hint: srun runs inside `railyard submit job.sh`)"
            )
        master_addr, allocated = decode_allocation(environ[ALLOCATION_VAR])
        cpus = args.cpus_per_task
        if cpus is None:
            cpus = int(environ.get("SLURM_CPUS_PER_TASK") or 0)
        elif cpus < 1:
            raise SrunError("--cpus-per-task must be >= 1")
        nodes = plan(args, on_nodes(allocated, args.nodelist), cpus)
        request = stepgpus.request_of(args.gpus, args.gres, args.gpus_per_node,
                                      args.gpus_per_task)  # fmt: skip
        if request is not None:
            nodes = with_gpus(nodes, request, environ)
        step = Step(nodes, command, request.per_task if request is not None else None,
                    per_node_given=args.ntasks_per_node is not None, label=args.label,
                    cpus_per_task=cpus, kill_on_bad_exit=bool(args.kill_on_bad_exit),
                    output=args.output, error=args.error, stdin=args.input,
                    pty=args.pty)  # fmt: skip
        if args.container:
            said = [o for o, v in (("-l", args.label), ("-o", args.output), ("-e", args.error),
                                   ("-i", args.input)) if v]  # fmt: skip
            if said:
                print(f"srun: note: {' '.join(said)} ignored: a container step's output is "
                      "srun's", file=sys.stderr)  # fmt: skip
            return launch_in_image(step, environ, master_addr, args.container)
        return launch(step, environ, master_addr)
    except (SrunError, stepgpus.StepGpuError) as exc:
        print(f"srun: error: {exc}", file=sys.stderr, flush=True)
        return USAGE_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
