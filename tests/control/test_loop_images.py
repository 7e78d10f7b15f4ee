"""Container jobs in the live loop (issue 24): the start says "pulling", the executor's
report that the image is on the nodes says "running" and starts the time limit, and the
nodes that got the image are preferred by the next job of that image.

The machines are the simulator's virtual executor (as in test_world_cache.py) with a pull
of PULL_S seconds before each container job's work and `ReportsReady` on top; the live
executors' side (the wrapper's ready marker) is tested in tests/exec/test_containers.py."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from tests.control.loop_helpers import add_job

from railyard.control.loop.service import Loop, LoopConfig
from railyard.control.store.database import Store
from railyard.control.store.tables import Counter, EventRow, JobRow, NodeRow, QueueRow, User
from railyard.exec.protocol import JobHandle, LaunchSpec, ReportsReady
from railyard.sched import SchedulerConfig
from railyard.sim.checkpoints import CheckpointPolicy, IntervalRule
from railyard.sim.engine import Engine
from railyard.sim.executor import VirtualExecutor
from railyard.sim.workload import FinalState

FLAVOR = "H100"
IMAGE = "registry.example/train:1"
PULL_S = 50.0


class Pulling(VirtualExecutor):
    """Container jobs wait PULL_S before their work, and say when it is over."""

    def __init__(self, engine: Engine) -> None:
        super().__init__(engine, CheckpointPolicy(rule=IntervalRule.NONE, restart_s=0))
        self.images: set[str] = set()
        self.began: dict[str, tuple[int, float]] = {}

    def start(self, spec: LaunchSpec, setup_s: float = 0.0) -> JobHandle:
        pull_s = PULL_S if spec.job_id in self.images else 0.0
        self.began[spec.job_id] = (spec.restart_count, self.engine.now_t_s + pull_s)
        return super().start(spec, setup_s=pull_s)

    def ready(self) -> dict[str, tuple[int, float]]:
        now, running = self.engine.now_t_s, self.running()
        return {j: b for j, b in self.began.items()
                if j in self.images and j in running and b[1] <= now}  # fmt: skip


def _world(store: Store, tmp_path: Path) -> tuple[Loop, Engine, Pulling]:
    with store.session() as s:
        for name in ("n0", "n1"):
            s.add(NodeRow(name=name, flavor=FLAVOR, gpus=4, path=["su0", "lg0"], updated_t_s=0.0))
        s.add(User(id=1, name="admin", is_admin=True, created_t_s=0.0))
        s.add(User(id=2, name="alice", created_t_s=0.0))
        s.add(QueueRow(name="root", nominal_gpus={}, created_t_s=0.0))
        s.flush()
        s.add(QueueRow(name="default", parent="root", nominal_gpus={FLAVOR: 8}, created_t_s=0.0))
        s.add(Counter(name="job", value=0))
    engine = Engine()
    executor = Pulling(engine)
    assert isinstance(executor, ReportsReady)
    scheduler = SchedulerConfig(estimate_from_history=False)
    loop = Loop(store, executor, LoopConfig(state_dir=tmp_path, scheduler=scheduler),
                clock=lambda: engine.now_t_s)  # fmt: skip
    return loop, engine, executor


def _job(store: Store, executor: Pulling, t_s: float, work_s: float, gpus: int,
         image: str | None = None, walltime_s: float | None = None) -> str:  # fmt: skip
    job_id = add_job(store, ["x"], flavor=FLAVOR, gpus_per_worker=gpus, submit_t_s=t_s,
                     updated_t_s=t_s, image=image, walltime_s=walltime_s)  # fmt: skip
    executor.register(job_id, work_s, gpus, FinalState.COMPLETED)
    if image is not None:
        executor.images.add(job_id)
    return job_id


def _step(loop: Loop, engine: Engine, executor: Pulling, t_s: float) -> None:
    """The world up to `t_s` (jobs finish), then one step of the loop at `t_s`."""
    engine.run(lambda _t, ev: executor.on_event(ev), until_t_s=t_s)
    engine.now_t_s = t_s
    loop.step()


def _row(store: Store, job_id: str) -> JobRow:
    with store.session() as s:
        row = s.get(JobRow, job_id)
        assert row is not None
        s.expunge(row)
        return row


def _events(store: Store, job_id: str) -> list[tuple[str, str]]:
    with store.session() as s:
        rows = s.execute(select(EventRow.kind, EventRow.message).where(EventRow.job_id == job_id)
                         .order_by(EventRow.id))  # fmt: skip
        return [(k, m) for k, m in rows]


def test_pull_then_run_the_limit_from_ready_and_the_next_job_where_the_image_is(
    store: Store, tmp_path: Path
) -> None:
    loop, engine, executor = _world(store, tmp_path)
    filler = _job(store, executor, 0.0, 200.0, 4)  # takes n0
    _step(loop, engine, executor, 1.0)
    assert _row(store, filler).placement == {"n0": [0, 1, 2, 3]}
    # 60 s of work, a 100 s limit, and a 50 s pull: it ends at 111, past start + limit (102)
    pulled = _job(store, executor, 1.0, 60.0, 1, image=IMAGE, walltime_s=100.0)
    _step(loop, engine, executor, 2.0)
    row = _row(store, pulled)
    assert row.placement == {"n1": [0]}
    assert row.run_t_s is None
    kinds = [k for k, _ in _events(store, pulled)]
    assert kinds[-2:] == ["start", "pulling"]
    with store.session() as s:
        assert s.get(NodeRow, "n1").images == [IMAGE]  # type: ignore[union-attr]
        assert s.get(NodeRow, "n0").images is None  # type: ignore[union-attr]
    _step(loop, engine, executor, 30.0)
    assert _row(store, pulled).run_t_s is None  # still pulling
    _step(loop, engine, executor, 60.0)
    row = _row(store, pulled)
    assert row.run_t_s == 52.0
    assert _events(store, pulled)[-1] == ("running", "image ready after 50.0 s; running")
    _step(loop, engine, executor, 105.0)  # past start + limit, not past ready + limit
    assert _row(store, pulled).state == "running"
    for t_s in (112.0, 205.0):
        _step(loop, engine, executor, t_s)
    assert _row(store, pulled).state == "completed"
    assert _row(store, filler).state == "completed"
    # Both nodes are free now: a whole-node job of that image goes where it already is.
    again = _job(store, executor, 210.0, 10.0, 4, image=IMAGE)
    plain = _job(store, executor, 210.0, 10.0, 4)
    _step(loop, engine, executor, 211.0)
    assert list(_row(store, again).placement or {}) == ["n1"]
    assert list(_row(store, plain).placement or {}) == ["n0"]


def test_a_bare_script_s_container_steps_may_mount_its_queue_s_prefixes(
    store: Store, tmp_path: Path
) -> None:
    """`srun --container-image` in a bare batch script (exec.task.stepd) keeps to the prefixes of
    the job's queue when it starts; a command job gets none, a container job its own."""
    loop, engine, executor = _world(store, tmp_path)
    specs: dict[str, LaunchSpec] = {}
    start = executor.start

    def recording(spec: LaunchSpec, setup_s: float = 0.0) -> JobHandle:
        specs[spec.job_id] = spec
        return start(spec, setup_s)

    executor.start = recording  # type: ignore[method-assign]
    with store.session() as s:
        queue = s.get(QueueRow, "default")
        assert queue is not None
        queue.container_mounts = ["/datasets", "/scratch"]
    script = _job(store, executor, 0.0, 10.0, 1)
    with store.session() as s:
        row = s.get(JobRow, script)
        assert row is not None
        row.script = "#!/bin/bash\nsrun --container-image=img true\n"
    command = _job(store, executor, 0.0, 10.0, 1)
    _step(loop, engine, executor, 1.0)
    assert specs[script].batch
    assert specs[script].container is None
    assert specs[script].container_allowed == ("/datasets", "/scratch")
    assert specs[command].container_allowed == ()
