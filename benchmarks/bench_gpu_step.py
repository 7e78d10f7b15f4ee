"""One real training step of a GPT on this machine's GPU, beside what the twin predicts for it.

Run: ``python benchmarks/bench_gpu_step.py [--calibration FILE] [--configs NAME,...] [--profile]``.
Prints a table and writes ``benchmarks/results/bench_gpu_step.json``; ``--profile`` adds each
step's kernel time by the twin's categories beside the twin's own split, and ``--replay FILE``
predicts an earlier run's real steps again (no GPU needed: ``--blueprint`` names the GPU).
Each configuration is trained the way ``perf train --implementation eager`` models it: plain
PyTorch modules, bf16 autocast over fp32 weights, ``F.scaled_dot_product_attention`` held to one
backend (or the unfused ``softmax(q k^T) v``), ``torch.utils.checkpoint`` per layer for full
recompute, an unfused ``F.cross_entropy`` on tied output weights, and ``torch.optim.AdamW``
(foreach, its default on CUDA, or fused where a configuration says so). The step time is the median
of ``--steps`` timed steps after ``--warmup`` untimed ones (CUDA-synchronised wall clock); the peak
is ``torch.cuda.max_memory_allocated``. The twin's figures come from ``railyard perf train local
--json`` (the GPU found by NVML), once with the shipped constants and once with ``--calibration``
when a file is given, so a ``perf calibrate`` run can be judged before and after on the same steps.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "bench_gpu_step.json"


@dataclass(frozen=True)
class Config:
    name: str
    layers: int
    hidden: int
    heads: int
    micro_batch: int
    attention: str  # flash2, cudnn or unfused (the twin's names)
    recompute: str  # none or full
    seq_len: int = 2048
    vocab: int = 50304
    optimizer: str = "foreach"  # torch.optim.AdamW's default path on CUDA, or fused


CONFIGS = {
    c.name: c
    for c in (
        Config("350m-mb1-flash", 24, 1024, 16, 1, "flash2", "none"),
        Config("350m-mb4-flash", 24, 1024, 16, 4, "flash2", "none"),
        Config("350m-mb1-unfused", 24, 1024, 16, 1, "unfused", "none"),
        Config("1.3b-mb2-flash", 24, 2048, 16, 2, "flash2", "none"),
        Config("1.3b-mb2-cudnn", 24, 2048, 16, 2, "cudnn", "none"),
        Config("1.3b-mb2-flash-full", 24, 2048, 16, 2, "flash2", "full"),
        Config("2.7b-mb2-flash", 32, 2560, 32, 2, "flash2", "none"),
        Config("2.7b-mb4-flash-full", 32, 2560, 32, 4, "flash2", "full"),
        Config("1.3b-mb2-flash-fused-adam", 24, 2048, 16, 2, "flash2", "none", optimizer="fused"),
        Config("tiny-cpu", 2, 64, 4, 1, "unfused", "none", seq_len=32, vocab=128),
    )
}
DEFAULT = [name for name in CONFIGS if name != "tiny-cpu"]


def build(cfg: Config, device: str) -> tuple[Any, Any]:
    """The GPT of ``cfg`` (GPT-2 layout: learned positions, biases, tied embeddings, no
    dropout) and its AdamW optimizer, on ``device``."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    head_dim = cfg.hidden // cfg.heads

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1 = nn.LayerNorm(cfg.hidden)
            self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
            self.proj = nn.Linear(cfg.hidden, cfg.hidden)
            self.ln2 = nn.LayerNorm(cfg.hidden)
            self.fc1 = nn.Linear(cfg.hidden, 4 * cfg.hidden)
            self.fc2 = nn.Linear(4 * cfg.hidden, cfg.hidden)

        def attend(self, q: Any, k: Any, v: Any) -> Any:
            if cfg.attention == "unfused":
                scores = (q @ k.transpose(-2, -1)) * head_dim**-0.5
                mask = torch.ones(q.shape[-2], q.shape[-2], dtype=torch.bool, device=q.device)
                scores = scores.masked_fill(~mask.tril(), float("-inf"))
                return torch.softmax(scores, dim=-1) @ v
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            qkv = self.qkv(self.ln1(x)).view(b, t, 3, cfg.heads, head_dim)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
            x = x + self.proj(self.attend(q, k, v).transpose(1, 2).reshape(b, t, cfg.hidden))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Gpt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
            self.wpe = nn.Embedding(cfg.seq_len, cfg.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(cfg.layers))
            self.ln_f = nn.LayerNorm(cfg.hidden)

        def forward(self, tokens: Any, targets: Any) -> Any:
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.wte(tokens) + self.wpe(positions)
            for block in self.blocks:
                if cfg.recompute == "full":
                    x = checkpoint(block, x, use_reentrant=False)
                else:
                    x = block(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, cfg.vocab), targets.view(-1))

    model = Gpt().to(device)
    fused = cfg.optimizer == "fused"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=not fused, fused=fused)
    return model, optimizer


