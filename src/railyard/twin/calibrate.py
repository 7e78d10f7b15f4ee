"""``railyard perf calibrate``: measure this machine's GPU (or CPU) with torch and write the
figures the step model uses (railyard.twin.calibration).

What is measured, each the way its published counterpart was:
- GEMM rate by shape (bf16 on a GPU, fp32 on a CPU), median of repeated runs after warm-up,
  as in Bekman's MAMF finder and the Azure cuBLASLt sweeps;
- attention forward and backward by backend through torch's scaled_dot_product_attention
  (flash = FlashAttention-2, cuDNN, math) at several sequence lengths and head dimensions,
  FLOPs counted as flash-attention's benchmark counts them (causal forward 2 b h s^2 d,
  backward 2.5x);
- streaming memory bandwidth: a large copy, read + write bytes over time (STREAM copy);
- launch cost: the host time per kernel of an eager training step too small to keep the GPU
  busy (forward under autocast and backward), and the device time per kernel when many tiny
  kernels run back to back (from a CUDA graph on a GPU).

torch is imported inside :func:`measure` because it is an optional, heavy dependency that the
rest of railyard never needs.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from functools import partial
from typing import Any

from railyard.blueprint.catalog import GPUS
from railyard.blueprint.local import catalogue_name
from railyard.twin.attention import BWD_FLOPS_RATIO, attention_flops
from railyard.twin.calibration import AttentionPoint, Calibration, GemmPoint

GPU_GEMMS = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192),
             (8192, 4096, 4096), (4096, 16384, 4096), (16384, 4096, 16384))  # fmt: skip
CPU_GEMMS = ((64, 64, 64), (128, 128, 128), (256, 256, 256))
GPU_SEQS, CPU_SEQS = (1024, 2048, 4096, 8192), (64, 128)
GPU_HEAD_DIMS, CPU_HEAD_DIMS = (64, 128), (32,)


def _median_s(fn: Callable[[], object], sync: Callable[[], None], repeat: int) -> float:
    fn()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def measure(
    device: str | None = None,
    *,
    quick: bool = False,
    peak_tflops: float | None = None,
    gemms: Sequence[tuple[int, int, int]] | None = None,
    seqs: Sequence[int] | None = None,
    head_dims: Sequence[int] | None = None,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Measure the local device; ``quick`` uses fewer repeats (tests, CPUs)."""
    import torch
    import torch.nn.functional as F

    say: Callable[[str], None] = progress or (lambda _msg: None)
    dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cuda = dev.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise ValueError("device cuda: torch sees no GPU (hint: --device cpu)")
    dtype = torch.bfloat16 if cuda else torch.float32
    repeat = 3 if quick else 20

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    name = torch.cuda.get_device_name() if cuda else (platform.processor() or "cpu")
    notes = [f"device {dev}", f"dtype {str(dtype).removeprefix('torch.')}"]

    gemm_points = []
    for m, n, k in gemms or (GPU_GEMMS if cuda else CPU_GEMMS):
        a = torch.randn(m, k, device=dev, dtype=dtype)
        b = torch.randn(k, n, device=dev, dtype=dtype)
        seconds = _median_s(partial(torch.matmul, a, b), sync, repeat)
        tflops = 2.0 * m * n * k / seconds / 1e12
        gemm_points.append((m, n, k, tflops))
        say(f"gemm {m}x{n}x{k}: {tflops:.2f} TFLOP/s")
    best = max(t for *_, t in gemm_points)
    peak = peak_tflops or _catalogue_peak(name) or best
    gemm = tuple(GemmPoint(m, n, k, t, t / peak) for m, n, k, t in gemm_points)

    attention = []
    backends = _backends(torch, cuda)
    for backend, context in backends:
        for d in head_dims or (GPU_HEAD_DIMS if cuda else CPU_HEAD_DIMS):
            for s in seqs or (GPU_SEQS if cuda else CPU_SEQS):
                batch, heads = max(1, 16384 // s), max(1, 2048 // d)
                if not cuda:
                    batch, heads = 1, 2
                shape = (batch, heads, s, d)
                q, k_, v = (
                    torch.randn(shape, device=dev, dtype=dtype, requires_grad=True)
                    for _ in range(3)
                )
                try:
                    with context():
                        out = F.scaled_dot_product_attention(q, k_, v, is_causal=True)
                        grad = torch.randn_like(out)

                        def fwd(q: Any = q, k: Any = k_, v: Any = v) -> Any:
                            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

                        def bwd(out: Any = out, grad: Any = grad, inputs: Any = (q, k_, v)) -> Any:
                            return torch.autograd.grad(out, inputs, grad, retain_graph=True)

                        t_fwd = _median_s(fwd, sync, repeat)
                        t_bwd = _median_s(bwd, sync, repeat)
                except RuntimeError as exc:  # backend not available for this shape or device
                    notes.append(f"{backend} d{d} s{s}: {str(exc).splitlines()[0][:80]}")
                    continue
                flops = attention_flops(batch, heads, s, s, d, causal=True)
                for direction, t, ratio in (("fwd", t_fwd, 1.0), ("bwd", t_bwd, BWD_FLOPS_RATIO)):
                    rate = flops * ratio / t / 1e12
                    attention.append(AttentionPoint(backend, direction, True, d, s, rate))
                say(f"attention {backend} d{d} s{s}: fwd {t_fwd * 1e3:.3f} ms, "
                    f"bwd {t_bwd * 1e3:.3f} ms")  # fmt: skip

    size = (1 << 28) if cuda else (1 << 24)  # 256 MiB on a GPU, 16 MiB on a CPU
    src = torch.empty(size, device=dev, dtype=torch.uint8)
    dst = torch.empty_like(src)
    seconds = _median_s(lambda: dst.copy_(src), sync, repeat)
    hbm = 2.0 * size / seconds / 1e9
    say(f"copy: {hbm:.1f} GB/s")

    host_us, gpu_us = _launch_costs(torch, dev, cuda, sync)
    say(f"launch: host {host_us:.2f} us per op, device {gpu_us:.2f} us per kernel")
    return Calibration(
        device=name,
        torch_version=str(torch.__version__),
        peak_tflops=peak,
        hbm_gbyte_s=hbm,
        host_us_per_kernel=host_us,
        gpu_us_per_kernel=gpu_us,
        gemm=gemm,
        attention=tuple(attention),
        notes=tuple(notes),
    )


def _catalogue_peak(device_name: str) -> float | None:
    name = catalogue_name(device_name)
    return GPUS[name].bf16_dense_tflops if name in GPUS else None


def _backends(torch: Any, cuda: bool) -> list[tuple[str, Callable[[], Any]]]:
    """(railyard backend name, context manager) pairs torch offers on this device."""
    if not cuda:
        return [("cpu-sdpa", nullcontext)]
    from torch.nn.attention import SDPBackend, sdpa_kernel

    out: list[tuple[str, Callable[[], Any]]] = [
        ("flash2", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)),
        ("unfused", lambda: sdpa_kernel(SDPBackend.MATH)),
    ]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        out.insert(1, ("cudnn", lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)))
    return out


