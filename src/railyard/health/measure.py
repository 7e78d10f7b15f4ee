"""Measurements a health check judges: matrix-multiply rate and memory copy bandwidth.

Both are taken as the median of short windows, so a node whose cores are shared with another
busy process measures low for the whole run, as a job would see it. numpy (float32) runs on
any node; on a GPU node the compute figure comes from torch in bf16 where torch is installed.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

# One BLAS thread: a multi-threaded BLAS on a busy node swings 4x from run to run as its
# threads wait on each other, which would hide the node's state in noise; one thread per
# measurement reads how much of a core a job's process gets.
ONE_THREAD = {name: "1" for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def in_child(name: str, timeout_s: float = 60.0) -> float:
    """Run measurement `name` of this module in a fresh interpreter with one BLAS thread."""
    code = f"from railyard.health.measure import {name}; print(repr({name}()))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
        env={**os.environ, **ONE_THREAD},
    )
    if done.returncode != 0:
        raise RuntimeError(f"{name}: {done.stderr.strip().splitlines()[-1:]}")
    return float(done.stdout.strip())


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
