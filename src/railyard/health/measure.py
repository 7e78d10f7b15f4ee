"""Measurements a health check judges: matrix-multiply rate and memory copy bandwidth.

Both are taken as the median of short windows, so a node whose cores are shared with another
busy process measures low for the whole run, as a job would see it. numpy (float32) runs on
any node; on a GPU node the compute figure comes from torch in bf16 where torch is installed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from railyard.health.across import best_op_t_s, busbw_gbps

# One BLAS thread: a multi-threaded BLAS on a busy node swings 4x from run to run as its
# threads wait on each other, which would hide the node's state in noise; one thread per
# measurement reads how much of a core a job's process gets.
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


class Unavailable(RuntimeError):
    """A measurement this node cannot take (torch is not installed, say); the check skips."""


_CHILD = """
import json, sys
try:
    from {module} import {name}
    value = {name}()
except ModuleNotFoundError as exc:
    print(f"needs {{exc.name}}, which is not installed", file=sys.stderr)
    sys.exit(3)
except RuntimeError as exc:
    print(str(exc), file=sys.stderr)
    sys.exit(3 if str(exc).startswith("unavailable:") else 1)
print(json.dumps(value))
"""


def run_child(module: str, name: str, *, timeout_s: float, env: dict[str, str]) -> Any:
    """Run measurement `name` of `module` in a fresh interpreter; its JSON result. Exit 3 (a
    missing package, or a RuntimeError saying "unavailable: ...") raises `Unavailable`."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD.format(module=module, name=name)],
        capture_output=True, text=True, timeout=timeout_s, check=False, env=env,
    )  # fmt: skip
    if done.returncode == 3:
        raise Unavailable(done.stderr.strip().removeprefix("unavailable: "))
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def in_child(name: str, timeout_s: float = 60.0) -> float:
    """Run measurement `name` of this module in a fresh interpreter with one BLAS thread."""
    env = {**os.environ, **ONE_THREAD}
    return float(run_child(__name__, name, timeout_s=timeout_s, env=env))


def _rate(work: Callable[[], float], windows: int, window_s: float) -> float:
    """Median over `windows` windows of (units of work done / seconds) for `work`, which does
    one unit batch and returns its size."""
    work()  # warm-up: allocation, BLAS threads, caches
    rates = []
    for _ in range(windows):
        done, t0 = 0.0, time.perf_counter()
        while (elapsed := time.perf_counter() - t0) < window_s:
            done += work()
        rates.append(done / elapsed)
    return statistics.median(rates)


def matmul_gflops(n: int = 384, windows: int = 5, window_s: float = 0.1) -> float:
    """float32 n x n matrix products per second, as GFLOP/s (2·n³ floating-point operations
    each, the count nccl-tests' sister benchmarks and vendor GEMM figures use)."""
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty_like(a)

    def one() -> float:
        np.matmul(a, b, out=out)
        return 2.0 * n**3 / 1e9

    return _rate(one, windows, window_s)


def copy_gbps(size_bytes: int = 32 * 2**20, windows: int = 5, window_s: float = 0.1) -> float:
    """Memory bandwidth of a large copy, GB/s, counting the read and the write (STREAM's
    convention for Copy: 2 x bytes per element moved)."""
    import numpy as np

    src = np.ones(size_bytes // 8, dtype=np.float64)
    dst = np.empty_like(src)

    def one() -> float:
        np.copyto(dst, src)
        return 2.0 * src.nbytes / 1e9

    return _rate(one, windows, window_s)


def _allreduce_rank(
    rank: int, world: int, port: int, size_bytes: int, iters: int, windows: int, out: str
) -> None:
    """One rank: gloo all_reduce of `size_bytes` floats, `windows` timed windows of `iters`
    after one warm-up; rank 0 writes the best window's time per operation."""
    import torch
    import torch.distributed as dist

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world
    )
    try:
        data = torch.ones(size_bytes // 4, dtype=torch.float32)
        best_t_s = best_op_t_s(dist, data, iters, windows)
        if rank == 0:
            with open(out, "w", encoding="utf-8") as f:
                f.write(repr(best_t_s))
    finally:
        dist.destroy_process_group()


def spawned_ranks_t_s(
    target: Callable[..., None], world: int, args: tuple[Any, ...], *, timeout_s: float, what: str
) -> float:
    """Run `world` ranks of `target(rank, world, port, *args, out)` in fresh interpreters
    (spawn: no forked torch or CUDA state) over a free loopback port; the seconds rank 0
    wrote to `out`. A rank stuck past `timeout_s` (in the rendezvous, say) is killed."""
    import multiprocessing
    import socket
    import tempfile

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    spawn = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/t_s"
        procs = [
            spawn.Process(target=target, args=(rank, world, port, *args, out))
            for rank in range(world)
        ]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(timeout=timeout_s)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join()
        if any(proc.exitcode != 0 for proc in procs):
            raise RuntimeError(f"{what} ranks exited {[proc.exitcode for proc in procs]}")
        with open(out, encoding="utf-8") as f:
            return float(f.read())


def allreduce_busbw_gbps(
    ranks: int = 2, size_bytes: int = 16 * 2**20, iters: int = 8, windows: int = 3
) -> float:
    """all_reduce bus bandwidth within this node over `ranks` processes (gloo on CPU), GB/s:
    algbw = bytes / time, busbw = algbw x 2(n-1)/n, nccl-tests' definition
    (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md). The best of
    `windows` windows: loopback gloo on a small node swings 25% from one window to the next,
    while a node that is really slow is slow in every window."""
    import torch  # noqa: F401  (here, so a node without torch skips this check)

    args = (size_bytes, iters, windows)
    t_s = spawned_ranks_t_s(_allreduce_rank, ranks, args, timeout_s=100, what="all_reduce")
    return busbw_gbps(size_bytes, t_s, ranks)