def _launch_costs(
    torch: Any, dev: str, cuda: bool, sync: Callable[[], None]
) -> tuple[float, float]:
    """(host microseconds per kernel of an eager training step, device microseconds per
    back-to-back kernel)."""
    host_us = _training_host_us(torch, dev, cuda, sync)
    if not cuda:
        return host_us, host_us
    x = torch.zeros(16, device=dev)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        x.add_(1.0)
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(200):
                x.add_(1.0)
    seconds = _median_s(graph.replay, sync, 10)
    return host_us, seconds / 200 * 1e6


def _training_host_us(torch: Any, dev: str, cuda: bool, sync: Callable[[], None]) -> float:
    """Host time per kernel of a training step too small to keep the GPU busy: four pre-norm
    MLP blocks on 8 x 64 activations, forward under bf16 autocast and backward, as the step
    model's eager implementation runs them. Forward ops also record autograd's graph and pass
    autocast's dispatch, so a training op costs the host more than a bare ``x.add_(1)``. The
    optimizer is left out: its few multi-tensor kernels carry Python set-up that, on a model
    this small, would be charged to each of them. Kernels per step are counted once with
    torch.profiler; on a CPU, which launches no kernels, a bare operator is timed."""
    if not cuda:
        return _bare_op_host_us(torch, dev)
    from torch import nn

    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
              for _ in range(4)]  # fmt: skip
    model = nn.Sequential(*blocks).to(dev)
    x = torch.randn(8, 64, device=dev)

    def step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(x).float().square().mean()
        loss.backward()
        model.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    sync()
    kernels = _kernels_per_step(torch, step, sync)
    if kernels <= 0:  # a profiler that saw nothing
        return _bare_op_host_us(torch, dev)
    steps = 20
    start = time.perf_counter()
    for _ in range(steps):
        step()
    host_s = (time.perf_counter() - start) / steps
    sync()
    return host_s / kernels * 1e6


def _bare_op_host_us(torch: Any, dev: str) -> float:
    """Host microseconds to issue one tiny in-place operator."""
    ops = 2000
    y = torch.zeros(16, device=dev)
    start = time.perf_counter()
    for _ in range(ops):
        y.add_(1.0)
    return (time.perf_counter() - start) / ops * 1e6


def _kernels_per_step(torch: Any, step: Callable[[], None], sync: Callable[[], None]) -> int:
    """GPU kernels and memory operations one ``step`` launches (a profiled step)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    cuda = torch.autograd.DeviceType.CUDA
    return sum(
        1
        for event in prof.events()
        if event.device_type == cuda
        and not getattr(event, "is_user_annotation", False)
        and not event.name.startswith("Optimizer.")
    )


__all__ = ["measure"]
