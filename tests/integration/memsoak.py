"""The memory soak: a real `railyard up` under steady load (short jobs submitted one by one
and in batches as others finish, the job list and single jobs read, ``/healthz`` asked) with
no kills, its resident memory read from ``/proc`` every few seconds. A server that keeps
something per job it has settled grows with the jobs it has seen; one that does not levels
off once its caches are warm (issue 55: 119 to 159 MiB over a 30-minute soak on SQLite).

With ``trace_dir`` the server runs with :mod:`tracemalloc` (a ``sitecustomize`` on its path
starts it and dumps a snapshot on SIGUSR2), and the biggest growths between the first
snapshot after the warm-up and the last are returned, by line: where the memory went.

Used by ``benchmarks/soak.py --memory``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.server_proc import ServerProcess
from tests.integration.soak_client import Api, Tally

PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")
SITECUSTOMIZE = '''"""The memory soak's probe: the first SIGUSR2 starts tracemalloc (after the
warm-up: tracing from the start made a loaded machine's server take minutes to come up), each
later one dumps a snapshot: what was allocated since and still lives."""
import collections, gc, json, os, signal, time, tracemalloc
_out = os.environ.get("RAILYARD_MEMSOAK_TRACE")
if _out:
    def _probe(signum, frame):
        if not tracemalloc.is_tracing():
            tracemalloc.start(int(os.environ.get("RAILYARD_MEMSOAK_FRAMES", "12")))
            return
        t = time.time()
        tracemalloc.take_snapshot().dump(os.path.join(_out, "snap-%.3f.bin" % t))
        gc.unfreeze()  # the server froze its start-up heap (`loop.service.freeze_heap`)
        found = gc.get_objects()
        gc.freeze()
        kinds = collections.Counter(type(o).__qualname__ for o in found)
        caches = [len(getattr(o, "_compiled_cache", None) or ()) for o in found
                  if type(o).__name__ == "Engine"]
        kinds["sqlalchemy compiled cache entries"] = sum(caches)
        with open(os.path.join(_out, "types-%.3f.json" % t), "w") as f:
            json.dump(dict(kinds), f)
    signal.signal(signal.SIGUSR2, _probe)
'''


@dataclass(frozen=True)
class MemoryPlan:
    seconds: float
    seed: int = 1
    gpus: int = 8
    max_active: int = 24  # jobs pending or running at most; then the client waits
    sample_every_s: float = 5.0
    warmup_s: float = 60.0  # the slope is fitted after this (caches filling, imports)


@dataclass
class MemoryResult:
    store: str
    traced: bool
    samples: list[tuple[float, float, int]] = field(default_factory=list)  # (t_s, MiB, jobs)
    growth: list[tuple[str, float, int]] = field(default_factory=list)  # (where, KiB, blocks)
    tally: Tally = field(default_factory=Tally)
    types: list[tuple[str, int]] = field(default_factory=list)  # (type, more objects)

    def summary(self) -> dict[str, Any]:
        warm = [(t, m) for t, m, _ in self.samples if t >= self._warm_t_s]
        return {
            "store": self.store,
            "traced": self.traced,
            "wall_s": round(self.samples[-1][0], 1) if self.samples else 0.0,
            "jobs": self.samples[-1][2] if self.samples else 0,
            "rss_start_mib": round(self.samples[0][1], 1) if self.samples else 0.0,
            "rss_warm_mib": round(warm[0][1], 1) if warm else 0.0,
            "rss_end_mib": round(self.samples[-1][1], 1) if self.samples else 0.0,
            "rss_max_mib": round(max(m for _, m, _ in self.samples), 1) if self.samples else 0.0,
            "slope_mib_per_h": round(slope(warm) * 3600.0, 1) if len(warm) > 2 else 0.0,
            "kib_per_1000_jobs": round(self._per_jobs(), 1),
            "api_5xx": len(self.tally.errors_5xx),
            "samples": [[round(t, 1), round(m, 2), j] for t, m, j in self.samples],
            "top_growth": [[w, round(k, 1), n] for w, k, n in self.growth],
            "type_growth": [[k, n] for k, n in self.types],
        }

    _warm_t_s: float = 60.0

    def _per_jobs(self) -> float:
        """KiB of RSS per 1,000 jobs settled after the warm-up (a least-squares slope)."""
        warm = [(float(j), m) for t, m, j in self.samples if t >= self._warm_t_s]
        if len(warm) < 3 or warm[-1][0] == warm[0][0]:
            return 0.0
        return slope(warm) * 1024.0 * 1000.0


def slope(points: list[tuple[float, float]]) -> float:
    """The least-squares slope of y over x."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def rss_mib(pid: int) -> float:
    """Resident memory of ``pid`` (``/proc/PID/statm``'s second field, in pages)."""
    fields = Path(f"/proc/{pid}/statm").read_text().split()
    return int(fields[1]) * PAGE_BYTES / (1 << 20)