def measure(
    cfg: Config, device: str, warmup: int, steps: int, profile: bool = False
) -> dict[str, Any]:
    """Median step seconds, host enqueue seconds and peak allocated GiB of ``cfg`` trained on
    ``device``, and with ``profile`` its kernels by category (:func:`kernel_profile`)."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(0)
    model, optimizer = build(cfg, device)
    params = sum(p.numel() for p in model.parameters())
    shape = (cfg.micro_batch, cfg.seq_len)
    tokens = torch.randint(0, cfg.vocab, shape, device=device)
    targets = torch.randint(0, cfg.vocab, shape, device=device)
    backend = {"flash2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}
    on_gpu = device.startswith("cuda")

    def step() -> None:
        with sdpa_kernel(backend.get(cfg.attention, SDPBackend.MATH)):
            with torch.autocast(device.split(":")[0], dtype=torch.bfloat16):
                loss = model(tokens, targets)
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize()

    for _ in range(warmup):
        step()
    sync()
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    samples, enqueued = [], []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        enqueued.append(time.perf_counter() - start)
        sync()
        samples.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else 0.0
    out: dict[str, Any] = {"params": float(params), "step_s": statistics.median(samples),
                           "enqueue_s": statistics.median(enqueued), "peak_gib": peak}  # fmt: skip
    if profile:
        out["profile"] = kernel_profile(step, sync, on_gpu)
    return out


# Kernel-name fragments by the twin's categories (railyard.twin.layer.CATEGORIES), first match
# wins: flash/cuDNN attention and the unfused path's softmax (the warp and shared-memory
# softmax kernels over the scores), the loss's log-softmax (cunn_SoftMax over the vocabulary)
# and NLL, the optimizer's multi-tensor kernels, cuBLAS/cuBLASLt/CUTLASS GEMMs; everything
# else is element-wise (as the twin counts it, the unfused path's element-wise passes too).
KERNEL_CATEGORIES = (
    ("attention", ("softmax_warp", "softmaxbackwardsmem", "flash", "fmha", "cudnn", "attention")),
    ("loss", ("cunn_softmax", "nll_loss", "cross_entropy")),
    ("optimizer", ("multi_tensor", "adam", "foreach")),
    ("gemm", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "splitk", "sm90_", "sm80_")),
)


def kernel_category(name: str) -> str:
    lowered = name.lower()
    for category, fragments in KERNEL_CATEGORIES:
        if any(f in lowered for f in fragments):
            return category
    return "elementwise"


def kernel_profile(step: Any, sync: Any, on_gpu: bool, steps: int = 3) -> dict[str, Any]:
    """Per step: device seconds and kernels launched, the 80 busiest kernels by name (which
    :func:`by_category` sorts into the twin's categories), and the GEMM and attention operators
    by input shape (torch.profiler over ``steps`` steps)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities, record_shapes=True) as prof:
        for _ in range(steps):
            step()
        sync()
    kernels: dict[str, list[float]] = {}
    for event in prof.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        if getattr(event, "is_user_annotation", False) or event.name.startswith("Optimizer."):
            continue  # a record_function range on the GPU's timeline, not a kernel
        seconds = (
            event.device_time / 1e6 if hasattr(event, "device_time") else event.cuda_time / 1e6
        )
        row = kernels.setdefault(event.name[:160], [0.0, 0.0])
        row[0] += seconds / steps
        row[1] += 1 / steps
    ops = []
    for avg in prof.key_averages(group_by_input_shape=True):
        device_us = getattr(avg, "self_device_time_total", 0.0) or 0.0
        if device_us <= 0 or not any(
            k in avg.key for k in ("mm", "linear", "attention", "softmax")
        ):
            continue
        shapes = str(avg.input_shapes)[:200]
        ops.append({"op": avg.key, "shapes": shapes, "calls": avg.count / steps,
                    "device_s": device_us / 1e6 / steps,
                    "cpu_s": avg.cpu_time_total / 1e6 / steps})  # fmt: skip
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])
    return {
        "device_s": sum(v[0] for v in kernels.values()),
        "kernels": sum(v[1] for v in kernels.values()),
        "top_kernels": [{"name": k, "device_s": v[0], "calls": v[1]} for k, v in top[:80]],
        "ops": sorted(ops, key=lambda o: -o["device_s"])[:80],
    }


