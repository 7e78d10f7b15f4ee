"""Pure pieces of a launch: which tasks run where, and the environment each one sees.

The contract every executor follows (local processes today, Ray nodes later):

- **Tasks.** A node of the allocation runs ``ntasks_per_node`` tasks, by default one per GPU
  the job holds there (one on a node where it holds none), like ``srun``. Tasks are numbered
  node by node in placement order (Slurm's block distribution).
- **GPUs.** Every task on a node sees *all* the job's GPUs on that node in
  ``CUDA_VISIBLE_DEVICES`` and ``LOCAL_RANK`` indexes them, which is torchrun's contract:
  ``torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))`` works in every task.
- **Variables.** Each task gets torchrun's variables
  (https://pytorch.org/docs/stable/elastic/run.html#environment-variables) and the ones
  ``srun`` 22.05 sets for a task (``SLURM_PROCID``, ``SLURM_LOCALID``, ``SLURM_NODEID``,
  ``SLURM_STEP_*``...); the batch step of a script gets what sbatch gives it (no task wiring,
  ``ENVIRONMENT=BATCH``). The job-wide ones (``SLURM_JOB_ID``, array and submit variables) come
  from the control plane in ``LaunchSpec.job_env``.
- **Environment.** The user's exported environment, never the executor's; identity variables
  follow the Unix account; no token ever passes (:func:`clean_user_env`).

:mod:`railyard.exec.task.srun` uses the same functions, so a task started by ``srun`` inside a batch
script and a task of a command job see the same variables.
"""

from __future__ import annotations

import json
import random
import re
import shlex
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from railyard.client.hostlists import compress_hostlist
from railyard.exec.protocol import LaunchSpec
from railyard.exec.task.identity import (
    DEFAULT_PATH,
    JOB_UMASK,
    Account,
    identity_env,
    login_env,
)

ALLOCATION_VAR = "RAILYARD_ALLOCATION"  # JSON of the allocation, for srun in a batch script
STEPS_DIR_VAR = "RAILYARD_STEPS_DIR"
SRUN_VAR = "RAILYARD_SRUN"  # the job's own srun, by its absolute path
BATCH_SHELL_SIGNAL_VAR = "RAILYARD_SIGNAL_BATCH_SHELL"  # --signal=B:...: the shell, not tasks
SECRET_VARS = frozenset({"RAILYARD_TOKEN"})
_TOKEN_RE = re.compile(r"ry_[A-Za-z0-9_-]{40,}")  # railyard's bearer-token shape (auth.py)
_STALE_PREFIXES = ("SLURM_", "SLURMD_", "SRUN_", "TORCHELASTIC_", "ROLE_")
# The wiring of a job submitted from inside another: the parent's, never this job's.
_STALE_VARS = frozenset({
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "NODE_RANK", "NNODES", "MASTER_ADDR", "MASTER_PORT", "RAILYARD_JOB_ID",
    "RAILYARD_CHECKPOINT_DIR", "RAILYARD_RESTART_COUNT", "RAILYARD_PREEMPT_SIGNAL",
    "RAILYARD_ARRAY_TASK_ID", "RAILYARD_ALLOCATION", "RAILYARD_STEPS_DIR",
    "RAILYARD_SIGNAL_BATCH_SHELL", "BASH_FUNC_srun%%", "RAILYARD_SRUN",
})  # fmt: skip


@dataclass(frozen=True)
class NodeAlloc:
    """One node of a job's allocation: its GPUs and how many tasks run there; `cpus` the
    cores the scheduler booked there (the whole node's with `--exclusive`; 0: not known, the
    tasks' own count)."""

    name: str
    index: int
    gpus: tuple[int, ...]
    ntasks: int
    first_task: int
    cpus: int = 0


@dataclass(frozen=True)
class RankSlot:
    """One task: its global rank, its node, and the GPUs it sees (all the job's on the node)."""

    rank: int
    node: str
    node_rank: int
    local_rank: int
    local_world_size: int
    gpus: tuple[int, ...]


def allocation(
    placement: Mapping[str, Sequence[int]],
    ntasks_per_node: int | None = None,
    cpu_tasks_per_node: int = 1,
    gpus_per_task: int = 0,
    cpus_per_node: int = 0,
) -> list[NodeAlloc]:
    """Nodes in placement order with their task counts: ``ntasks_per_node``, else one per GPU
    the job holds there (one per ``gpus_per_task`` of them), else (a CPU job)
    ``cpu_tasks_per_node``."""
    nodes: list[NodeAlloc] = []
    first = 0
    for index, (name, gpus) in enumerate(placement.items()):
        ntasks = ntasks_per_node or len(gpus) // max(1, gpus_per_task) or cpu_tasks_per_node
        nodes.append(NodeAlloc(name, index, tuple(gpus), ntasks, first, cpus_per_node))
        first += ntasks
    return nodes


