"""Synthetic workloads calibrated to published trace statistics.

Run times are resampled from 83,154 Philly run times (`data/philly_runtime.csv`) and bent by a
power transform r' = min(a r^b, max) whose (a, b) make the median and mean equal a profile's
published values (the cap is the profile's longest GPU job; `data/trace_summaries.csv`,
Hu et al. NSDI '24; see `data/NOTICE.md`). GPU counts are
1 with probability `single_gpu_share`, else a power of two whose geometric weights are solved
so the mean matches the profile. Final states follow the profile's completed / cancelled /
failed shares. Arrivals are Poisson, spaced so the trace offers `load` x the cluster's GPUs.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from dataclasses import dataclass
from importlib import resources

import numpy as np
import numpy.typing as npt

from railyard.sim.workload import FinalState, TraceJob, Workload

PROFILES = ("philly", "helios", "kalos", "seren", "llm-lab", "gavel")
WALLTIME_MODES = ("noisy", "exact", "none")

# Share of single-GPU jobs. The summaries give only median = 1 GPU (so >= 0.5); 0.7 is an
# assumption in line with the trace papers' "most jobs use one GPU".
SINGLE_GPU_SHARE = 0.7

# llm-lab: an LLM lab's mix, assumed (not from a trace): evaluation and debugging on 1-8 GPUs,
# many 8-64 GPU fine-tuning gangs, and a few 256-1,024 GPU pre-training runs lasting about a
# day (lognormal around PRETRAIN_MEDIAN_S). Other run times follow the Kalos profile.
LLM_LAB_SIZES = {
    1: 0.30, 2: 0.05, 4: 0.07, 8: 0.28, 16: 0.12, 32: 0.08, 64: 0.06,
    256: 0.02, 512: 0.012, 1024: 0.008,
}  # fmt: skip
PRETRAIN_MIN_GPUS = 256
PRETRAIN_MEDIAN_S = 24 * 3600.0

# gavel: the synthetic jobs of the time-slicing literature (Narayanan et al., "Gavel", OSDI
# 2020, section 7.1): a job runs 10^x minutes, x uniform on [1.5, 3] with probability 0.8 and
# on [3, 4] otherwise (32 min to 7 days, none of Philly's seconds-long jobs), on 1, 2, 4 or 8
# GPUs with probabilities 0.7, 0.1, 0.15, 0.05 (Philly's sizes, as the paper says); every job
# completes. Queueing, not run time, dominates its JCT under load: what time slicing is for.
GAVEL_SIZES = {1: 0.7, 2: 0.1, 4: 0.15, 8: 0.05}
GAVEL_SHORT_SHARE = 0.8


@dataclass(frozen=True)
class Profile:
    """Target statistics of one trace (GPU jobs only)."""

    name: str
    median_runtime_s: float
    mean_runtime_s: float
    max_runtime_s: float
    mean_gpus: float
    max_gpus: int
    completed: float
    cancelled: float
    failed: float


@functools.cache
def philly_runtimes_s() -> npt.NDArray[np.float64]:
    """The shipped Philly run times, as floats (seconds), sorted."""
    text = resources.files("railyard.data").joinpath("philly_runtime.csv").read_text("utf-8")
    values = np.loadtxt(io.StringIO(text), skiprows=1, dtype=np.float64)
    return np.sort(values)


@functools.cache
def trace_profiles() -> dict[str, Profile]:
    """Profiles from the shipped summaries (rows with state shares only)."""
    text = resources.files("railyard.data").joinpath("trace_summaries.csv").read_text("utf-8")
    out: dict[str, Profile] = {}
    for row in csv.DictReader(io.StringIO(text)):
        if not row["complete_rate_gpu"]:
            continue
        out[row["id"].lower()] = Profile(
            name=row["id"].lower(),
            median_runtime_s=float(row["med_run_time_gpu"]),
            mean_runtime_s=float(row["avg_run_time_gpu"]),
            max_runtime_s=float(row["max_run_time_gpu"]),
            mean_gpus=float(row["avg_gpu_num"]),
            max_gpus=int(float(row["max_gpu"])),
            completed=float(row["complete_rate_gpu"]),
            cancelled=float(row["cancel_rate_gpu"]),
            failed=float(row["fail_rate_gpu"]),
        )
    return out


def profile(name: str) -> Profile:
    if name == "gavel":  # no published summary row: the paper's generator, above
        mean_gpus = sum(g * w for g, w in GAVEL_SIZES.items())

        def mean_min(lo: float, hi: float) -> float:  # E[10^x], x uniform on [lo, hi]
            return (10**hi - 10**lo) / ((hi - lo) * math.log(10))

        share = GAVEL_SHORT_SHARE
        mean_s = 60 * (share * mean_min(1.5, 3) + (1 - share) * mean_min(3, 4))
        median_s = 60 * 10 ** (1.5 + 1.5 * 0.5 / share)  # inside the short range
        return Profile("gavel", median_s, mean_s, 10**4 * 60, mean_gpus, 8, 1, 0, 0)
    key = "kalos" if name == "llm-lab" else name
    found = trace_profiles().get(key)
    if found is None:
        raise ValueError(f"unknown profile {name!r}; use one of {', '.join(PROFILES)}")
    return found


@functools.cache
def runtime_transform(median_s: float, mean_s: float, max_s: float) -> tuple[float, float]:
    """(a, b) so that min(a r^b, max_s) over the Philly sample has the given median and mean."""
    base = np.maximum(philly_runtimes_s(), 1.0)
    med = float(np.median(base))
    logs = np.log(base / med)
    target = math.log(mean_s / median_s)
    cap = math.log(max_s / median_s)

    def log_ratio(b: float) -> float:  # log(mean / median) of the capped (r / med)^b
        return float(np.log(np.mean(np.exp(np.minimum(b * logs, cap)))))

    lo, hi = 0.05, 3.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if log_ratio(mid) < target else (lo, mid)
    b = (lo + hi) / 2
    return median_s / med**b, b


@functools.cache
def gpu_weights(mean_gpus: float, max_gpus: int, single: float) -> tuple[list[int], list[float]]:
    """Sizes 1, 2, 4, ... max and their probabilities, with the requested mean."""
    sizes = [2**k for k in range(1, int(math.log2(max_gpus)) + 1)]
    want = (mean_gpus - single) / (1 - single)  # mean size of the multi-GPU jobs

    def mean_for(log_q: float) -> float:
        w = np.exp(log_q * np.arange(len(sizes)))
        return float(np.dot(w, sizes) / w.sum())

    lo, hi = -10.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_for(mid) < want else (lo, mid)
    w = np.exp((lo + hi) / 2 * np.arange(len(sizes)))
    probs = [single, *((1 - single) * w / w.sum()).tolist()]
    return [1, *sizes], probs


def generate(
    profile_name: str,
    *,
    jobs: int,
    cluster_gpus: int,
    load: float = 0.9,
    seed: int = 0,
    walltime: str = "noisy",
    queues: int = 8,
    users: int = 64,
    max_gpus: int | None = None,
) -> Workload:
    """`jobs` jobs shaped like `profile_name`, offering `load` x `cluster_gpus` on average.

    Gangs larger than the cluster, or than `max_gpus` (say 8: one node's gangs, as the
    time-slicing papers' traces), are cut to the largest power of two that fits. Noisy
    walltimes over-request like real users: runtime x a lognormal factor (median 2, clipped
    at >= 1), rounded up to whole hours.
    """
    if profile_name not in PROFILES:
        raise ValueError(f"unknown profile {profile_name!r}; use one of {', '.join(PROFILES)}")
    if walltime not in WALLTIME_MODES:
        raise ValueError(f"walltime must be one of {WALLTIME_MODES}")
    if jobs < 1 or cluster_gpus < 1 or not load > 0:
        raise ValueError("jobs and cluster_gpus must be >= 1 and load > 0")
    if max_gpus is not None and max_gpus < 1:
        raise ValueError("max_gpus must be >= 1")
    p = profile(profile_name)
    rng = np.random.default_rng(seed)
    gpus, runtime = _sizes_and_runtimes(p, profile_name, jobs, rng)
    cap = 2 ** int(math.log2(min(cluster_gpus, max_gpus or cluster_gpus)))
    gpus = np.minimum(gpus, cap)
    shares = np.array([p.completed, p.cancelled, p.failed])
    states = rng.choice(3, size=jobs, p=shares / shares.sum())
    span_s = float(np.dot(gpus, runtime)) / (load * cluster_gpus)
    submit = np.cumsum(rng.exponential(span_s / jobs, size=jobs))
    submit -= submit[0]
    queue_ix = _zipf_choice(rng, queues, jobs)
    user_ix = _zipf_choice(rng, users, jobs)
    factor = np.maximum(1.0, rng.lognormal(math.log(2.0), 1.0, size=jobs))
    kinds = (FinalState.COMPLETED, FinalState.CANCELLED, FinalState.FAILED)
    out = []
    for i in range(jobs):
        if walltime == "exact":
            wall: float | None = float(runtime[i])
        elif walltime == "noisy":
            wall = math.ceil(runtime[i] * factor[i] / 3600.0) * 3600.0
        else:
            wall = None
        out.append(
            TraceJob(
                id=f"j{i:06d}",
                submit_s=float(submit[i]),
                gpus=int(gpus[i]),
                runtime_s=float(runtime[i]),
                queue=f"q{queue_ix[i]}",
                user=f"u{user_ix[i]}",
                walltime_s=wall,
                state=kinds[states[i]],
            )
        )
    return Workload.of(f"synthetic-{profile_name}", out)


def _sizes_and_runtimes(
    p: Profile, name: str, jobs: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    if name == "gavel":
        long = rng.random(jobs) >= GAVEL_SHORT_SHARE
        minutes = 10 ** np.where(long, rng.uniform(3, 4, jobs), rng.uniform(1.5, 3, jobs))
        sizes = np.array(list(GAVEL_SIZES))
        gpus = rng.choice(sizes, size=jobs, p=np.array(list(GAVEL_SIZES.values())))
        return gpus.astype(np.int64), np.round(minutes * 60.0)
    a, b = runtime_transform(p.median_runtime_s, p.mean_runtime_s, p.max_runtime_s)
    base = np.maximum(rng.choice(philly_runtimes_s(), size=jobs), 1.0)
    runtime = np.clip(np.round(a * base**b), 1.0, p.max_runtime_s)
    if name == "llm-lab":
        sizes = np.array(list(LLM_LAB_SIZES))
        probs = np.array(list(LLM_LAB_SIZES.values()))
        gpus = rng.choice(sizes, size=jobs, p=probs / probs.sum())
        big = gpus >= PRETRAIN_MIN_GPUS
        runtime[big] = np.round(
            rng.lognormal(math.log(PRETRAIN_MEDIAN_S), 0.7, size=int(big.sum()))
        )
        return gpus.astype(np.int64), runtime
    sizes_l, probs_l = gpu_weights(p.mean_gpus, p.max_gpus, SINGLE_GPU_SHARE)
    gpus = rng.choice(np.array(sizes_l), size=jobs, p=np.array(probs_l))
    return gpus.astype(np.int64), runtime


def _zipf_choice(rng: np.random.Generator, n: int, size: int) -> npt.NDArray[np.int64]:
    """Indices 0..n-1 with weights 1/(k+1): a few heavy tenants and a long tail."""
    w = 1.0 / np.arange(1, n + 1)
    return rng.choice(n, size=size, p=w / w.sum()).astype(np.int64)
