"""``RayExecutor``: many machines through Ray; railyard places, Ray only runs.

The control plane connects to a Ray cluster as a driver. For each node of a placement it
starts a node agent (:mod:`railyard.exec.ray.rayagent`), pinned to that node, that launches the
ranks placed there with the local executor's contract; the first node's agent picks the
rendezvous port, so every rank gets ``MASTER_ADDR`` = the first node's address. Signals fan
out to every agent; a job's exit is reported when every node's share has ended, merged into
one outcome (a failure on one node stops the others, as a gang). An agent that dies with its
node makes the attempt a node failure (``NODE_FAIL``: requeued per the job's policy); the
node leaving Ray is seen by :func:`ray_nodes` and marked down by the control plane. Whatever
of that attempt still runs on a machine that lived on is ended there once the node answers a
probe again; an agent is let go only after it ended what it ran of its job.

Ray's public API only: actors with ``lifetime="detached"`` and names, custom resources to
pin them (``railyard_node:<name>``, declared by ``railyard join``), ``ray.nodes()``. Tested
with Ray 2.60 (``pip install 'railyard[ray]'``).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from railyard.exec.backend import Machine
from railyard.exec.cgroups.proctrack import KILL_TIMEOUT_S
from railyard.exec.exits import NODE_FAIL_SIGNAL
from railyard.exec.logread import LogRefused
from railyard.exec.protocol import (
    ExecutorError,
    ExitReport,
    JobHandle,
    LaunchSpec,
    Outcome,
    SharesChanged,
)
from railyard.exec.ray.rayagent import (
    FLAVOR_RESOURCE,
    GPUS_RESOURCE,
    NAMESPACE,
    NODE_RESOURCE,
    PIN,
    agent_name,
    remote_agent_class,
)
from railyard.exec.terminals.jobsocket import JobSocket, SocketUnreachable
from railyard.exec.terminals.relay import Opened, dial
from railyard.exec.usage import NodeReading, Placements

log = logging.getLogger("railyard.ray")
CALL_TIMEOUT_S = 120.0  # an agent's worker process starts in seconds; a loaded node, longer
POLL_TIMEOUT_S = 5.0
RELEASE_TIMEOUT_S = KILL_TIMEOUT_S + POLL_TIMEOUT_S  # a step killed and its groups removed
RELAY_TIMEOUT_S = 15.0  # one relay call; a new shell waits for its socket on the node


def ray_nodes(nodes: Iterable[dict[str, Any]] | None = None) -> list[Machine]:
    """The joined machines (`ray.nodes()` entries carrying a ``railyard_node:`` resource);
    a name seen alive and dead (a machine that rejoined) counts as alive."""
    if nodes is None:
        import ray

        nodes = ray.nodes()  # type: ignore[no-untyped-call]
    found: dict[str, Machine] = {}
    for entry in nodes:
        resources = entry.get("Resources") or {}
        names = [k[len(NODE_RESOURCE) :] for k in resources if k.startswith(NODE_RESOURCE)]
        if not names:
            continue
        flavors = [k[len(FLAVOR_RESOURCE) :] for k in resources if k.startswith(FLAVOR_RESOURCE)]
        node = Machine(
            name=names[0],
            gpus=int(resources.get(GPUS_RESOURCE, 0)),
            flavor=flavors[0] if flavors else "virtual",
            alive=bool(entry.get("Alive")),
            address=str(entry.get("NodeManagerAddress", "")),
        )
        if node.name not in found or node.alive:
            found[node.name] = node
    return sorted(found.values(), key=lambda n: n.name)


@dataclass
class _Job:
    spec_id: str
    restart_count: int
    agents: dict[str, Any]  # node -> actor handle
    handle: JobHandle  # its workers on every node (a lost node's share is ended from it)
    reports: dict[str, ExitReport | None] = field(default_factory=dict)
    stopping: bool = False
    containers: bool = False  # its tasks run in an image: `ready` asks when it was there
    ready: dict[str, float] = field(default_factory=dict)  # node -> its image ready there


class RayExecutor:
    """The executor protocol over node agents; one calling thread (the control plane's loop)."""

    def __init__(
        self,
        address: str | None = "auto",
        *,
        term_grace_s: float = 10.0,
        start_timeout_s: float = CALL_TIMEOUT_S,
    ) -> None:
        import ray

        self._ray = ray
        if not ray.is_initialized():
            ray.init(
                address=address,
                namespace=NAMESPACE,
                log_to_driver=False,
                logging_level=logging.ERROR,
            )
        self.term_grace_s = term_grace_s
        self.start_timeout_s = start_timeout_s
        self._agent_class = remote_agent_class()
        self._jobs: dict[str, _Job] = {}
        self._pending: list[ExitReport] = []
        self._ended_ready: dict[str, tuple[int, float]] = {}  # ended, not yet reported ready
        # Nodes whose agent died under a job: lost before Ray's health checks say so (GCS
        # takes seconds to minutes), so nothing is started there until a probe answers.
        self.suspect: set[str] = set()
        self._orphans: dict[str, list[JobHandle]] = {}  # node -> shares to end (`_orphaned`)
        self._changed: tuple[list[JobHandle], list[JobHandle]] = ([], [])  # `lost_shares`
        # Ray's own errors (a node slow or gone, the GCS unreachable) are expected and
        # counted per call here; any other error is a bug, and is raised.
        self._ray_failures = (ray.exceptions.RayError, ConnectionError)
        self.ray_errors: Counter[str] = Counter()

    def _failed(self, call: str, what: str, exc: BaseException, *, quiet: bool = False) -> None:
        """Count and log one of Ray's errors (``quiet``: at debug, for calls made each
        step or sample, where a node that is gone would fill the log)."""
        self.ray_errors[call] += 1
        level = logging.DEBUG if quiet else logging.WARNING
        log.log(level, "%s: %s failed: %s: %s", what, call, type(exc).__name__, exc)

    # -- the protocol ----------------------------------------------------------------------------

    def start(self, spec: LaunchSpec) -> JobHandle:
        """Start (or find) each node's agent, pick the port on the first node, launch every
        node's ranks; idempotent per attempt, like the local executor."""
        current = self._jobs.get(spec.job_id)
        if current is not None and current.restart_count != spec.restart_count:
            raise ExecutorError(f"job {spec.job_id} is still running another attempt")
        nodes = list(spec.placement)
        if self.suspect.intersection(nodes):  # placed before the node was seen down
            self._pending.append(_node_failure(spec.job_id, spec.restart_count))
            return JobHandle(job_id=spec.job_id, restart_count=spec.restart_count, workers=(),
                             master_port=0, preempt_signal=spec.preempt_signal)  # fmt: skip
        gpus = {n: max(spec.placement[n], default=-1) + 1 for n in nodes}
        agents = {n: self._agent(spec, n, gpus[n]) for n in nodes}
        ray = self._ray
        try:
            wait_s = self.start_timeout_s
            address, port = ray.get(agents[nodes[0]].endpoint.remote(), timeout=wait_s)
            wired = replace(spec, master_addr=address, master_port=port)
            parts = ray.get([agents[n].start.remote(wired) for n in nodes], timeout=wait_s)
        except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as exc:
            # A node that cannot start its share in time (gone, or its raylet stalled) is a
            # node failure, not the job's: reported by the next poll, requeued per policy.
            log.warning("job %s: a node did not start its share: %s", spec.job_id, exc)
            self._release(spec.job_id, agents.values())
            self._pending.append(_node_failure(spec.job_id, spec.restart_count))
            return JobHandle(job_id=spec.job_id, restart_count=spec.restart_count, workers=(),
                             master_port=0, preempt_signal=spec.preempt_signal)  # fmt: skip
        except Exception as exc:
            self._release(spec.job_id, agents.values())
            raise ExecutorError(f"job {spec.job_id}: start on Ray failed: {exc}") from exc
        handle = JobHandle(
            job_id=spec.job_id,
            restart_count=spec.restart_count,
            workers=tuple(w for part in parts for w in part.workers),
            master_port=port,
            preempt_signal=spec.preempt_signal,
            limits=parts[0].limits if parts else "",
            containers=tuple(name for part in parts for name in part.containers),
        )
        self._jobs[spec.job_id] = _Job(
            spec.job_id, spec.restart_count, agents, handle, dict.fromkeys(nodes),
            containers=spec.container is not None,
        )  # fmt: skip
        return handle

    def request_checkpoint_stop(self, job_id: str, grace_s: float) -> None:
        """Every node's ranks checkpoint and stop; one node's share ending first is the
        handshake going as asked, not a failure that stops the others."""
        job = self._jobs.get(job_id)
        if job is not None:
            job.stopping = True
        self._fan_out(job_id, "request_checkpoint_stop", grace_s)

    def cancel(self, job_id: str) -> None:
        job = self._jobs.get(job_id)
        if job is not None:
            job.stopping = True
        self._fan_out(job_id, "cancel")

    def signal(self, job_id: str, signal_name: str | None = None) -> None:
        self._fan_out(job_id, "signal", signal_name)

    def poll(self) -> list[ExitReport]:
        """Each agent's report of its share; a job is reported when every share has ended."""
        reports, self._pending = self._pending, []
        for job_id, job in list(self._jobs.items()):
            waiting = {n: a for n, a in job.agents.items() if job.reports.get(n) is None}
            refs = {n: a.poll.remote() for n, a in waiting.items()}
            for node, ref in refs.items():
                try:
                    found = self._ray.get(ref, timeout=POLL_TIMEOUT_S)
                except self._ray.exceptions.GetTimeoutError:
                    continue
                except self._ray.exceptions.RayActorError:  # the agent died with its node
                    found = [_node_failure(job_id, job.restart_count)]
                    self._orphaned(job, node)
                mine = [r for r in found if r.job_id == job_id]
                if mine:
                    job.reports[node] = mine[-1]
            ended = [r for r in job.reports.values() if r is not None]
            partial = bool(ended) and len(ended) < len(job.reports) and not job.stopping
            if partial and any(r.outcome is not Outcome.COMPLETED for r in ended):
                job.stopping = True  # one node's share failed: stop the gang
                self._fan_out(job_id, "cancel")
            if len(ended) == len(job.reports):
                ready_t_s = self._ready_job(job_id, job)  # a short job's nodes still say
                if ready_t_s is not None:
                    self._ended_ready[job_id] = (job.restart_count, ready_t_s)
                del self._jobs[job_id]
                reports.append(merge(job_id, job.restart_count, ended))
                self._release(job_id, job.agents.values())
        return reports

    def adopt(self, handles: Sequence[JobHandle]) -> list[ExitReport]:
        """Each attempt's agents by name, or a fresh agent on the node where one is gone (a
        control plane that polled the exit and let its agents go, then died before writing
        it): the node's exit records tell how the share ended. Only a share whose node is
        not in Ray, or does not answer, is a node failure, reported when the others end."""
        if not handles:
            return []
        alive = {n.name: n for n in ray_nodes() if n.alive}
        for handle in handles:
            if handle.job_id in self._jobs:
                continue
            nodes = list(dict.fromkeys(w.node for w in handle.workers))
            job = _Job(handle.job_id, handle.restart_count, {}, handle, {},
                       containers=bool(handle.containers))  # fmt: skip
            for node in nodes:
                if node not in alive:
                    job.reports[node] = _node_failure(handle.job_id, handle.restart_count)
                    self._orphaned(job, node)
                    continue
                agent = self._agent_of(handle.job_id, handle.restart_count, node,
                                       alive[node].gpus)  # fmt: skip
                part = replace(handle, workers=tuple(w for w in handle.workers
                                                     if w.node == node))  # fmt: skip
                try:
                    early = self._ray.get(agent.adopt.remote([part]),
                                          timeout=self.start_timeout_s)  # fmt: skip
                except (self._ray.exceptions.GetTimeoutError,
                        self._ray.exceptions.RayActorError) as exc:  # fmt: skip
                    log.warning("job %s: %s did not answer adoption: %s", handle.job_id,
                                node, exc)  # fmt: skip
                    self._kill(agent)
                    job.reports[node] = _node_failure(handle.job_id, handle.restart_count)
                    self._orphaned(job, node)
                    continue
                job.agents[node] = agent
                job.reports[node] = early[-1] if early else None
            self._jobs[handle.job_id] = job
        return []

    def running(self) -> set[str]:
        return set(self._jobs)

    def ready(self) -> dict[str, tuple[int, float]]:
        """Container jobs whose image every node's agent reports ready (the latest of them);
        see `ReportsReady`. Nodes that said so are not asked again."""
        out, self._ended_ready = self._ended_ready, {}
        for job_id, job in self._jobs.items():
            ready_t_s = self._ready_job(job_id, job)
            if ready_t_s is not None:
                out[job_id] = (job.restart_count, ready_t_s)
        return out

    def _ready_job(self, job_id: str, job: _Job) -> float | None:
        """When a container job's image was on all its nodes (the latest), asking the nodes
        that have not said so yet; None while one has not (or for a bare job)."""
        if not job.containers:
            return None
        asking = {n: a.ready.remote() for n, a in job.agents.items() if n not in job.ready}
        for node, ref in asking.items():
            try:
                found = self._ray.get(ref, timeout=POLL_TIMEOUT_S)
            except (self._ray.exceptions.GetTimeoutError,
                    self._ray.exceptions.RayActorError):  # fmt: skip
                continue  # poll finds a node gone
            mine = found.get(job_id)
            if mine is not None and mine[0] == job.restart_count:
                job.ready[node] = mine[1]
        if not job.agents or len(job.ready) < len(job.agents):
            return None
        return max(job.ready.values())

    def read_jobs(self, placements: Placements) -> dict[str, list[NodeReading]]:
        """Each node's agent reads its share of the job (`NodeAgent.sample`); asked all at
        once, from the sampler's thread (the job table is read, never changed, here). A
        node that does not answer in time is left out of this reading."""
        asked: list[tuple[str, Any]] = []
        for job_id, placement in placements.items():
            job = self._jobs.get(job_id)
            if job is None:
                continue
            for node, agent in list(job.agents.items()):
                asked.append((job_id, agent.sample.remote(job_id, tuple(placement.get(node, ())))))
        found: dict[str, list[NodeReading]] = {}
        deadline = time.monotonic() + POLL_TIMEOUT_S
        for job_id, ref in asked:
            try:
                reading = self._ray.get(ref, timeout=max(0.0, deadline - time.monotonic()))
            except self._ray_failures as exc:  # a node slow or gone: poll reports a lost one
                self._failed("sample", f"job {job_id}", exc, quiet=True)
                continue
            found.setdefault(job_id, []).append(reading)
        return found

    def probe(self, node: str, timeout_s: float = 2.0) -> bool:
        """Whether `node` runs an agent now (its log agent answers within `timeout_s`) and
        has ended what was left there of attempts lost with their agents: a node whose old
        ranks could not be ended yet takes no job (they hold its GPUs)."""
        try:
            agent = self._log_agent(node)
            self._ray.get(agent.endpoint.remote(), timeout=timeout_s)
        except self._ray_failures as exc:
            self._failed("probe", node, exc, quiet=True)
            with contextlib.suppress(*self._ray_failures):
                self._ray.kill(self._log_agent(node))  # a stale handle: make a fresh one
            return False
        return self._end_orphans(node, agent)

    def _orphaned(self, job: _Job, node: str) -> None:
        """`node` lost `job`'s share (its agent died, or was not there to adopt it): the node
        is suspect, so nothing is placed there until :meth:`probe` finds it answering, and
        the share is remembered, as its ranks live on if the machine did (its raylet
        restarted) with nothing to end them, until that probe ends them. The control plane
        keeps it in its store too (`KeepsLostShares`): a restart must not forget it."""
        self.suspect.add(node)
        mine = tuple(w for w in job.handle.workers if w.node == node)
        if mine and self._remember(node, replace(job.handle, workers=mine)):
            self._changed[0].append(replace(job.handle, workers=mine))

    def _remember(self, node: str, share: JobHandle) -> bool:
        """Add ``share`` to the node's shares to end; False: it was there already."""
        shares = self._orphans.setdefault(node, [])
        key = (share.job_id, share.restart_count)
        if any((s.job_id, s.restart_count) == key for s in shares):
            return False
        shares.append(share)
        return True

    def lost_shares(self) -> SharesChanged:
        """Shares lost and shares ended since the last call (`KeepsLostShares`)."""
        lost, ended = self._changed
        self._changed = ([], [])
        return SharesChanged(tuple(lost), tuple(ended))

    def remember_lost(self, shares: Sequence[JobHandle]) -> None:
        """Shares a previous control plane lost (read from its store): their nodes are
        suspect until a probe has ended them."""
        for share in shares:
            for node in dict.fromkeys(w.node for w in share.workers):
                self.suspect.add(node)
                self._remember(node, replace(share, workers=tuple(
                    w for w in share.workers if w.node == node)))  # fmt: skip

    def _end_orphans(self, node: str, agent: Any) -> bool:
        """End the node's lost shares; False: they were not (tried again at the next probe,
        and the node stays suspect meanwhile)."""
        shares = self._orphans.get(node)
        if not shares:
            return True
        try:
            self._ray.get(agent.discard_shares.remote(shares), timeout=RELEASE_TIMEOUT_S)
        except self._ray_failures as exc:
            self._failed("discard_shares", node, exc)
            return False
        del self._orphans[node]
        self._changed[1].extend(shares)
        return True

    # -- logs of ranks on other machines ---------------------------------------------------------

    def read_log(
        self,
        node: str,
        path: str,
        offset: int,
        limit: int,
        user: str | None = None,
        outputs: str | None = None,
        anchor: str | None = None,
    ) -> tuple[bytes, int] | None:
        """Read a log file on `node` through that node's log agent (one long-lived agent per
        node, so logs stay readable after the job's agents are gone), as `user` and only a
        file the job's wrapper recorded in `outputs` (see :mod:`railyard.exec.logread`);
        None: no file, or the node cannot be reached. LogRefused: the file is not shown."""
        try:
            agent = self._log_agent(node)
            found: tuple[bytes, int] | str | None = self._get(
                agent.read.remote(path, offset, limit, user, outputs, anchor)
            )
        except self._ray_failures as exc:
            self._failed("read_log", node, exc)
            return None
        if isinstance(found, str):
            raise LogRefused(found)
        return found

    # -- sockets of jobs on other machines ------------------------------------------------------

    def open_socket(self, target: JobSocket, wait_s: float) -> socket.socket:
        """A byte stream to a job's socket on its node, through the attempt's agent there (a
        one-shot relay, :mod:`railyard.exec.terminals.relay`): the agent connects with the checks
        the
        control plane makes on its own machine. A terminal not listening yet is asked for
        again for ``wait_s``. Any thread may call it (the API's): it reads no executor state,
        and it finds the agent by name, never starting one, so an attempt that ended has
        none. Raises :class:`SocketUnreachable`, one line why."""
        assert target.node is not None
        ray = self._ray
        name = agent_name(target.job_id, target.restart_count, target.node)
        try:
            agent = ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            raise SocketUnreachable(f"it has no agent on {target.node} (it ended there)") from None
        deadline = time.monotonic() + wait_s
        while True:
            try:
                found: Opened | tuple[str, bool] = ray.get(agent.relay.remote(target),
                                                           timeout=RELAY_TIMEOUT_S)  # fmt: skip
            except (ray.exceptions.GetTimeoutError, ray.exceptions.RayActorError) as exc:
                log.warning("job %s: %s did not open a relay: %s", target.job_id,
                            target.node, type(exc).__name__)  # fmt: skip
                raise SocketUnreachable(f"its node {target.node} did not answer") from None
            if isinstance(found, Opened):
                try:
                    return dial(found)
                except OSError as exc:
                    raise SocketUnreachable(f"its node {target.node}'s relay refused "
                                            f"({exc.strerror or exc})") from None  # fmt: skip
            why, retry = found
            if not retry or time.monotonic() >= deadline:
                raise SocketUnreachable(f"{why}, on {target.node}", retry=retry)
            time.sleep(0.02)

    # -- internals -------------------------------------------------------------------------------

    def _agent(self, spec: LaunchSpec, node: str, gpus: int) -> Any:
        return self._agent_of(spec.job_id, spec.restart_count, node, gpus)

    def _agent_of(self, job_id: str, restart_count: int, node: str, gpus: int) -> Any:
        """The attempt's agent on `node`: the running one by name, else a new one there."""
        name = agent_name(job_id, restart_count, node)
        return self._agent_class.options(
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            resources={f"{NODE_RESOURCE}{node}": PIN},
        ).remote(node, gpus, self.term_grace_s)

    def _log_agent(self, node: str) -> Any:
        """The node's long-lived agent for reading its logs and answering probes."""
        return self._agent_class.options(
            name=f"railyard-logs-{node}",
            namespace=NAMESPACE,
            lifetime="detached",
            get_if_exists=True,
            resources={f"{NODE_RESOURCE}{node}": PIN},
        ).remote(node, 0, self.term_grace_s)

    def _get(self, refs: Any) -> Any:
        return self._ray.get(refs, timeout=CALL_TIMEOUT_S)

    def _fan_out(self, job_id: str, method: str, *args: Any) -> None:
        job = self._jobs.get(job_id)
        if job is None:
            return
        refs = [getattr(a, method).remote(job_id, *args) for a in job.agents.values()]
        try:
            self._ray.wait(refs, num_returns=len(refs), timeout=POLL_TIMEOUT_S)
        except self._ray_failures as exc:  # an agent gone with its node: poll reports it
            self._failed(method, f"job {job_id}", exc)

    def _release(self, job_id: str, agents: Iterable[Any]) -> None:
        """Let an attempt's agents go: each first kills what it still runs of the job (a share
        started where another node's never did, its grace not over) and removes its groups,
        all at once and for RELEASE_TIMEOUT_S at most (an agent gone with its node never
        answers); a killed agent no longer polls, so nothing would end them after."""
        agents = list(agents)
        refs = [agent.discard.remote(job_id) for agent in agents]
        try:
            self._ray.wait(refs, num_returns=len(refs), timeout=RELEASE_TIMEOUT_S)
        except self._ray_failures as exc:
            self._failed("discard", f"job {job_id}", exc)
        for agent in agents:
            self._kill(agent)

    def _kill(self, agent: Any) -> None:
        with contextlib.suppress(*self._ray_failures):  # already gone with its node
            self._ray.kill(agent)


_RANK = {Outcome.FAILED: 0, Outcome.LOST: 1, Outcome.KILLED: 2, Outcome.PREEMPTED: 3,
         Outcome.COMPLETED: 4}  # fmt: skip


def _node_failure(job_id: str, restart_count: int) -> ExitReport:
    return ExitReport(
        job_id=job_id,
        exit_code=None,
        signal=NODE_FAIL_SIGNAL,
        outcome=Outcome.FAILED,
        restart_count=restart_count,
    )


def merge(job_id: str, restart_count: int, parts: Sequence[ExitReport]) -> ExitReport:
    """One job's outcome from its nodes' shares: a node failure first, then the worst share
    (failed, lost, killed, preempted, completed)."""
    lost_node = [p for p in parts if p.signal == NODE_FAIL_SIGNAL]
    if lost_node:
        return lost_node[0]
    worst = min(parts, key=lambda p: _RANK[p.outcome])
    return replace(worst, job_id=job_id, restart_count=restart_count)