def job_allocation(spec: LaunchSpec) -> list[NodeAlloc]:
    """The job's nodes; a CPU job runs one task per worker (its chunks spread evenly)."""
    if not spec.placement:
        raise ValueError(f"job {spec.job_id}: placed on no node")
    per_node = max(1, spec.workers // len(spec.placement))
    return allocation(
        spec.placement, spec.ntasks_per_node, per_node, spec.gpus_per_task, spec.cpus_per_node
    )


def task_layout(nodes: Sequence[NodeAlloc]) -> list[RankSlot]:
    """Every task of the allocation, node by node."""
    return [
        RankSlot(node.first_task + local, node.name, node.index, local, node.ntasks, node.gpus)
        for node in nodes
        for local in range(node.ntasks)
    ]


def rank_layout(spec: LaunchSpec) -> list[RankSlot]:
    """The processes an executor starts: every task of a command job, or for a batch script
    one process (the batch step) on the first node."""
    nodes = job_allocation(spec)
    if spec.batch:
        first = nodes[0]
        return [RankSlot(0, first.name, 0, 0, 1, first.gpus)]
    return task_layout(nodes)


def tasks_per_node(counts: Sequence[int]) -> str:
    """Slurm's compressed count list: ``[2, 2, 2, 1]`` -> ``2(x3),1``."""
    runs: list[list[int]] = []
    for count in counts:
        if runs and runs[-1][0] == count:
            runs[-1][1] += 1
        else:
            runs.append([count, 1])
    return ",".join(str(c) if n == 1 else f"{c}(x{n})" for c, n in runs)


def allocation_env(
    nodes: Sequence[NodeAlloc], node: NodeAlloc, cpus_per_task: int = 0
) -> dict[str, str]:
    """What sbatch sets about the allocation, seen from ``node``. CPUs: those booked on the
    node, at least ``cpus_per_task`` per task, or one per task (Slurm's default) when none
    were asked for."""
    counts = [n.ntasks for n in nodes]
    gpus = ",".join(str(g) for g in node.gpus)
    per_node = [max((cpus_per_task or 1) * n.ntasks, n.cpus) for n in nodes]
    cpus = per_node[node.index]
    env = {
        "SLURM_JOB_NODELIST": compress_hostlist([n.name for n in nodes]),
        "SLURM_NODELIST": compress_hostlist([n.name for n in nodes]),
        "SLURM_JOB_NUM_NODES": str(len(nodes)),
        "SLURM_NNODES": str(len(nodes)),
        "SLURM_NTASKS": str(sum(counts)),
        "SLURM_NPROCS": str(sum(counts)),
        "SLURM_TASKS_PER_NODE": tasks_per_node(counts),
        "SLURMD_NODENAME": node.name,
        "SLURM_NODEID": str(node.index),
        "SLURM_TOPOLOGY_ADDR": node.name,  # what Slurm sets without a topology plugin
        "SLURM_TOPOLOGY_ADDR_PATTERN": "node",
        "SLURM_CPUS_ON_NODE": str(cpus),
        "SLURM_JOB_CPUS_PER_NODE": tasks_per_node(per_node),
        # CUDA's own rule: an empty list hides every GPU; unset would show them all.
        "CUDA_VISIBLE_DEVICES": gpus,
    }
    if len(set(counts)) == 1:
        env["SLURM_NTASKS_PER_NODE"] = str(counts[0])
    if node.gpus:  # a CPU job: none of these, as in Slurm (which leaves them unset)
        env |= {"SLURM_JOB_GPUS": gpus, "GPU_DEVICE_ORDINAL": gpus,
                "SLURM_GPUS_ON_NODE": str(len(node.gpus))}  # fmt: skip
        # The indices above are NVML's, which counts by PCI bus id; CUDA's default order is
        # fastest first (CUDA C++ Programming Guide, "CUDA Environment Variables"), so on a
        # node of mixed GPUs index 0 could name another card than the one we placed.
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return env


def task_env(
    nodes: Sequence[NodeAlloc],
    slot: RankSlot,
    *,
    master_addr: str,
    master_port: int,
    step_id: int = 0,
    cpus_per_task: int = 0,
    gpus_per_task: int = 0,
    umask: int = JOB_UMASK,
    per_node_given: bool = True,
) -> dict[str, str]:
    """What srun sets for one task of a step, plus torchrun's variables. With
    ``gpus_per_task`` the task sees its own GPUs of the node, in task order, as srun binds
    them (``CUDA_VISIBLE_DEVICES`` names them; ``LOCAL_RANK`` stays the task's place).

    ``umask``: srun's, which its tasks get in ``SLURM_UMASK`` (srun(1) 22.05, OUTPUT
    ENVIRONMENT VARIABLES: "SLURM_UMASK The umask in effect when the job was submitted").
    ``per_node_given`` False: ``--ntasks`` without ``--ntasks-per-node``, so no
    ``SLURM_NTASKS_PER_NODE`` (srun.c 22.05 sets it only from ``--ntasks-per-node``)."""
    node = nodes[slot.node_rank]
    world = sum(n.ntasks for n in nodes)
    env = allocation_env(nodes, node, cpus_per_task)
    if not per_node_given:
        env.pop("SLURM_NTASKS_PER_NODE", None)
    mine = node.gpus
    if gpus_per_task:
        mine = node.gpus[slot.local_rank * gpus_per_task : (slot.local_rank + 1) * gpus_per_task]
        own = ",".join(str(g) for g in mine)
        env |= {"CUDA_VISIBLE_DEVICES": own, "GPU_DEVICE_ORDINAL": own}
    step_gpus = ",".join(str(g) for g in mine)
    env |= {
        "SLURM_PROCID": str(slot.rank),
        "SLURM_LOCALID": str(slot.local_rank),
        "SLURM_GTIDS": ",".join(str(node.first_task + i) for i in range(node.ntasks)),
        "SLURM_STEP_ID": str(step_id),
        "SLURM_STEPID": str(step_id),
        "SLURM_STEP_NODELIST": env["SLURM_JOB_NODELIST"],
        "SLURM_STEP_NUM_NODES": str(len(nodes)),
        "SLURM_STEP_NUM_TASKS": str(world),
        "SLURM_STEP_TASKS_PER_NODE": env["SLURM_TASKS_PER_NODE"],
        # srun 22.05 reports "cyclic" when each node has at most one task, "block" otherwise
        "SLURM_DISTRIBUTION": "cyclic" if world <= len(nodes) else "block",
        "SLURM_LAUNCH_NODE_IPADDR": master_addr,
        "SLURM_UMASK": f"{umask:04o}",  # as srun spells it: 0%d%d%d (srun_job.c)
        # torchrun
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(world),
        "RANK": str(slot.rank),
        "LOCAL_RANK": str(slot.local_rank),
        "LOCAL_WORLD_SIZE": str(slot.local_world_size),
        "GROUP_RANK": str(slot.node_rank),
        "GROUP_WORLD_SIZE": str(len(nodes)),
        "ROLE_RANK": str(slot.rank),
        "ROLE_WORLD_SIZE": str(world),
        "ROLE_NAME": "default",
        "NODE_RANK": str(slot.node_rank),
        "NNODES": str(len(nodes)),
        "TORCHELASTIC_MAX_RESTARTS": "0",  # restarts are the control plane's, not torchrun's
    }
    if step_gpus:
        env["SLURM_STEP_GPUS"] = step_gpus
    return env


def batch_env(
    nodes: Sequence[NodeAlloc],
    cpus_per_task: int = 0,
    tasks_given: bool = True,
    per_node_given: bool = True,
) -> dict[str, str]:
    """The batch step: the script itself, once, on the first node (sbatch's environment).
    Without a task count (``tasks_given`` False), sbatch leaves ``SLURM_NTASKS``,
    ``SLURM_NPROCS`` and ``SLURM_NTASKS_PER_NODE`` unset and counts a task per
    ``cpus_per_task`` of the CPUs booked on each node in ``SLURM_TASKS_PER_NODE`` (16 on a
    16-core node taken with ``--exclusive``). With ``--ntasks`` alone (``per_node_given``
    False) only ``SLURM_NTASKS_PER_NODE`` stays unset: sbatch(1) 22.05, "Only set if the
    --ntasks-per-node option is specified". No ``SLURM_UMASK`` either: slurmstepd applies it
    and unsets it for the batch step (ulimits.c ``set_umask``, since 16.05.6: "Do not
    propagate SLURM_UMASK environment variable to batch script")."""
    first = nodes[0]
    env = {
        **allocation_env(nodes, first, cpus_per_task),
        "SLURM_PROCID": "0",
        "SLURM_LOCALID": "0",
        "SLURM_GTIDS": "0",
        "ENVIRONMENT": "BATCH",
    }
    if not tasks_given:  # sbatch sets the task counts only when --ntasks (-per-node) was given
        for name in ("SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE"):
            env.pop(name, None)
    if not per_node_given:
        env.pop("SLURM_NTASKS_PER_NODE", None)
    if not tasks_given and any(n.cpus for n in nodes):
        per = max(1, cpus_per_task)
        env["SLURM_TASKS_PER_NODE"] = tasks_per_node([max(n.ntasks, n.cpus // per) for n in nodes])
    return env


SALLOC_LEAVES_OUT = frozenset({
    "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "CUDA_DEVICE_ORDER", "SLURM_JOB_GPUS",
    "SLURM_GPUS_ON_NODE", "SLURMD_NODENAME", "SLURM_NODEID", "SLURM_PROCID", "SLURM_LOCALID",
    "SLURM_GTIDS", "SLURM_CPUS_ON_NODE", "SLURM_TOPOLOGY_ADDR", "SLURM_TOPOLOGY_ADDR_PATTERN",
    "ENVIRONMENT", "SLURM_JOB_UID", "SLURM_JOB_GID", "SLURM_JOB_USER",
})  # fmt: skip
"""What a batch step has and salloc's shell has not: salloc's shell is no step and runs on no
allocated node (Slurm runs it where salloc was typed), so nothing names a node, a task or a
GPU there; ``srun`` in it starts the steps that do."""


def srun_function(srun_dir: Path) -> tuple[str, str]:
    """``srun`` as an exported bash function (``BASH_FUNC_srun%%``) that runs the job's own:
    a function comes before PATH, so a ``.bashrc`` or ``bash -l`` profile that sets PATH
    outright (or loads a module with another srun) still reaches the job's. Shells other than
    bash ignore it and find the job's srun first on PATH."""
    body = f'() {{  {shlex.quote(str(srun_dir / "srun"))} "$@"\n}}'
    return "BASH_FUNC_srun%%", body


def clean_user_env(env: Mapping[str, str]) -> dict[str, str]:
    """The user's exported environment without secrets or a parent job's wiring.

    No bearer token reaches a job: ``RAILYARD_TOKEN`` and any value holding a token-shaped
    string are dropped. ``SLURM_*``, torchrun's and railyard's job variables from where the
    user submitted (inside another job) would describe that other job.
    """
    return {
        k: v
        for k, v in env.items()
        if k not in SECRET_VARS
        and k not in _STALE_VARS
        and not k.startswith(_STALE_PREFIXES)
        and not _TOKEN_RE.search(v)
    }


def base_env(spec: LaunchSpec, account: Account) -> dict[str, str]:
    """The user's side of a task's environment, before railyard's variables.

    ``--export=ALL`` (``login_env`` False): what the submitter exported. ``NONE`` or a list:
    the account's login environment plus what was listed. Either way HOME, USER, LOGNAME and
    SHELL follow the account the job runs as, and NCCL settings from the blueprint are
    defaults the user's own ``NCCL_*`` override.
    """
    env = login_env(account) if spec.login_env else {}
    env.update(clean_user_env(spec.env))
    env.update(identity_env(account))
    env.setdefault("PATH", DEFAULT_PATH)
    env.setdefault("TMPDIR", "/tmp")
    for key, value in spec.nccl_env.items():
        env.setdefault(key, value)
    return env


def railyard_env(spec: LaunchSpec, account: Account) -> dict[str, str]:
    """railyard's own variables and the job's identity in Slurm's words."""
    return {
        "RAILYARD_JOB_ID": spec.job_id,
        "RAILYARD_CHECKPOINT_DIR": str(spec.checkpoint_dir),
        "RAILYARD_RESTART_COUNT": str(spec.restart_count),
        "RAILYARD_PREEMPT_SIGNAL": spec.preempt_signal,
        "TORCHELASTIC_RESTART_COUNT": str(spec.restart_count),
        "TORCHELASTIC_RUN_ID": spec.job_id,
        "SLURM_JOB_UID": str(account.uid),
        "SLURM_JOB_GID": str(account.gid),
        "SLURM_JOB_USER": account.name,
    }


def process_env(
    spec: LaunchSpec,
    account: Account,
    slot: RankSlot,
    *,
    master_addr: str,
    master_port: int,
    srun_dir: Path | None = None,
) -> dict[str, str]:
    """The whole environment of one process the executor starts. Layers, later wins: the
    user's (:func:`base_env`), the control plane's job variables, then the allocation and
    the wiring, so no user variable can break RANK or MASTER_PORT."""
    env = base_env(spec, account)
    env.update(spec.job_env)
    env.update(railyard_env(spec, account))
    nodes = job_allocation(spec)
    if spec.batch:
        env.update(batch_env(nodes, spec.cpus_per_task, spec.tasks_given, not spec.ntasks_alone))
        env["MASTER_ADDR"] = master_addr  # railyard's: the first node, for torchrun's flags
        env[ALLOCATION_VAR] = encode_allocation(nodes, master_addr)
        if spec.steps_dir is not None:
            env[STEPS_DIR_VAR] = str(spec.steps_dir)
        if spec.signal_batch_shell:
            env[BATCH_SHELL_SIGNAL_VAR] = "1"
        if srun_dir is not None:
            env["PATH"] = f"{srun_dir}:{env['PATH']}"
            name, body = srun_function(srun_dir)
            env[name] = body
            env[SRUN_VAR] = str(srun_dir / "srun")  # for `railyard run` in the job, by path
        if spec.terminal:  # railyard alloc: salloc's shell, not a batch step
            for name in SALLOC_LEAVES_OUT:
                env.pop(name, None)
    else:
        env.setdefault("OMP_NUM_THREADS", "1")  # torchrun's default: ranks share the cores
        env.update(
            task_env(
                nodes,
                slot,
                master_addr=master_addr,
                master_port=master_port,
                cpus_per_task=spec.cpus_per_task,
                gpus_per_task=spec.gpus_per_task,
                umask=spec.umask,
                per_node_given=not spec.ntasks_alone,
            )
        )
    return env


def encode_allocation(nodes: Iterable[NodeAlloc], master_addr: str) -> str:
    return json.dumps(
        {
            "master_addr": master_addr,
            "nodes": [
                {"name": n.name, "gpus": list(n.gpus), "ntasks": n.ntasks, "cpus": n.cpus}
                for n in nodes
            ],
        },
        separators=(",", ":"),
    )


def decode_allocation(text: str) -> tuple[str, list[NodeAlloc]]:
    """(master address, nodes) from :func:`encode_allocation`."""
    data = json.loads(text)
    nodes: list[NodeAlloc] = []
    first = 0
    for index, node in enumerate(data["nodes"]):
        gpus = tuple(int(g) for g in node["gpus"])
        ntasks, cpus = int(node["ntasks"]), int(node.get("cpus", 0))
        nodes.append(NodeAlloc(str(node["name"]), index, gpus, ntasks, first, cpus))
        first += int(node["ntasks"])
    return str(data["master_addr"]), nodes


WRAPPER_ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}  # the wrapper's own, not the job's


def wrapped_command(
    command: Sequence[str], exit_path: Path, task_path: Path | None = None
) -> list[str]:
    """The command under :mod:`railyard.exec.task.wrapper`, run by this very interpreter in isolated
    mode (``-I``): the wrapper may run as root, so no user variable (PYTHONPATH...) may steer
    it; the user's environment reaches only the command, through the task file."""
    task = ["--task-file", str(task_path)] if task_path is not None else []
    return [
        sys.executable,
        "-I",
        "-m",
        "railyard.exec.task.wrapper",
        "--exit-file",
        str(exit_path),
        *task,
        "--",
        *command,
    ]


PORT_SPAN = 8000  # ports tried below the kernel's ephemeral range
EPHEMERAL_RANGE_PATH = "/proc/sys/net/ipv4/ip_local_port_range"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free now, below the kernel's ephemeral range (``ip_local_port_range``), so
    no outgoing connection of another process (Ray's workers open many) is given it in the
    seconds before the ranks bind it; Slurm's ``MpiParams=ports=`` keeps MPI ports apart for
    the same reason. Any free port (bind to 0) when none is free there."""
    low = _ephemeral_low()
    first = max(1024, low - PORT_SPAN)
    for port in random.sample(range(first, low), min(64, max(0, low - first))):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        any_port: int = sock.getsockname()[1]
        return any_port


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (Linux; 32768 elsewhere)."""
    try:
        with open(EPHEMERAL_RANGE_PATH) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768
