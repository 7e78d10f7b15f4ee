"""The soak: a real `railyard up` under seeded random load for a bounded time: single jobs,
batches and arrays of real short processes, cancels, holds and releases, node drains and
resumes, time limits, and kill -9 of the server at random moments (mid-request too); then the
chaos stops and every job must settle exactly once, with nothing stuck, no process outliving
its job, ``/healthz`` green and the store's own check clean (:mod:`soak_verdict`).

Used by ``tests/integration/test_soak.py`` (short) and ``benchmarks/soak.py`` (minutes).
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.server_proc import ServerProcess
from tests.integration.soak_client import Api, Tally
from tests.integration.soak_verdict import (
    Verdict,
    evidence,
    judge_runs,
    judge_store,
    mark_command,
    read_marks,
    read_store,
    tagged_processes,
)

STORM_GRACE_S = 60.0  # how much longer the chaos may go on for a storm or kill still owed


@dataclass(frozen=True)
class SoakPlan:
    """How hard and how long. ``max_active`` bounds the backlog so that it can drain; a
    storm is an array of ``storm_tasks`` submitted and cancelled a few seconds later (the
    store's bulk paths under the loop, as in issue 21), outside that bound."""

    seconds: float
    seed: int
    gpus: int = 8
    max_active: int = 40
    storm_tasks: int = 1000
    storm_every_s: float = 45.0
    kill_every_s: float = 15.0
    min_kills: int = 0  # kills the soak owes whatever the window (restarts slow on a busy host)
    settle_s: float = 180.0  # settling fails once no active job has changed state for this long
    settle_cap_s: float = 600.0  # and whatever the progress, after this long
    short_s: tuple[float, float] = (0.05, 0.8)
    sleeper_s: tuple[float, float] = (3.0, 12.0)


@dataclass
class SoakResult:
    store: str
    seed: int
    wall_s: float = 0.0
    actions: Counter[str] = field(default_factory=Counter)
    states: Counter[str] = field(default_factory=Counter)
    tally: Tally = field(default_factory=Tally)
    verdict: Verdict = field(default_factory=Verdict)
    settle_s: float = 0.0
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def clean(self) -> bool:
        return self.verdict.clean

    def summary(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "seed": self.seed,
            "wall_s": round(self.wall_s, 1),
            "jobs": sum(self.states.values()),
            "ranks_run": self.verdict.ranks_run,
            "kills": self.actions["kill"],
            "actions": dict(sorted(self.actions.items())),
            "states": dict(sorted(self.states.items())),
            "requests_lost_to_kills": self.tally.lost,
            "api_5xx": len(self.tally.errors_5xx),
            "healthz_failing_samples": sum(self.tally.health_failing.values()),
            "healthz_samples": self.tally.health_samples,
            "settle_s": round(self.settle_s, 1),
            "violations": self.verdict.violations,
            "errors_5xx": self.tally.errors_5xx[:10],
            "healthz_failing": dict(self.tally.health_failing),
            "evidence": self.evidence,
        }


class Soak:
    """One soak against one store; :meth:`run` returns its result and leaves nothing running."""

    def __init__(self, state_dir: Path, database_url: str | None, plan: SoakPlan) -> None:
        self.plan, self.rng = plan, random.Random(plan.seed)
        self.database_url = database_url
        self.server = ServerProcess(state_dir, gpus=plan.gpus, database_url=database_url)
        self.marks = state_dir / "marks"
        self.tag = secrets.token_hex(8)  # marks this soak's processes in /proc
        self.result = SoakResult("postgresql" if database_url else "sqlite", plan.seed)
        self.api = Api(self.server, self.result.tally)
        self.world: dict[str, int] = {}  # job id -> ranks it asked for
        self.arrays: list[str] = []
        self.storms: list[tuple[float, str]] = []  # (cancel at, monotonic s; array parent)
        self.finished: set[str] = set()  # seen settled: none of their processes may live
        self.outlived: set[str] = set()  # jobs named once for processes that outlived them
        self.node = ""
        self._killer: threading.Thread | None = None

    # -- the run ------------------------------------------------------------------------------

    def run(self) -> SoakResult:
        began = time.monotonic()
        self.marks.mkdir(parents=True)
        self.server.start()
        try:
            [node] = self.api.json("GET", "/v1/nodes")
            self.node = node["name"]
            self._chaos(began + self.plan.seconds)
            self._settle()
        finally:
            self._join_killer()
            self.server.stop()
            self.api.close()
            self._reap()
        self._judge()
        self.result.wall_s = time.monotonic() - began
        return self.result

    def _chaos(self, until: float) -> None:
        next_kill = time.monotonic() + self.rng.uniform(0.3, 1.0) * self.plan.kill_every_s
        next_health = 0.0
        next_storm = time.monotonic() + self.rng.uniform(0.2, 0.8) * self.plan.storm_every_s
        while time.monotonic() < until or self._owed(until):
            active = self.api.active_jobs()
            if active is None:  # the server is down: it is being restarted
                time.sleep(0.2)
                continue
            self._observe(active)
            if time.monotonic() >= next_health:
                self.api.health()
                next_health = time.monotonic() + 2.0
            self._act(active)
            due = time.monotonic() >= next_storm and self.plan.storm_tasks and not self.storms
            # One refused (the server was being killed) is tried again at the next turn, so a
            # short soak always has its storm.
            if due and self._storm():
                next_storm = time.monotonic() + self.rng.uniform(0.5, 1.5) * self.plan.storm_every_s
            kill_owed = (
                time.monotonic() >= until and self.result.actions["kill"] < self.plan.min_kills
            )
            if (time.monotonic() >= next_kill or kill_owed) and self._killer is None:
                self._kill_soon(self.rng.uniform(0.0, 0.4))
                next_kill = time.monotonic() + self.rng.uniform(0.5, 1.5) * self.plan.kill_every_s
            self._reap_killer()
            time.sleep(self.rng.uniform(0.02, 0.3))

    def _owed(self, until: float) -> bool:
        """A soak with storms has at least one, and its ``min_kills``: on a slow machine,
        restarts after kill -9 can take the whole window before the first storm or the second
        kill is due (the chaos then goes on, at most STORM_GRACE_S more, until they are taken)."""
        storm = bool(self.plan.storm_tasks) and not self.result.actions["storm"]
        kills = self.result.actions["kill"] < self.plan.min_kills
        return (storm or kills) and time.monotonic() < until + STORM_GRACE_S

    def _act(self, active: list[dict[str, Any]]) -> None:
        self._end_storms(time.monotonic())
        storming = {parent for _, parent in self.storms}
        room = sum(j["array_parent"] not in storming for j in active) < self.plan.max_active
        choices: list[tuple[str, float]] = [
            ("submit", 4.0 if room else 0.0),
            ("batch", 1.0 if room else 0.0),
            ("array", 1.5 if room else 0.0),
            ("cancel", 2.0),
            ("cancel_array", 0.5),
            ("hold", 1.5),
            ("release", 1.5),
            ("drain", 0.4),
            ("resume", 0.6),
        ]
        names, weights = zip(*choices, strict=True)
        action = self.rng.choices(names, weights)[0]
        getattr(self, f"_{action}")(active)

    # -- actions ------------------------------------------------------------------------------

    def _spec(self) -> dict[str, Any]:
        gpus = self.rng.choice((1, 1, 1, 2, 4))
        kind = self.rng.choices(("short", "sleeper", "overrun"), (8, 2, 0.5))[0]
        spec: dict[str, Any] = {"gpus": gpus, "env": {"SOAK_RUN": self.tag}, "name": kind}
        if kind == "short":
            sleep_s = self.rng.uniform(*self.plan.short_s)
        elif kind == "sleeper":
            sleep_s = self.rng.uniform(*self.plan.sleeper_s)
        else:  # past its time limit: the loop must stop it (TIMEOUT)
            sleep_s, spec["time"] = 30.0, "0:02"
        spec["command"] = mark_command(self.marks, sleep_s)
        return spec

    def _submitted(self, jobs: list[dict[str, Any]] | None, action: str) -> None:
        if jobs is None:
            return
        self.result.actions[action] += 1
        for job in jobs:
            self.world[job["id"]] = job["gpus"]

    def _submit(self, _: list[dict[str, Any]]) -> None:
        self._submitted(self.api.json("POST", "/v1/jobs", json=self._spec()), "submit")

    def _batch(self, _: list[dict[str, Any]]) -> None:
        batch = {"jobs": [self._spec() for _ in range(self.rng.randint(5, 30))]}
        self._submitted(self.api.json("POST", "/v1/jobs/batch", json=batch), "batch")

    def _array(self, _: list[dict[str, Any]]) -> None:
        spec = {**self._spec(), "gpus": 1}
        # a throttled array of long tasks runs one after another: keep its work within the settle
        size = self.rng.randint(4, 40 if spec["name"] == "short" else 8)
        throttle = f"%{self.rng.randint(1, 4)}" if self.rng.random() < 0.5 else ""
        spec["array"] = f"0-{size - 1}{throttle}"
        jobs = self.api.json("POST", "/v1/jobs", json=spec)
        if jobs:
            self.arrays.append(jobs[0]["array_parent"])
        self._submitted(jobs, "array")

    def _storm(self) -> bool:
        """Submit a storm's array; False when the server did not take it."""
        spec = {**self._spec(), "gpus": 1, "array": f"0-{self.plan.storm_tasks - 1}"}
        jobs = self.api.json("POST", "/v1/jobs", json=spec)
        if jobs:
            cancel_at = time.monotonic() + self.rng.uniform(1.0, 5.0)
            self.storms.append((cancel_at, jobs[0]["array_parent"]))
        self._submitted(jobs, "storm")
        return bool(jobs)

    def _end_storms(self, now: float) -> None:
        for cancel_at, parent in list(self.storms):
            if now >= cancel_at and self.api.json("DELETE", f"/v1/jobs/{parent}") is not None:
                self.storms.remove((cancel_at, parent))
                self.result.actions["cancel_storm"] += 1

    def _cancel(self, active: list[dict[str, Any]]) -> None:
        """Half the cancels aim at started jobs, which are few beside the pending ones."""
        started = [j for j in active if j["state"] != "pending"]
        pool = started if started and self.rng.random() < 0.5 else active
        if pool:
            job = self.rng.choice(pool)
            if self.api.json("DELETE", f"/v1/jobs/{job['id']}") is not None:
                self.result.actions[f"cancel_{job['state']}"] += 1

    def _cancel_array(self, _: list[dict[str, Any]]) -> None:
        if self.arrays and self.api.json("DELETE", f"/v1/jobs/{self.rng.choice(self.arrays)}"):
            self.result.actions["cancel_array"] += 1

    def _hold(self, active: list[dict[str, Any]]) -> None:
        pending = [j for j in active if j["state"] == "pending" and not j["hold"]]
        targets = [j["id"] for j in pending] + [
            j["array_parent"] for j in pending if j["array_parent"]
        ]
        if targets and self.api.json("POST", f"/v1/jobs/{self.rng.choice(targets)}/hold"):
            self.result.actions["hold"] += 1

    def _release(self, active: list[dict[str, Any]]) -> None:
        held = [j["id"] for j in active if j["hold"]]
        if held and self.api.json("POST", f"/v1/jobs/{self.rng.choice(held)}/release"):
            self.result.actions["release"] += 1

    def _drain(self, _: list[dict[str, Any]]) -> None:
        body = {"reason": "soak drain"}
        if self.api.json("POST", f"/v1/nodes/{self.node}/drain", json=body) is not None:
            self.result.actions["drain"] += 1

    def _resume(self, _: list[dict[str, Any]]) -> None:
        if self.api.json("POST", f"/v1/nodes/{self.node}/resume") is not None:
            self.result.actions["resume"] += 1

    # -- kill -9, from a thread so that it lands amid requests ---------------------------------

    def _kill_soon(self, delay_s: float) -> None:
        def kill() -> None:
            time.sleep(delay_s)
            self.server.kill9()
            self.server.start(any_health=True)

        self.result.actions["kill"] += 1
        self._killer = threading.Thread(target=kill, name="soak-kill9", daemon=True)
        self._killer.start()

    def _reap_killer(self) -> None:
        if self._killer is not None and not self._killer.is_alive():
            self._join_killer()

    def _join_killer(self) -> None:
        if self._killer is not None:
            self._killer.join(timeout=60)
            self._killer = None

    # -- watching -----------------------------------------------------------------------------

    def _observe(self, active: list[dict[str, Any]]) -> None:
        """Jobs known and not active are settled (states never leave a final one): after the
        list was read, none of their processes may still be alive."""
        self.finished |= set(self.world) - {j["id"] for j in active}
        outlived: dict[str, list[int]] = {}
        for pid, job_id in tagged_processes(self.tag).items():
            if job_id in self.finished:
                outlived.setdefault(job_id, []).append(pid)
        for job_id, pids in sorted(outlived.items()):
            if job_id not in self.outlived:
                self.outlived.add(job_id)
                line = f"job {job_id}: processes {sorted(pids)} alive after it settled"
                self.result.verdict.violations.append(line)

    def _settle(self) -> None:
        """Stop the chaos: resume the node, release every hold, wait for every job to end. A
        throttled array may take minutes to drain, so the wait is judged by progress: it fails
        when no job has started or ended for ``settle_s``."""
        self._join_killer()
        began = progressed = time.monotonic()
        cap = began + self.plan.settle_cap_s
        seen: set[tuple[str, str]] = set()
        while time.monotonic() < min(progressed + self.plan.settle_s, cap):
            self.api.call("POST", f"/v1/nodes/{self.node}/resume")
            self._end_storms(float("inf"))
            active = self.api.active_jobs()
            if active is None:
                time.sleep(0.5)
                continue
            self._observe(active)
            now_seen = {(j["id"], j["state"]) for j in active}
            if now_seen != seen:  # a job started or ended: the backlog is moving, not stuck
                seen, progressed = now_seen, time.monotonic()
            for job in active:
                if job["hold"]:
                    self.api.call("POST", f"/v1/jobs/{job['id']}/release")
            if not active:
                break
            time.sleep(0.5)
        self.result.settle_s = time.monotonic() - began
        self._observe([])
        health = None
        for _ in range(20):  # a restart's first steps may still be under way
            health = self.api.health()
            if health is not None and health[0] == 200:
                break
            time.sleep(0.5)
        if health is None or health[0] != 200:
            self.result.verdict.violations.append(f"/healthz not green at the end: {health}")
        nodes = self.api.json("GET", "/v1/nodes") or []
        held = [f"{n['name']} {n['gpus_used']} GPUs" for n in nodes if n["gpus_used"]]
        if held:
            self.result.verdict.violations.append(f"GPUs still held at the end: {held}")

    def _reap(self) -> None:
        """Kill whatever of ours still runs (a failed soak must not leave processes behind)."""
        for pid, job_id in tagged_processes(self.tag).items():
            self.result.verdict.violations.append(f"process {pid} of job {job_id} left running")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _judge(self) -> None:
        url = self.database_url or f"sqlite:///{self.server.state_dir.resolve()}/railyard.db"
        rows = read_store(url)
        self.result.states.update(state for state, _, _ in rows.jobs.values())
        self.result.verdict.violations += judge_store(rows)
        judge_runs(rows, read_marks(self.marks), self.world, self.result.verdict)
        self.result.evidence = evidence(rows, self.result.verdict.violations)


def run_soak(state_dir: Path, database_url: str | None, plan: SoakPlan) -> SoakResult:
    return Soak(state_dir, database_url, plan).run()
