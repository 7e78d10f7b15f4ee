"""Pure pieces of a launch: which rank goes where, and the environment each rank sees.

The environment follows torchrun's, so a script written for ``torchrun`` runs unchanged:
https://pytorch.org/docs/stable/elastic/run.html#environment-variables
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from railyard.exec.protocol import LaunchSpec


@dataclass(frozen=True)
class RankSlot:
    """Where one rank runs and which GPUs it sees."""

    rank: int
    node: str
    node_rank: int
    local_rank: int
    local_world_size: int
    gpus: tuple[int, ...]


def rank_layout(spec: LaunchSpec) -> list[RankSlot]:
    """Ranks fill nodes in placement order; each takes ``gpus_per_worker`` consecutive indices.

    A CPU job (``gpus_per_worker == 0``) must name exactly one node, which takes every rank.
    """
    nodes = list(spec.placement.items())
    if spec.gpus_per_worker == 0:
        if len(nodes) != 1:
            raise ValueError(f"job {spec.job_id}: a CPU job is placed on exactly one node")
        name = nodes[0][0]
        return [RankSlot(r, name, 0, r, spec.workers, ()) for r in range(spec.workers)]
    slots: list[RankSlot] = []
    per = spec.gpus_per_worker
    for node_rank, (name, gpus) in enumerate(nodes):
        if len(gpus) % per:
            raise ValueError(f"job {spec.job_id}: node {name} has {len(gpus)} GPUs, not k*{per}")
        local_world = len(gpus) // per
        for local in range(local_world):
            chunk = tuple(gpus[local * per : (local + 1) * per])
            slots.append(RankSlot(len(slots), name, node_rank, local, local_world, chunk))
    return slots


def torchrun_env(
    spec: LaunchSpec, slot: RankSlot, *, nnodes: int, master_addr: str, master_port: int
) -> dict[str, str]:
    """The variables torchrun would set for this rank, plus railyard's own."""
    return {
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        "WORLD_SIZE": str(spec.workers),
        "RANK": str(slot.rank),
        "LOCAL_RANK": str(slot.local_rank),
        "LOCAL_WORLD_SIZE": str(slot.local_world_size),
        "GROUP_RANK": str(slot.node_rank),
        "GROUP_WORLD_SIZE": str(nnodes),
        "ROLE_RANK": str(slot.rank),
        "ROLE_WORLD_SIZE": str(spec.workers),
        "ROLE_NAME": "default",
        "NODE_RANK": str(slot.node_rank),
        "NNODES": str(nnodes),
        "TORCHELASTIC_RESTART_COUNT": str(spec.restart_count),
        "TORCHELASTIC_MAX_RESTARTS": "0",  # restarts are the control plane's, not torchrun's
        "TORCHELASTIC_RUN_ID": spec.job_id,
        "CUDA_VISIBLE_DEVICES": ",".join(str(g) for g in slot.gpus),
        "RAILYARD_JOB_ID": spec.job_id,
        "RAILYARD_CHECKPOINT_DIR": str(spec.checkpoint_dir),
        "RAILYARD_RESTART_COUNT": str(spec.restart_count),
        "RAILYARD_PREEMPT_SIGNAL": spec.preempt_signal,
    }


def rank_env(
    spec: LaunchSpec,
    slot: RankSlot,
    base: Mapping[str, str],
    *,
    nnodes: int,
    master_addr: str,
    master_port: int,
) -> dict[str, str]:
    """Layers, later wins: the executor's environment, NCCL settings, the user's extras, and
    the rank wiring (a user extra cannot break RANK or MASTER_PORT).

    Like torchrun, OMP_NUM_THREADS defaults to 1 so ranks sharing a node do not oversubscribe
    its cores.
    """
    env = dict(base)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(spec.nccl_env)
    env.update(spec.env)
    env.update(
        torchrun_env(spec, slot, nnodes=nnodes, master_addr=master_addr, master_port=master_port)
    )
    return env


def wrapped_command(command: tuple[str, ...], exit_path: Path) -> list[str]:
    """The command under :mod:`railyard.exec.wrapper`, run by this very interpreter."""
    return [
        sys.executable,
        "-m",
        "railyard.exec.wrapper",
        "--exit-file",
        str(exit_path),
        "--",
        *command,
    ]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (bind to port 0). Another process may take it
    before the ranks bind it; torchrun accepts the same race."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
