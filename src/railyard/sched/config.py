"""Scheduler configuration: policies chosen by name, plus a few numeric knobs."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from railyard.sched.policies import ADMISSION, BACKFILL, ORDERING, PLACEMENT, PREEMPTION


@dataclass(frozen=True)
class SchedulerConfig:
    """Owners pick a behaviour by name: strict FIFO, fair share, fair share with backfill...

    - `starvation_limit_s`: a job waiting longer (its time run in earlier attempts not
      counted: `model.starving_since_t_s`) moves ahead of all non-starving jobs and, if
      it still cannot start, holds back later jobs of its flavor (with a reservation when
      estimates allow one).
    - `promotion_wait_ratio`: under `las`, a job that has run and has since waited (in all)
      at least this many times the time it ran ranks on the first service level, pending or
      running, until its run time catches up (Tiresias' promotion, NSDI 2019): its waiting
      bounded by its own size (None: never promoted; see `policies/las.py`).
    - `default_walltime_s`: used for reservations when a job has no estimate (None: such
      jobs count as never ending).
    - `max_reservations`: reservations per flavor for conservative backfill and for
      starving jobs.
    - `exact_victim_search_max`: candidate pools up to this size are searched exhaustively
      for the cheapest victims; larger ones greedily.
    - `preemption_searches_per_cycle` / `_per_queue`: victim searches allowed per cycle, in
      all and per leaf queue (a preemption-storm brake, like Kueue trying only each queue's
      head per cycle); later jobs try again next cycle.
    - `fairshare_half_life_s`: for the driver's `accrue_usage` calls, so one config
      describes the whole policy.
    - `priority_preemption_min`: jobs of at least this priority may preempt by priority in
      any queue (a priority class opt-in; queues opt in with `Queue.priority_preemption`).
    - `service_levels_gpu_s`, `time_slice_quantum_s`: the `las` policy's queue thresholds
      (GPU-seconds) and the least time a job runs before it may be sliced.
    - `time_slice_by`: what `las` ranks by, `attained` service (Tiresias' 2D-LAS) or the
      GPU-seconds a job's time limit leaves it, `remaining` (shortest first; a job under no
      limit is cut on its attained service).
    - `starved_unsliced_s`: how long an attempt that began after its job waited out the
      starvation limit runs before `las` may slice it (None: to its end).
    - `starving_slices`: under `las`, a starving job slices any sliceable job, whatever
      its level (False: only jobs on a higher level, the rule `las-r2` and `las-r3` of
      benchmarks/compare_policies.py keep).
    - `unsliced_after_s`: under `las`, a job that has run this long in all (its attempts
      together) is not sliced again: it runs to its end (None: sliced however long it has
      run). The longest jobs set the p99 JCT, and under attained service every newcomer
      slices them (issue 56). Off by default: on Gavel's Philly VCs a day (with a 7-day
      starvation limit) kept every p99 within 1.02x fairshare+easy's, but mean JCT rose
      1.04-2.0x over the defaults' (docs/explanation/scheduler.md, "On public traces").
    - `slice_level_gap`: under `las`, a job slices only running jobs at least this many
      service levels above its own (1: any higher level, Tiresias' rule). Issue 56: with 3
      (`TIME_SLICING_DEFAULTS`) a job a level or two past a newcomer is not sliced for it,
      and gangs that had just come back after waiting days for a whole node were sliced
      again minutes later less often; on Gavel's Philly VCs the worst p99 JCT fell from
      1.70x to 1.50x fairshare+easy's with mean JCT within 2.2% of gap 1's on every trace
      (on the synthetic gangs of `compare_policies.py` mean JCT rose 3-4% on the Gavel
      profile at loads 1.2-1.5 and the 8-GPU gangs' p99 1-12%).
    - `unsliced_after_restarts`: under `las`, a job stopped and restarted this many times
      (`Job.restart_count`: sliced, preempted, requeued) is not sliced again: it runs to its
      end (None: no bound, the default). Reclaims and priority preemption are not bounded by
      it. Issue 56: the longest jobs of Gavel's Philly VCs were sliced 3-66 times each and set
      `las`'s p99; 6, chosen on the tune traces, cut the worst p99 JCT there from 1.50x to
      1.38x fairshare+easy's, but on Alibaba's openb (two nodes) long 1-GPU jobs no longer
      sliced kept the 8-GPU tasks waiting out the starvation limit: p99 30 -> 303 h, mean
      2.5 -> 6.6 h. Off by default (docs/explanation/scheduler.md).
    - `restart_cost_s`: what restarting an evicted job costs, in seconds on each of its GPUs
      (rescheduling, loading, reading its checkpoint back): added to the work it would lose
      since its last checkpoint, it is what an eviction costs when victims are chosen.
    - `eviction_max_loss`: a time slice (`las`) evicts a job only if that cost is at most
      this share of all the service the job has had (None: any cost); evictions a job is
      owed (reclaim, priority) are not bounded, only ordered by it. Both off by default
      (issue 56, `las` on Gavel's Philly VC b436b2: with `--checkpoint none`, 0.25 and 300 s
      cut what its evictions threw away from 49% to 4% of the useful GPU-hours and mean JCT
      from 80 to 71 h; with Young-interval checkpoints, saved when signalled, the work since
      the last periodic one is not lost, yet counted, and mean JCT rose from 21 to 25 h).
    - `kill_wait_s`: how long a job past its time limit takes to be killed (Slurm's
      `KillWait`, 30 s by default); read by reservations and by the lifecycle.
    - `greedy_hold_after_s`: under backfill `none` (greedy), a job blocked this long (a day
      by default) gets a reservation as EASY's head would (None: never before it starves):
      greedy lets later jobs take every gap, so a whole node never freed for a job behind a
      stream of small ones until the starvation limit, seven days. On the Philly-profile
      trace of the README (5,000 jobs, load 1.0) the day's hold cut `fifo-greedy`'s mean JCT
      of 9-64-GPU gangs from 148.8 to 67.5 h and its mean JCT from 8.34 to 8.17 h (time
      slicing, `las`, holds after 6 h: `TIME_SLICING_DEFAULTS`).
    - `estimate_from_history`: drivers hand the cycle run-time predictions from each
      queue's completed jobs, used where a job has no time limit (`limits.Estimates`).
    - `history_refresh_s`: how often those predictions may change (`history.RuntimeHistory`;
      0: at the first step after each completion), the same in both drivers.
    """

    ordering: str = "fairshare"
    admission: str = "quota"
    placement: str = "fabric-aware"
    backfill: str = "easy"
    preemption: str = "on"
    starvation_limit_s: float = 7 * 24 * 3600.0
    promotion_wait_ratio: float | None = None
    default_walltime_s: float | None = None
    max_reservations: int = 16
    exact_victim_search_max: int = 8
    preemption_searches_per_cycle: int = 16
    preemption_searches_per_queue: int = 1
    fairshare_half_life_s: float = 7 * 24 * 3600.0
    priority_preemption_min: int | None = None
    # Tiresias (NSDI 2019) uses two queues; its threshold is tuned per trace. Chosen by
    # benchmarks/compare_policies.py over 1, 24 and finer ladders (TIME_SLICING_DEFAULTS).
    service_levels_gpu_s: tuple[float, ...] = (3600.0, 8 * 3600.0, 64 * 3600.0)
    time_slice_quantum_s: float = 600.0
    time_slice_by: str = "attained"
    starved_unsliced_s: float | None = 0.0
    starving_slices: bool = True
    unsliced_after_s: float | None = None
    slice_level_gap: int = 1
    unsliced_after_restarts: int | None = None
    restart_cost_s: float = 0.0
    eviction_max_loss: float | None = None
    kill_wait_s: float = 30.0
    greedy_hold_after_s: float | None = 86_400.0
    estimate_from_history: bool = True
    history_refresh_s: float = 0.0

    def __post_init__(self) -> None:
        ORDERING.get(self.ordering)
        ADMISSION.get(self.admission)
        PLACEMENT.get(self.placement)
        BACKFILL.get(self.backfill)
        PREEMPTION.get(self.preemption)
        if not self.starvation_limit_s > 0:
            raise ValueError("starvation_limit_s must be > 0 (use math.inf to disable aging)")
        budgets = (self.preemption_searches_per_cycle, self.preemption_searches_per_queue)
        if min(self.max_reservations, *budgets) < 1:
            raise ValueError("max_reservations and preemption search budgets must be >= 1")
        if self.slice_level_gap < 1:
            raise ValueError("slice_level_gap must be >= 1")
        restarts = self.unsliced_after_restarts
        if restarts is not None and restarts < 0:
            raise ValueError("unsliced_after_restarts must be >= 0, or None")
        if self.exact_victim_search_max < 0:
            raise ValueError("exact_victim_search_max must be >= 0")
        if self.default_walltime_s is not None and not 0 < self.default_walltime_s < math.inf:
            raise ValueError("default_walltime_s must be a positive finite number or None")
        levels = self.service_levels_gpu_s
        if any(not 0 < x < math.inf for x in levels) or list(levels) != sorted(set(levels)):
            raise ValueError("service_levels_gpu_s must be increasing positive finite numbers")
        if self.time_slice_by not in TIME_SLICE_BY:
            raise ValueError(f"time_slice_by must be one of {', '.join(TIME_SLICE_BY)}")
        starved = self.starved_unsliced_s
        if starved is not None and not 0 <= starved < math.inf:
            raise ValueError("starved_unsliced_s must be a finite number >= 0, or None")
        for name in ("greedy_hold_after_s", "unsliced_after_s"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0, or None")
        ratio = self.promotion_wait_ratio
        if ratio is not None and not 0 < ratio < math.inf:
            raise ValueError("promotion_wait_ratio must be a finite number > 0, or None")
        loss = self.eviction_max_loss
        if loss is not None and not 0 <= loss < math.inf:
            raise ValueError("eviction_max_loss must be a finite number >= 0, or None")
        for name in ("time_slice_quantum_s", "kill_wait_s", "history_refresh_s", "restart_cost_s"):
            if not 0 <= getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a finite number >= 0")

    @classmethod
    def of(cls, **fields: Any) -> SchedulerConfig:
        """A config whose unnamed knobs take the defaults of its preemption policy: time
        slicing (`las`) gets `TIME_SLICING_DEFAULTS`, the others the field defaults. The live
        server (`railyard up`) and the simulator's presets both build it this way."""
        if fields.get("preemption") == "las":
            fields = {**TIME_SLICING_DEFAULTS, **fields}
        return cls(**fields)


TIME_SLICE_BY = ("attained", "remaining")

TIME_SLICING_DEFAULTS: dict[str, Any] = {
    # Chosen by benchmarks/compare_policies.py --choose (1-8-GPU gangs; Gavel-, Philly- and
    # Helios-profile traces; loads 0.8-1.5). One victim search per queue let each queue slice
    # in one gang a cycle; 16 let the cycle's budget (16, as for every policy) go where the
    # least-served jobs are. A search walks every running job: one cycle with 10,000 pending
    # costs 336 M instructions at 2,048 GPUs (226 M at the last round's knobs) and 1,320 M
    # at 16,384 (729 M); 64 searches a cycle cost 766 M and 3,783 M (bench_sched_instructions.py).
    "preemption_searches_per_queue": 16,
    # A gang blocked 6 h holds what it needs, as EASY's head would: without it the smaller
    # jobs that always fit first took every GPU freed, and the gang waited to be sliced in.
    "greedy_hold_after_s": 6 * 3600.0,
    # Shortest remaining (by time limit) first on ten levels doubling from 1 GPU-hour, and a
    # starved attempt runs to its end: chosen by --choose over attained service, the coarse
    # ladder and slicing starved jobs, among the knobs whose 8-GPU gangs' p99 stays within
    # 15% of fairshare+easy's. Slicing starved jobs too cut mean JCT further (1.47x and
    # 2.49x lower than `las-r2` on the Gavel profile at loads 1.2 and 1.5, against 1.32x and
    # 1.71x) but left those gangs' p99 1.4-1.5x fairshare+easy's: `--starved-unsliced 0`.
    # Since then a starving job slices in over any level (`starving_slices`): 1.30x and
    # 1.62x, with those gangs' p99 at 0.98x fairshare+easy's (1.07-1.08x before).
    "time_slice_by": "remaining",
    "service_levels_gpu_s": tuple(3600.0 * 2**i for i in range(10)),
    "starved_unsliced_s": None,
    # Two weeks of waiting, not one (issue 56): starvation reads the time a job waited, less
    # the time it ran (`model.starving_since_t_s`). On Gavel's Philly-derived traces at load
    # 1 (`benchmarks/compare_policies.py --traces`, the two "tune" slices), 7 days put most
    # waiting jobs in the starving tier, run oldest first to their end: FIFO again (mean JCT
    # 345 h against FIFO's 363 h on one, p99 777 h); 14 days: 285 h with the p99 at 770 h,
    # under fairshare+easy's 785 h; 21 and 30 days cut the mean to 239 and 208 h but let the
    # p99 go to 836 and 967 h; none at all, 193 h and 1,194 h.
    "starvation_limit_s": 14 * 86_400.0,
    # A job slices only jobs three or more levels above its own (issue 56): chosen on the two
    # tune traces of `compare_policies.py --traces-only` (gap 1 / 2 / 3 / 4: mean JCT 283.7 /
    # 283.5 / 279.3 / 290.3 h, p99 777 / 760 / 764 / 757 h on gavel-0e4a51-s0; 160.8 / 161.0 /
    # 160.8 / 164.1 h, 2,198 / 2,196 / 2,194 / 2,180 h on gavel-6214e9-s0), the one no worse
    # than gap 1 in either; on the held-out four the worst p99 fell from 1.70x to 1.50x
    # fairshare+easy's, mean JCT within +2.2% (docs/explanation/scheduler.md).
    "slice_level_gap": 3,
}
