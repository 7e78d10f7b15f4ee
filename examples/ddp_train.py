"""Train a tiny MLP with DistributedDataParallel: checkpoints, preemption and resume.

Runs under railyard's executors or torchrun alike; both set RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR and MASTER_PORT (https://pytorch.org/docs/stable/elastic/run.html). railyard adds
RAILYARD_CHECKPOINT_DIR and RAILYARD_PREEMPT_SIGNAL:

* every ``--ckpt-every`` steps rank 0 writes ``ckpt.pt`` atomically (temporary file, then
  ``os.replace``), so a reader never sees half a checkpoint, and says so ("step K:
  checkpoint saved"): a walk-through waits for that line before it preempts the job;
* on the preempt signal a flag is set; at the next step boundary the ranks agree through an
  all_reduce of the flag, rank 0 checkpoints, and every rank exits 0 ("preempted at step K");
* at start, if ``ckpt.pt`` exists, every rank loads it ("resumed from step K").

    torchrun --nproc-per-node 2 examples/ddp_train.py --steps 50
    railyard submit --gpus 2 -- python examples/ddp_train.py --steps 50
    railyard submit examples/slurm_ddp.sh        # sbatch-style: srun + torchrun
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

FEATURES = 16
BATCH = 32
STOP_REQUESTED = False


def request_stop(_signum: int, _frame: FrameType | None) -> None:
    """Only set a flag: the step boundary is the one safe place to act on it."""
    global STOP_REQUESTED
    STOP_REQUESTED = True


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--ckpt-every", type=int, default=10)
    parser.add_argument("--sleep-per-step", type=float, default=0.0, help="seconds, for tests")
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args(argv)


def make_model() -> nn.Module:
    torch.manual_seed(0)  # same initial weights on every rank
    return nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 1))


def batch(step: int, rank: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Synthetic data, a pure function of (step, rank), so a resumed run sees the same data."""
    gen = torch.Generator().manual_seed(100_003 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=gen)
    y = torch.sin(x.sum(dim=1, keepdim=True))
    return x.to(device), y.to(device)


def save(path: Path, model: nn.Module, opt: torch.optim.Optimizer, step: int) -> None:
    """Rank 0 writes, then every rank waits, so no rank races ahead of a half-written file."""
    if dist.get_rank() == 0:
        tmp = path.with_name(path.name + ".tmp")
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, tmp)
        os.replace(tmp, path)
    dist.barrier()


def resume(path: Path, model: nn.Module, opt: torch.optim.Optimizer) -> int:
    if not path.exists():
        return 0
    state = torch.load(path, map_location="cpu")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return int(state["step"])


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    # Before anything slow (joining the group can wait for peers): a signal that arrived before
    # the handler would kill the rank by its default action instead of checkpointing it.
    signal.signal(
        signal.Signals[os.environ.get("RAILYARD_PREEMPT_SIGNAL", "SIGUSR1")], request_stop
    )
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        # torchrun's contract, which railyard keeps: every rank of a node sees all the node's
        # GPUs and LOCAL_RANK says which one is its own.
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend, init_method="env://")
    rank = dist.get_rank()
    ckpt_dir = Path(os.environ.get("RAILYARD_CHECKPOINT_DIR", "checkpoints"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    ckpt = ckpt_dir / "ckpt.pt"

    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    step = resume(ckpt, model, opt)
    if step and rank == 0:
        print(f"resumed from step {step}", flush=True)
    ddp = DistributedDataParallel(model)
    loss = torch.zeros(())
    while step < args.steps:
        flag = torch.tensor([1.0 if STOP_REQUESTED else 0.0], device=device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)  # one rank signalled: all stop together
        if flag.item() > 0:
            # Another rank's signal may have stopped us first, and ours may still be on its way
            # (a container runtime forwards it to each rank in turn): from here it is ignored,
            # or it would kill this rank at exit, when Python's handler is gone.
            signal.signal(
                signal.Signals[os.environ.get("RAILYARD_PREEMPT_SIGNAL", "SIGUSR1")], signal.SIG_IGN
            )
            save(ckpt, model, opt, step)
            if rank == 0:
                print(f"preempted at step {step}", flush=True)
            finish()
            return 0
        x, y = batch(step, rank, device)
        loss = nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        torch.autograd.backward(loss)
        opt.step()
        step += 1
        if step % args.ckpt_every == 0:
            save(ckpt, model, opt, step)
            if rank == 0:
                print(f"step {step}: checkpoint saved", flush=True)
        if args.sleep_per_step:
            time.sleep(args.sleep_per_step)
    if rank == 0:
        print(f"final loss {loss.item():.6f}", flush=True)
        print("done", flush=True)
    finish()
    return 0


def finish() -> None:
    """Leave together: a rank that tears its process group down while its peer is still in
    the last collective can make gloo abort that peer at exit ("terminate called without an
    active exception", exit 134), so every rank waits for the others first."""
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # Leave without the interpreter's teardown: gloo's worker threads may still hold tensors
    # with Python references, and freeing them while the interpreter is being torn down
    # aborts the process ("terminate called without an active exception", exit 134) even
    # after the barrier and destroy_process_group (pytorch/pytorch#179291 describes it).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