class MemorySoak:
    def __init__(self, state_dir: Path, database_url: str | None, plan: MemoryPlan,
                 trace_dir: Path | None = None) -> None:  # fmt: skip
        self.plan, self.rng = plan, random.Random(plan.seed)
        self.state_dir, self.trace_dir = state_dir, trace_dir
        self.server = ServerProcess(state_dir, gpus=plan.gpus, database_url=database_url)
        self.result = MemoryResult("postgresql" if database_url else "sqlite",
                                   trace_dir is not None)  # fmt: skip
        self.result._warm_t_s = plan.warmup_s
        self.api = Api(self.server, self.result.tally)
        self.submitted = 0
        self.keep_snapshot: Path | None = None  # where the last snapshot is copied
        self.recent: list[str] = []

    def run(self) -> MemoryResult:
        saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "RAILYARD_MEMSOAK_TRACE")}
        if self.trace_dir is not None:
            self._probe_on_path()
        try:
            self.server.start()
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        try:
            self._load()
        finally:
            self.server.stop()
            self.api.close()
        if self.trace_dir is not None:
            self.result.growth = top_growth(self.trace_dir, keep=self.keep_snapshot)
            self.result.types = type_growth(self.trace_dir)
        return self.result

    def _probe_on_path(self) -> None:
        assert self.trace_dir is not None
        probe = self.state_dir / "memprobe"
        probe.mkdir()
        (probe / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(probe), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        os.environ["RAILYARD_MEMSOAK_TRACE"] = str(self.trace_dir)

    def _load(self) -> None:
        assert self.server.proc is not None
        pid = self.server.proc.pid
        began = time.monotonic()
        next_sample = began
        traced = 0
        while (now := time.monotonic()) < began + self.plan.seconds:
            if now >= next_sample:
                next_sample += self.plan.sample_every_s
                self.result.samples.append((now - began, rss_mib(pid), self.submitted))
            due_s = self.plan.warmup_s + 30.0 * traced
            if self.trace_dir is not None and traced < 2 and now - began >= due_s:
                os.kill(pid, signal.SIGUSR2)  # tracing starts; 30 s later, the first snapshot
                traced += 1
            self._one_round()
        self.result.samples.append((time.monotonic() - began, rss_mib(pid), self.submitted))
        if self.trace_dir is not None:
            os.kill(pid, signal.SIGUSR2)
            deadline = time.monotonic() + 120.0  # the dump takes a while on a loaded machine
            while len(list(self.trace_dir.glob("types-*.json"))) < 2:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.5)

    def _one_round(self) -> None:
        active = self.api.active_jobs()
        if active is not None and len(active) < self.plan.max_active:
            if self.rng.random() < 0.2:
                jobs = {"jobs": [self._spec() for _ in range(self.rng.randint(4, 12))]}
                made = self.api.json("POST", "/v1/jobs/batch", json=jobs) or []
            else:
                made = self.api.json("POST", "/v1/jobs", json=self._spec()) or []
            self.submitted += len(made)
            self.recent = (self.recent + [j["id"] for j in made])[-50:]
        if self.recent:
            self.api.call("GET", f"/v1/jobs/{self.rng.choice(self.recent)}")
        self.api.health()
        time.sleep(0.05)

    def _spec(self) -> dict[str, Any]:
        sleep_s = self.rng.uniform(0.05, 0.5)
        return {"gpus": self.rng.choice((1, 1, 2)), "name": "mem",
                "command": ["sh", "-c", f"sleep {sleep_s:.2f}"]}  # fmt: skip


def top_growth(
    trace_dir: Path, limit: int = 15, keep: Path | None = None
) -> list[tuple[str, float, int]]:
    """The allocations made after the warm-up that still lived at the end, biggest first,
    summed by the innermost railyard frame that made them (with the frame it was called
    from): where a map or cache of ours keeps them."""
    snaps = sorted(trace_dir.glob("snap-*.bin"))
    if not snaps:
        return []
    last = tracemalloc.Snapshot.load(str(snaps[-1]))
    if keep is not None:
        shutil.copyfile(snaps[-1], keep)
    first = tracemalloc.Snapshot.load(str(snaps[0])) if len(snaps) > 1 else None
    stats = last.compare_to(first, "traceback") if first is not None else [
        tracemalloc.StatisticDiff(s.traceback, s.size, s.size, s.count, s.count)
        for s in last.statistics("traceback")]  # fmt: skip
    sizes: dict[str, list[int]] = {}
    for stat in stats:
        ours = [i for i, f in enumerate(stat.traceback) if "/railyard/" in f.filename]
        first_ours = ours[-1] if ours else len(stat.traceback) - 1
        frames = [_short(f.filename, f.lineno) for f in stat.traceback][max(0, first_ours - 1) :]
        key = " < ".join(reversed(frames[:4] if ours else frames[-4:]))
        summed = sizes.setdefault(key, [0, 0])
        summed[0] += stat.size_diff
        summed[1] += stat.count_diff
    ranked = sorted(sizes.items(), key=lambda kv: -kv[1][0])[:limit]
    return [(where, size / 1024.0, count) for where, (size, count) in ranked]


def type_growth(trace_dir: Path, limit: int = 15) -> list[tuple[str, int]]:
    """Live objects by type: how many more at the last snapshot than at the first."""
    found = sorted(trace_dir.glob("types-*.json"))
    if len(found) < 2:
        return []
    first, last = (json.loads(p.read_text()) for p in (found[0], found[-1]))
    grown = {k: n - first.get(k, 0) for k, n in last.items()}
    return sorted(((k, n) for k, n in grown.items() if n > 0), key=lambda kv: -kv[1])[:limit]


def _short(filename: str, lineno: int) -> str:
    return f"{filename.split('/site-packages/')[-1].split('/src/')[-1]}:{lineno}"


def run_memory_soak(
    state_dir: Path,
    database_url: str | None,
    plan: MemoryPlan,
    trace_dir: Path | None = None,
    keep: Path | None = None,
) -> MemoryResult:
    soak = MemorySoak(state_dir, database_url, plan, trace_dir)
    soak.keep_snapshot = keep
    return soak.run()
