"""One real training step of a GPT on this machine's GPU, beside what the twin predicts for it.

Run: ``python benchmarks/bench_gpu_step.py [--calibration FILE] [--configs NAME,...]``. Prints a
table and writes ``benchmarks/results/bench_gpu_step.json``. Each configuration is trained the
way ``perf train --implementation eager`` models it: plain PyTorch modules, bf16 autocast over
fp32 weights, ``F.scaled_dot_product_attention`` held to one backend (or the unfused
``softmax(q k^T) v``), ``torch.utils.checkpoint`` per layer for full recompute, an unfused
``F.cross_entropy`` on tied output weights, and ``torch.optim.AdamW`` (foreach). The step time is
the median of ``--steps`` timed steps after ``--warmup`` untimed ones (CUDA-synchronised wall
clock); the peak is ``torch.cuda.max_memory_allocated``. The twin's figures come from
``railyard perf train local --json`` (the GPU found by NVML), once with the shipped constants
and once with ``--calibration`` when a file is given, so a ``perf calibrate`` run can be judged
before and after on the same steps.
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
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)


def measure(cfg: Config, device: str, warmup: int, steps: int) -> dict[str, float]:
    """Median step seconds and peak allocated GiB of ``cfg`` trained on ``device``."""
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
    samples = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        samples.append(time.perf_counter() - start)
    peak = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else 0.0
    return {"params": float(params), "step_s": statistics.median(samples), "peak_gib": peak}


def predict(cfg: Config, blueprint: str, calibration: str | None) -> dict[str, Any]:
    """``railyard perf train BLUEPRINT --json`` for ``cfg`` as one eager step on one GPU."""
    model = {"name": cfg.name, "layers": cfg.layers, "hidden": cfg.hidden, "heads": cfg.heads,
             "vocab": cfg.vocab, "seq_len": cfg.seq_len, "dropout": False}  # fmt: skip
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as file:
        json.dump(model, file)
    command = [sys.executable, "-m", "railyard", "perf", "train", blueprint, "--model-file",
               file.name, "--implementation", "eager", "--attention", cfg.attention,
               "--recompute", cfg.recompute, "--micro-batch", str(cfg.micro_batch),
               "--global-batch", str(cfg.micro_batch), "--json"]  # fmt: skip
    if calibration:
        command += ["--calibration", calibration]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    Path(file.name).unlink()
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr else "failed"}
    out = json.loads(done.stdout)
    return {"step_s": out["step_time_s"], "peak_gib": out["memory_needed_gib"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--configs", default=",".join(DEFAULT), help=f"of {', '.join(CONFIGS)}")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--blueprint", default="local", help="what the twin predicts on")
    parser.add_argument("--calibration", help="a file from railyard perf calibrate")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args()
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"--configs: unknown {', '.join(unknown)} (hint: one of {', '.join(CONFIGS)})")
    rows = []
    header = f"{'config':22} {'params':>7} {'real s':>8} {'twin s':>8} {'err':>7}"
    header += f" {'cal s':>8} {'err':>7} {'real GiB':>8} {'twin GiB':>8}"
    print(header)
    for name in names:
        cfg = CONFIGS[name]
        real = measure(cfg, args.device, args.warmup, args.steps)
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
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