def by_category(profile: dict[str, Any]) -> dict[str, float]:
    """Device seconds per step by the twin's categories, from a profile's busiest kernels."""
    out: dict[str, float] = {}
    for row in profile["top_kernels"]:
        if row["name"].startswith("Optimizer."):
            continue  # an annotation recorded by an earlier version of this script
        category = kernel_category(row["name"])
        out[category] = out.get(category, 0.0) + row["device_s"]
    return out


def predict(cfg: Config, blueprint: str, calibration: str | None) -> dict[str, Any]:
    """``railyard perf train BLUEPRINT --json`` for ``cfg`` as one eager step on one GPU."""
    model = {"name": cfg.name, "layers": cfg.layers, "hidden": cfg.hidden, "heads": cfg.heads,
             "vocab": cfg.vocab, "seq_len": cfg.seq_len, "dropout": False}  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(model, file)
    command = [sys.executable, "-m", "railyard", "perf", "train", blueprint, "--model-file",
               file.name, "--implementation", "eager", "--attention", cfg.attention,
               "--recompute", cfg.recompute, "--micro-batch", str(cfg.micro_batch),
               "--global-batch", str(cfg.micro_batch), "--optimizer", cfg.optimizer,
               "--json"]  # fmt: skip
    if calibration:
        command += ["--calibration", calibration]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    Path(file.name).unlink()
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    out = json.loads(done.stdout)
    return {"step_s": out["step_time_s"], "peak_gib": out["memory_needed_gib"],
            "breakdown_s": out.get("breakdown_s", {})}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", default=",".join(DEFAULT), help=f"of {', '.join(CONFIGS)}")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--blueprint", default="local", help="what the twin predicts on")
    parser.add_argument("--calibration", help="a file from railyard perf calibrate")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="kernels by category too")
    parser.add_argument("--replay", help="an earlier run's JSON: its real steps, predicted again")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)} (hint: one of {', '.join(CONFIGS)})")
    replayed: dict[str, dict[str, Any]] = {}
    if args.replay:
        replayed = {
            row["config"]["name"]: row["real"] for row in json.loads(Path(args.replay).read_text())
        }
        names = [n for n in names if n in replayed] if "--configs" in sys.argv else list(replayed)
    rows = []
    header = f"{'config':22} {'params':>7} {'real s':>8} {'twin s':>8} {'err':>7}"
    header += f" {'cal s':>8} {'err':>7} {'real GiB':>8} {'twin GiB':>8}"
    print(header)
    for name in names:
        cfg = CONFIGS[name]
        real = replayed.get(name) or measure(
            cfg, args.device, args.warmup, args.steps, args.profile
        )
        shipped = predict(cfg, args.blueprint, None)
        calibrated = predict(cfg, args.blueprint, args.calibration) if args.calibration else {}
        rows.append({"config": asdict(cfg), "real": real, "twin": shipped,
                     "twin_calibrated": calibrated})  # fmt: skip

        line = f"{name:22} {real['params'] / 1e9:6.2f}B {real['step_s']:8.4f}"
        for twin in (shipped, calibrated):
            if "step_s" in twin:
                line += f" {twin['step_s']:8.4f} {twin['step_s'] / real['step_s'] - 1:+7.1%}"
            else:
                line += f" {'-':>8} {'-':>7}"
        print(f"{line} {real['peak_gib']:8.2f} {shipped.get('peak_gib', 0.0):8.2f}", flush=True)
        if "error" in shipped:
            print(f"  twin: {shipped['error']}")
        if "profile" in real:
            print("  " + where_the_time_goes(real, shipped))
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.output}")


def where_the_time_goes(real: dict[str, Any], twin: dict[str, Any]) -> str:
    """ms by category, real (profiled kernels, and the step's time the GPU was idle) / twin."""
    cats = by_category(real["profile"])
    twin_s = twin.get("breakdown_s", {})
    parts = [f"{c} {cats.get(c, 0.0) * 1e3:.1f}/{twin_s.get(c, 0.0) * 1e3:.1f}"
             for c in ("gemm", "attention", "elementwise", "loss", "optimizer")]  # fmt: skip
    idle = real["step_s"] - sum(cats.values())
    gaps = twin_s.get("kernel_gaps", 0.0) + twin_s.get("launch_idle", 0.0)
    parts.append(f"idle {idle * 1e3:.1f}/{gaps * 1e3:.1f}")
    return "ms real/twin: " + ", ".join(parts) + f"; {real['profile']['kernels']:.0f} kernels"


if __name__ == "__main__":
    main()
