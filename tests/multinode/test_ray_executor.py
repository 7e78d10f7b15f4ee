"""The Ray executor on a local 3-node Ray cluster: a 2-node x 2-GPU job gets the launch
contract on every rank (and a real gloo rendezvous across the nodes' agents), cancel reaches
every rank on every node, a node that dies fails the attempt as a node failure, a new
executor adopts running attempts by their agents' names."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from railyard.control.loop.lostshares import LostShareBook
from railyard.control.store.database import Store, sqlite_url
from railyard.control.store.tables import LostShareRow
from railyard.exec.cgroups import proctrack
from railyard.exec.exits import NODE_FAIL_SIGNAL, exit_of
from railyard.exec.protocol import ExitReport, Outcome
from railyard.exec.ray.raybackend import _unless_lost
from railyard.exec.ray.rayexec import RayExecutor, merge, ray_nodes
from railyard.sched.lifecycle import ExitKind
from tests.exec.exec_helpers import py, spec
from tests.multinode.conftest import LocalRay

# A Ray cluster of its own (a minute to start): the extended tier, with the other Ray modules;
# .ci/run runs it on every landing.
pytestmark = [pytest.mark.long, pytest.mark.slow, pytest.mark.heavy]

ENV_SCRIPT = """
import json, os, sys
keys = ["NODE_RANK", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
        "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "SLURM_NODEID", "SLURM_PROCID"]
env = {k: os.environ.get(k) for k in keys}
try:
    import torch.distributed as dist
    dist.init_process_group("gloo")  # torchrun's env:// rendezvous on MASTER_ADDR:PORT
    import torch
    t = torch.ones(1)
    dist.all_reduce(t)
    env["ALLREDUCE"] = float(t.item())
    dist.destroy_process_group()
except ImportError:
    env["ALLREDUCE"] = None
with open(os.path.join(sys.argv[1], "rank-%s.json" % env["RANK"]), "w") as f:
    json.dump(env, f)
"""


def wait_report(executor: RayExecutor, job_id: str, timeout_s: float = 120.0) -> ExitReport:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for report in executor.poll():
            if report.job_id == job_id:
                return report
        time.sleep(0.2)
    raise AssertionError(f"{job_id} not reported in {timeout_s} s")


def test_two_nodes_two_gpus_each_get_the_contract(local_ray: LocalRay, tmp_path: Path) -> None:
    executor = RayExecutor()
    out = tmp_path / "out"
    out.mkdir()
    job = spec(tmp_path, py(ENV_SCRIPT, str(out)), job_id="env", workers=2, gpus_per_worker=2,
               placement={"n2": (0, 1), "n3": (0, 1)},
               env={"PATH": os.environ["PATH"]})  # fmt: skip
    handle = executor.start(job)
    assert {w.node for w in handle.workers} == {"n2", "n3"}
    report = wait_report(executor, "env")
    assert report.outcome is Outcome.COMPLETED, report
    ranks = {int(r["RANK"]): r for r in (json.loads(p.read_text()) for p in out.glob("*.json"))}
    assert sorted(ranks) == [0, 1, 2, 3]
    n2_address = next(n.address for n in ray_nodes() if n.name == "n2")
    for rank, env in ranks.items():
        assert env["WORLD_SIZE"] == "4"
        assert env["NODE_RANK"] == str(rank // 2)  # n2 first: ranks 0-1, then n3: 2-3
        assert env["LOCAL_RANK"] == str(rank % 2)
        assert env["LOCAL_WORLD_SIZE"] == "2"
        assert env["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert env["MASTER_ADDR"] == n2_address
        assert env["MASTER_PORT"] == str(handle.master_port)
        assert env["SLURM_NODEID"] == str(rank // 2)
    if any(env["ALLREDUCE"] is not None for env in ranks.values()):
        assert {env["ALLREDUCE"] for env in ranks.values()} == {4.0}
    assert not executor.running()


def test_cancel_reaches_every_rank_on_every_node(local_ray: LocalRay, tmp_path: Path) -> None:
    executor = RayExecutor()
    out = tmp_path / "out"
    out.mkdir()
    trap = (
        "import os, signal, sys, time\n"
        "def bye(*_):\n"
        "    open(os.path.join(sys.argv[1], os.environ['RANK']), 'w').close(); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "open(os.path.join(sys.argv[1], 'up-' + os.environ['RANK']), 'w').close()\n"
        "time.sleep(600)\n"
    )
    job = spec(tmp_path, py(trap, str(out)), job_id="cancel", workers=2, gpus_per_worker=1,
               placement={"n1": (0,), "n3": (1,)})  # fmt: skip
    executor.start(job)
    deadline = time.monotonic() + 60
    while len(list(out.glob("up-*"))) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    executor.cancel("cancel")
    report = wait_report(executor, "cancel")
    assert report.outcome is Outcome.KILLED
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith("up-")) == ["0", "1"]


def test_a_node_that_dies_fails_the_attempt_as_a_node_failure(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    executor = RayExecutor()
    job = spec(tmp_path, py("import time; time.sleep(600)"), job_id="lost", workers=2,
               gpus_per_worker=1, placement={"n1": (0,), "n3": (0,)})  # fmt: skip
    executor.start(job)
    groups = executor_groups(executor, "lost", "n3")
    local_ray.remove("n3")  # the raylet and its agent die with the machine ...
    for pgid in groups:  # ... and so would the ranks on it
        os.killpg(pgid, signal.SIGKILL)
    report = wait_report(executor, "lost")
    assert report.signal == NODE_FAIL_SIGNAL
    assert exit_of(report).kind is ExitKind.NODE_FAIL
    assert "n3" not in {n.name for n in ray_nodes() if n.alive}
    local_ray.add("n3")
    local_ray.cluster.wait_for_nodes()
    deadline = time.monotonic() + 60
    while not executor.probe("n3"):  # back: what its share left there is removed
        assert time.monotonic() < deadline
    assert not step_groups(tmp_path, "lost", "n3")


def test_a_new_executor_adopts_running_attempts(local_ray: LocalRay, tmp_path: Path) -> None:
    first = RayExecutor()
    job = spec(tmp_path, py("import time; time.sleep(3)"), job_id="adopt", workers=2,
               gpus_per_worker=1, placement={"n1": (1,), "n2": (1,)})  # fmt: skip
    handle = first.start(job)
    second = RayExecutor()  # the control plane after a restart: same agents, by name
    assert second.adopt([handle]) == []
    assert second.running() == {"adopt"}
    report = wait_report(second, "adopt")
    assert report.outcome is Outcome.COMPLETED


def test_an_attempt_reported_but_not_recorded_is_adopted_from_its_exit_files(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    """The control plane polled the exit (and let the agents go), then died before its write:
    the next one must find the attempt ended, from the exit records on the node, and never
    call it a node failure (which would run the job again)."""
    first = RayExecutor()
    job = spec(tmp_path, py("pass"), job_id="told", workers=2, gpus_per_worker=1,
               placement={"n1": (0,), "n3": (1,)})  # fmt: skip
    handle = first.start(job)
    assert wait_report(first, "told").outcome is Outcome.COMPLETED  # agents gone with it
    second = RayExecutor()
    second.adopt([handle])
    report = wait_report(second, "told")
    assert report.signal != NODE_FAIL_SIGNAL
    assert report.outcome is Outcome.COMPLETED


def test_outcomes_merge_worst_first() -> None:
    def r(outcome: Outcome, sig: str | None = None) -> ExitReport:
        return ExitReport(job_id="j", exit_code=0, signal=sig, outcome=outcome)

    assert merge("j", 1, [r(Outcome.COMPLETED), r(Outcome.FAILED)]).outcome is Outcome.FAILED
    assert merge("j", 1, [r(Outcome.PREEMPTED), r(Outcome.COMPLETED)]).outcome is (
        Outcome.PREEMPTED
    )
    lost = merge("j", 1, [r(Outcome.KILLED), r(Outcome.FAILED, NODE_FAIL_SIGNAL)])
    assert lost.signal == NODE_FAIL_SIGNAL
    assert merge("j", 1, [r(Outcome.COMPLETED)]).restart_count == 1


def executor_groups(executor: RayExecutor, job_id: str, node: str) -> list[int]:
    import ray

    agent = executor._jobs[job_id].agents[node]
    return list(ray.get(agent.process_groups.remote()))


if sys.platform != "linux":  # pragma: no cover
    pytest.skip("process groups and /proc: Linux only", allow_module_level=True)


def test_the_checkpoint_handshake_reaches_every_rank_on_every_node(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    executor = RayExecutor()
    out = tmp_path / "out"
    out.mkdir()
    saver = (
        "import os, signal, sys, time\n"
        "def save(*_):\n"
        "    time.sleep(3 * int(os.environ['RANK']))  # one node saves later than the other\n"
        "    open(os.path.join(sys.argv[1], 'saved-' + os.environ['RANK']), 'w').close()\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGUSR1, save)\n"
        "open(os.path.join(sys.argv[1], 'up-' + os.environ['RANK']), 'w').close()\n"
        "time.sleep(600)\n"
    )
    job = spec(tmp_path, py(saver, str(out)), job_id="preempt", workers=2, gpus_per_worker=1,
               placement={"n2": (0,), "n1": (1,)})  # fmt: skip
    executor.start(job)
    deadline = time.monotonic() + 60
    while len(list(out.glob("up-*"))) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    executor.request_checkpoint_stop("preempt", grace_s=30)
    report = wait_report(executor, "preempt")
    assert report.outcome is Outcome.PREEMPTED
    assert sorted(p.name for p in out.glob("saved-*")) == ["saved-0", "saved-1"]


def test_a_node_that_cannot_start_its_share_is_a_node_failure(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    executor = RayExecutor(start_timeout_s=3.0)
    job = spec(tmp_path, py("pass"), job_id="stuck", workers=2, gpus_per_worker=1,
               placement={"n1": (0,), "gone": (0,)})  # no machine joined as "gone"  # fmt: skip
    handle = executor.start(job)
    assert handle.workers == ()
    report = wait_report(executor, "stuck", timeout_s=30)
    assert report.signal == NODE_FAIL_SIGNAL
    assert exit_of(report).kind is ExitKind.NODE_FAIL


HOLD = """
import os, sys, time
held = bytearray(48 * 2**20)
for i in range(0, len(held), 4096):
    held[i] = 1
open(os.path.join(sys.argv[1], "ready-" + os.environ["RANK"]), "w").close()
time.sleep(120)
"""


def test_each_nodes_agent_reads_its_share_of_a_job(local_ray: LocalRay, tmp_path: Path) -> None:
    """The sampler's readings of a job on Ray nodes: each node's agent measures its own ranks
    (two per node here, 48 MiB each), and a job not running reads as nothing."""
    executor = RayExecutor()
    placement = {"n2": (0, 1), "n3": (0, 1)}
    executor.start(spec(tmp_path, py(HOLD, str(tmp_path)), job_id="held", workers=2,
                        gpus_per_worker=2, placement=placement))  # fmt: skip
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < 4:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    try:
        found = executor.read_jobs({"held": placement, "absent": {"n2": (2,)}})
        assert set(found) == {"held"}
        by_node = {r.node: r for r in found["held"]}
        assert set(by_node) == {"n2", "n3"}
        for reading in by_node.values():
            assert reading.usage is not None
            assert reading.usage.processes == 2  # its ranks there, not their wrappers
            assert reading.usage.rss_bytes >= 2 * 48 * 2**20
            assert reading.gpus == ()  # no NVML on these nodes
    finally:
        executor.cancel("held")
        wait_report(executor, "held")


def step_groups(tmp_path: Path, job_id: str, node: str) -> list[Path]:
    """The groups of a job's share on `node` left in any mounted hierarchy of this machine
    (the step is named from the node's records directory, as `spec` places it)."""
    step = proctrack.step_name(job_id, 0, tmp_path / "logs" / job_id / node)
    return sorted(Path("/sys/fs/cgroup").glob(f"*/railyard/{step}"))


def alive(pid_file: Path) -> bool:
    pid = int(pid_file.read_text())
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


IGNORE_TERM = """
import os, sys, time
with open(os.path.join(sys.argv[1], "pid-" + os.environ["RANK"]), "w") as f:
    f.write(str(os.getpid()))
time.sleep(600)
"""


def ignoring_term(out: str) -> tuple[str, ...]:
    """A rank that ignores SIGTERM from its first instruction (the shell's trap is inherited
    through exec): a handler installed by Python itself could come after a prompt cancel."""
    return ("/bin/sh", "-c", 'trap "" TERM; exec "$0" -c "$1" "$2"', sys.executable,
            IGNORE_TERM, out)  # fmt: skip


def test_a_gang_that_did_not_start_everywhere_leaves_nothing_where_it_did(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    """The share that started on a good node, while another node never started its own, is
    killed there with its step's groups before its agent goes: a rank ignoring SIGTERM did
    outlive that agent (its grace ends in a poll that never came) and kept its groups. The
    start waits 20 s for the node that never answers: n1 must start its agent and its rank
    within it, which took over 8 s in CI's extended tier (three workers on two cores)."""
    executor = RayExecutor(start_timeout_s=20.0)
    job = spec(tmp_path, ignoring_term(str(tmp_path)), job_id="halfway", workers=2,
               gpus_per_worker=1, placement={"n1": (1,), "gone": (0,)})  # fmt: skip
    assert executor.start(job).workers == ()
    report = wait_report(executor, "halfway", timeout_s=30)
    assert report.signal == NODE_FAIL_SIGNAL
    pid_file = tmp_path / "pid-0"
    assert pid_file.exists(), "n1's share never started: the test proves nothing"
    deadline = time.monotonic() + 10
    while alive(pid_file) or step_groups(tmp_path, "halfway", "n1"):
        assert time.monotonic() < deadline, step_groups(tmp_path, "halfway", "n1")
        time.sleep(0.1)


def test_a_share_whose_agent_died_on_a_live_node_ends_when_the_node_answers(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    """An agent that dies while its machine lives on (its raylet restarted, say) fails the
    attempt as a node failure, but its ranks ran on with nothing to end them; once the node
    answers a probe (what the backend asks of a suspect node before placing on it again),
    they are killed there with their step's groups."""
    import ray

    executor = RayExecutor(term_grace_s=1.0)
    job = spec(tmp_path, ignoring_term(str(tmp_path)), job_id="orphan", workers=2,
               gpus_per_worker=1, placement={"n1": (0,), "n2": (0,)})  # fmt: skip
    executor.start(job)
    deadline = time.monotonic() + 60
    while not (tmp_path / "pid-1").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert step_groups(tmp_path, "orphan", "n2")  # named as the node names them
    ray.kill(executor._jobs["orphan"].agents["n2"])
    report = wait_report(executor, "orphan")
    assert report.signal == NODE_FAIL_SIGNAL
    assert "n2" in executor.suspect
    assert not alive(tmp_path / "pid-0")  # n1's share ended with its own agent
    assert alive(tmp_path / "pid-1"), "n2's rank died with its agent: the test proves nothing"
    deadline = time.monotonic() + 60
    while not executor.probe("n2"):  # the backend probes a suspect node every cycle
        assert time.monotonic() < deadline
    deadline = time.monotonic() + 10
    while alive(tmp_path / "pid-1") or step_groups(tmp_path, "orphan", "n2"):
        assert time.monotonic() < deadline, step_groups(tmp_path, "orphan", "n2")
        time.sleep(0.1)


def test_a_share_on_a_node_gone_at_adoption_ends_when_the_node_answers(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    """A control plane restarted while a node was out of Ray: the node's share is a node
    failure, the node suspect (nothing placed there), and once it is back and answers a
    probe, the ranks that ran on there are killed with their groups."""
    first = RayExecutor()
    job = spec(tmp_path, ignoring_term(str(tmp_path)), job_id="adrift", workers=2,
               gpus_per_worker=1, placement={"n1": (1,), "n3": (1,)})  # fmt: skip
    handle = first.start(job)
    deadline = time.monotonic() + 60
    while not (tmp_path / "pid-1").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    local_ray.remove("n3")  # its raylet and agent die; the machine (this one) lives on
    second = RayExecutor(term_grace_s=1.0)
    second.adopt([handle])
    assert "n3" in second.suspect
    report = wait_report(second, "adrift")
    assert report.signal == NODE_FAIL_SIGNAL
    assert alive(tmp_path / "pid-1"), "n3's rank died with its raylet: the test proves nothing"
    local_ray.add("n3")
    local_ray.cluster.wait_for_nodes()
    deadline = time.monotonic() + 60
    while not second.probe("n3"):
        assert time.monotonic() < deadline
    deadline = time.monotonic() + 10
    while alive(tmp_path / "pid-1") or step_groups(tmp_path, "adrift", "n3"):
        assert time.monotonic() < deadline, step_groups(tmp_path, "adrift", "n3")
        time.sleep(0.1)


def test_a_lost_share_outlives_a_control_plane_restart_in_the_store(
    local_ray: LocalRay, tmp_path: Path
) -> None:
    """Issue 55: a node's agent dies while its rank lives on, the attempt is settled as a node
    failure, and the control plane restarts before the node answered a probe. The lost share
    was in the old executor's memory alone, so the new one took the node as soon as Ray listed
    it and placed the next attempt beside the old rank on the same GPUs. Now the share is in
    the store: the new executor gets it back, keeps the node down while the rank lives, and
    the probe that finds the node answering kills it first; then the row goes."""
    import ray

    store = Store(sqlite_url(tmp_path / "railyard.db"))
    first = RayExecutor(term_grace_s=1.0)
    book = LostShareBook(store, first)
    job = spec(tmp_path, ignoring_term(str(tmp_path)), job_id="kept", workers=2,
               gpus_per_worker=1, placement={"n1": (0,), "n2": (0,)})  # fmt: skip
    first.start(job)
    deadline = time.monotonic() + 60
    while not (tmp_path / "pid-1").exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    ray.kill(first._jobs["kept"].agents["n2"])
    assert wait_report(first, "kept").signal == NODE_FAIL_SIGNAL
    book.sync(time.time())  # the loop's step, before it settles that exit
    assert alive(tmp_path / "pid-1"), "n2's rank died with its agent: the test proves nothing"
    del first, book  # the control plane restarts
    second = RayExecutor(term_grace_s=1.0)
    restarted = LostShareBook(store, second)
    with store.session() as session:
        assert restarted.restore(session) == 1
    n2 = next(n for n in ray_nodes() if n.name == "n2")
    assert n2.alive  # Ray lists it: before the fix, the node took jobs again at once
    deadline = time.monotonic() + 60
    while not _unless_lost(second, n2).alive:  # the backend's rule, every refresh
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert not alive(tmp_path / "pid-1"), "the node took jobs while the old rank still ran"
    assert "n2" not in second.suspect
    restarted.sync(time.time())
    with store.session() as session:
        assert session.scalars(select(LostShareRow)).all() == []
    store.close()
