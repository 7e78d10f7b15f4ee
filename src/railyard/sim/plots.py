"""PNG plots of simulation results, with matplotlib if it is installed (an optional extra).

Three pictures per call: GPU utilization over time, pending jobs over time, and the JCT CDF,
one line per run. Nothing is imported until plots are asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HINT = "pip install matplotlib"


def have_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def write_plots(results: Sequence[dict[str, Any]], out_dir: Path) -> list[Path]:
    """Write utilization.png, queue.png and jct_cdf.png under `out_dir`; return their paths."""
    if not have_matplotlib():
        raise RuntimeError(f"plots need matplotlib (hint: {HINT})")
    mpl: Any = importlib.import_module("matplotlib")
    mpl.use("Agg")
    plt: Any = importlib.import_module("matplotlib.pyplot")
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    panels = (
        ("utilization.png", "utilization", "busy GPUs / all GPUs"),
        ("queue.png", "pending", "pending jobs"),
    )
    for name, key, ylabel in panels:
        fig, ax = plt.subplots(figsize=(8, 4))
        for r in results:
            series = r["series"]
            hours = [t / 3600 for t in series["t_s"]]
            ax.plot(hours, series[key], label=_label(r))
        ax.set_xlabel("time (h)")
        ax.set_ylabel(ylabel)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=120)
        plt.close(fig)
        written.append(out_dir / name)
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in results:
        q = r["jct_cdf_s"]
        if q:
            probs = [i / (len(q) - 1) for i in range(len(q))]
            ax.plot([max(v / 3600, 1e-3) for v in q], probs, label=_label(r))
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h)")
    ax.set_ylabel("fraction of jobs")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_dir / "jct_cdf.png", dpi=120)
    plt.close(fig)
    written.append(out_dir / "jct_cdf.png")
    return written


def _label(r: dict[str, Any]) -> str:
    return f"{r['blueprint']} {r['policy']} s{r['seed']}"
