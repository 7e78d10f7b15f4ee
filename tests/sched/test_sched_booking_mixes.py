"""The booking kept between cycles under mixes of CPU-only and GPU jobs (issue 52, item 4): a
queue's GPU count reaching 0 while a CPU-only job of the same (queue, flavor) was still booked
made the next removal raise KeyError, and every later loop step failed. Each property below
drives a random history of starts, ends, cancels, requeues and array tasks through the booking
and the cycle, and compares with a booking made from scratch."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st
from sched_fakes import flat_queues, job, nodes, running, state
from test_sched_properties import NOW, SETTINGS

from railyard.sched import CycleCache, RunningJob, SchedulerConfig, cycle
from railyard.sched.cache import Booking
from railyard.sched.snapshot import Topology


def test_a_gpu_job_ending_before_a_cpu_job_of_its_queue_leaves_the_booking_usable() -> None:
    inventory = [replace(n, cpu_cores=8) for n in nodes(1, gpus=4)]
    gpu = running(job("g", gpus=1), "n0:0")
    cpu = RunningJob(job("c", gpus=0, cpus_per_worker=1), {"n0": ()}, 0.0)
    booking = Booking(Topology(inventory))
    booking.update([gpu, cpu])
    booking.update([cpu])
    booking.update([])  # raised KeyError: ('a', 'H100-SXM-80GB')
    assert booking.usage == {}
    assert booking.entries == {}
    assert booking.free_cpu == [8]


def from_scratch(topo: Topology, run: list[RunningJob]) -> Booking:
    fresh = Booking(topo)
    fresh.update(run)
    return fresh


def assert_same(kept: Booking, fresh: Booking) -> None:
    assert kept.used == fresh.used
    assert kept.free_cpu == fresh.free_cpu
    assert kept.free_mem == fresh.free_mem
    assert {k: v for k, v in kept.usage.items() if v} == {k: v for k, v in fresh.usage.items() if v}
    assert all(v > 0 for v in kept.usage.values()), kept.usage
    assert kept.run_masks == fresh.run_masks
    assert kept.run_loads == fresh.run_loads
    assert kept.running == fresh.running


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["start", "start", "array", "end", "cancel", "requeue"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=40,
)


def _new_job(pick: int) -> tuple[int, int, int]:
    """(gpus, cpus, mem_gb) of the next job: a third CPU-only, some with cores and memory."""
    gpus = (0, 0, 1, 2, 1, 4)[pick % 6]
    cpus = (0, 1, 2)[(pick // 6) % 3]
    mem_gb = (0, 0, 8)[(pick // 18) % 3]
    return gpus, cpus, mem_gb


def drive(events: list[tuple[str, int]]) -> None:
    """Apply `events` to a running set, checking the kept booking against a fresh one each time,
    and the cycle with a kept cache against one without."""
    inventory = [replace(n, cpu_cores=16, mem_gb=256.0) for n in nodes(3, gpus=4)]
    queue_names = ["a", "b"]
    queues = flat_queues({"a": 6, "b": 6})
    topo = Topology(inventory)
    kept = Booking(topo)
    cache = CycleCache()
    free = {n.name: set(range(n.gpus)) for n in inventory}
    cores = {n.name: 16 for n in inventory}
    run: dict[str, RunningJob] = {}
    seq = 0

    def place(j_id: str, gpus: int, cpus: int, mem_gb: int, queue: str) -> None:
        for name in sorted(free):
            if len(free[name]) >= gpus and cores[name] >= cpus:
                take = tuple(sorted(free[name])[:gpus])
                free[name] -= set(take)
                cores[name] -= cpus
                made = job(j_id, queue, gpus=gpus, cpus_per_worker=cpus, mem_per_worker_gb=mem_gb)
                run[j_id] = RunningJob(made, {name: take}, float(seq))
                return

    def remove(j_id: str) -> RunningJob:
        r = run.pop(j_id)
        for name, gpus in r.placement.items():
            free[name] |= set(gpus)
            cores[name] += r.job.cpus_per_worker
        return r

    for kind, pick in events:
        seq += 1
        queue = queue_names[pick % 2]
        if kind in ("start", "array"):
            for k in range(3 if kind == "array" else 1):  # an array's alike tasks
                gpus, cpus, mem_gb = _new_job(pick)
                place(f"j{seq}_{k}", gpus, cpus, mem_gb, queue)
        elif run and kind in ("end", "cancel"):
            remove(sorted(run)[pick % len(run)])
        elif run and kind == "requeue":  # the same id starts again elsewhere
            r = remove(sorted(run)[pick % len(run)])
            place(r.id, r.job.gpus_per_worker, r.job.cpus_per_worker,
                  int(r.job.mem_per_worker_gb), r.job.queue)  # fmt: skip
        now = sorted(run.values(), key=lambda r: r.id)
        kept.update(now)
        assert_same(kept, from_scratch(topo, now))
        s = state(inventory, queues, [job("p", "a", gpus=2, submit_t_s=0.0)], now)
        config = SchedulerConfig()
        assert cycle(s, NOW, config, cache) == cycle(s, NOW, config)


@SETTINGS
@given(EVENTS)
def test_random_mixes_of_cpu_and_gpu_jobs_book_as_from_scratch(events) -> None:
    drive(events)


def test_the_reported_sequence_of_cpu_job_gpu_array_and_cpu_array() -> None:
    """`sleep 40` as a CPU job, then a GPU array and a CPU array in the same queue, the GPU
    array ending first: the sequence the review met."""
    drive([("start", 0), ("array", 2), ("array", 6), ("end", 1), ("end", 1), ("end", 1),
           ("end", 0), ("end", 0), ("end", 0), ("end", 0)])  # fmt: skip
