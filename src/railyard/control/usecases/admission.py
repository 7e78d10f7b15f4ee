"""Admission: every check a job must pass before it is stored, and the column values its
rows share. ``jobs.submit`` and ``jobs.submit_many`` store what :func:`admit` returns; a
batch admits each job first and stores them all in one statement per table.

The submission arrives parsed (:mod:`railyard.control.submission`); what its queue says is
:mod:`.queuerules`, what it books and whether the cluster could hold it :mod:`.booking`.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from railyard.client.bounds import MAX_SUBMIT_STORED_BYTES
from railyard.control.errors import Forbidden, Invalid
from railyard.control.store.bulk import queue_settings
from railyard.control.store.paths import default_output
from railyard.control.store.tables import ACTIVE_STATES, HOLD_REASONS, JobRow, JobState, User
from railyard.control.submission import MAX_BATCH_JOBS, JobSubmit
from railyard.control.usecases.accounts import RunAs
from railyard.control.usecases.apps import app_env
from railyard.control.usecases.booking import book
from railyard.control.usecases.containers import admit_container
from railyard.control.usecases.queuerules import DEFAULT_SIGNAL, default_partition, queue_terms
from railyard.control.usecases.sizebounds import DEFAULT_LIMITS, SiteLimits
from railyard.control.usecases.workdirs import enters_directory


def _check_workdir(workdir: str, account: pwd.struct_passwd | None) -> None:
    """A job must be able to start where it asks to: an absolute directory its account can
    enter, asked as that account (`workdirs`: root's answer told whether paths exist where
    the user cannot look)."""
    if not workdir:
        return
    if not os.path.isabs(workdir):
        raise Invalid("workdir", f"{workdir!r} is not an absolute path", "give the full path")
    if not enters_directory(account, workdir):
        who = f"Unix account {account.pw_name!r}" if account is not None else "this server"
        raise Invalid(
            "workdir",
            f"no directory {workdir!r} that {who} can enter on the node",
            "create it first, or give that account search (x) permission on it",
        )


def _check_stored(spec: JobSubmit, tasks: int) -> None:
    stored = spec.stored_bytes * tasks
    if stored > MAX_SUBMIT_STORED_BYTES:
        raise Invalid(
            "script" if spec.script else "command",
            f"{tasks} tasks x {spec.stored_bytes} bytes of command, env and script is over "
            f"{MAX_SUBMIT_STORED_BYTES} bytes",
            "put large inputs in a file the job reads, or submit fewer tasks",
        )


def check_dependency(session: Session, actor: User, wanted: frozenset[str]) -> None:
    """Every job a dependency names (``wanted``) must exist (a job id, or an array's number),
    as sbatch refuses with "Job dependency problem": a typo would otherwise wait forever.
    Another user's job is "no job" too (admins excepted), as for `show`: whether it exists
    and when it ends is not this user's to learn."""
    if not wanted:
        return
    stmt = select(JobRow.id, JobRow.array_parent).where(
        or_(JobRow.id.in_(wanted), JobRow.array_parent.in_(wanted))
    )
    if not actor.is_admin:
        stmt = stmt.where(JobRow.user_id == actor.id)
    found = session.execute(stmt)
    missing = wanted - {i for row in found for i in row if i is not None}
    if missing:
        raise Invalid(
            "dependency",
            f"no job {', '.join(sorted(missing, key=lambda i: (len(i), i)))}",
            "name jobs that were submitted (railyard queue --all, railyard history)",
        )


@dataclass(frozen=True)
class Admitted:
    """A job that passed every check: the values its rows share (all but number and ids) and
    its array indices (None for one job)."""

    common: dict[str, Any]
    indices: list[int] | None
    spec: JobSubmit

    @property
    def count(self) -> int:
        return len(self.indices) if self.indices is not None else 1


def admit(
    session: Session,
    user: User,
    spec: JobSubmit,
    now_t_s: float,
    *,
    known_flavors: set[str] | None = None,
    run_as: RunAs | None = None,
    limits: SiteLimits = DEFAULT_LIMITS,
    count_jobs: bool = True,
) -> Admitted:
    """Check ``spec`` for ``user`` (raises Invalid, Forbidden) and compute its stored columns.

    ``run_as`` None skips the Unix-account check (an embedded API with no executor);
    ``limits`` are the site's bounds on a job's size (``sizebounds``). sbatch's ``-p
    gpu,debug``: the job goes to the first listed partition that admits it (one the user may
    use, whose nodes could ever hold it). Slurm takes the one that can start it earliest; the
    first that could ever run it is railyard's simpler, stable choice. When none admits it,
    the first one's refusal is the answer. ``count_jobs`` False: the caller has counted the
    user's jobs with this one (a batch counts all of its own once)."""
    _check_request(session, user, spec, run_as)
    if count_jobs:
        check_jobs_per_user(session, user, len(spec.array.indices) if spec.array else 1, limits)
    partitions = list(dict.fromkeys(spec.queue.split(",")))
    if len(partitions) > 1:  # those whose MaxTime its --time exceeds last: it never starts there
        partitions.sort(key=lambda name: not _time_fits(session, spec, name))
    refusals: list[Invalid | Forbidden] = []
    for name in partitions:
        try:
            return _admit_to(session, user, spec, name, now_t_s, known_flavors, run_as, limits)
        except (Invalid, Forbidden) as exc:
            if len(partitions) == 1:
                raise
            refusals.append(exc)
    raise refusals[0]


def _time_fits(session: Session, spec: JobSubmit, partition: str) -> bool:
    """Whether the job's time limit is within the partition's MaxTime (it has none, or the job
    asks none): ``-p short,default --time 1-0`` went to ``short`` (MaxTime 10 minutes), where
    it waited for ever with PartitionTimeLimit, where Slurm runs it in ``default``."""
    row = queue_settings(session, default_partition(session, partition))
    bound = row.max_time_s if row is not None else None
    return spec.time is None or bound is None or spec.time <= bound


def check_jobs_per_user(session: Session, user: User, tasks: int, limits: SiteLimits) -> None:
    """A plain user's jobs pending or running, array tasks one by one, with ``tasks`` more, stay
    within the site's bound (Slurm's MaxSubmitJobsPerUser; admins are not bound)."""
    if user.is_admin:
        return
    most = limits.max_jobs_per_user
    if tasks > most:
        active = 0  # no need to count: this request alone is over
    else:
        stmt = select(func.count()).select_from(JobRow)
        stmt = stmt.where(JobRow.user_id == user.id, JobRow.state.in_(ACTIVE_STATES))
        active = session.scalar(stmt) or 0
    if active + tasks > most:
        raise Forbidden(
            f"user {user.name!r} has {active} jobs pending or running; {tasks} more would be "
            f"over this site's limit of {most} per user (railyard up --max-jobs-per-user)",
            hint="wait for some to end, or cancel some (railyard cancel -u USER -t PD)",
        )


def _check_request(session: Session, user: User, spec: JobSubmit, run_as: RunAs | None) -> None:
    """What holds whichever queue takes the job: its user may run jobs here, its working
    directory exists, an interactive job is no array, the jobs it depends on exist, and its
    rows are not too large to store."""
    account = None
    if run_as is not None:
        run_as.check(user.name, user.unix_user, is_admin=user.is_admin)
        if run_as.multi_user and spec.workdir:
            account = run_as.account(user.name, user.unix_user)
    _check_workdir(spec.workdir, account)
    tasks = len(spec.array.indices) if spec.array is not None else 1
    if spec.terminal and spec.array is not None:
        raise Invalid("terminal", "an interactive job (or an app) is one job, not an array",
                      "railyard run [options] -- CMD")  # fmt: skip
    if spec.dependency is not None:
        check_dependency(session, user, spec.dependency.job_ids)
    _check_stored(spec, tasks)


def _admit_to(
    session: Session,
    user: User,
    spec: JobSubmit,
    partition: str,
    now_t_s: float,
    known_flavors: set[str] | None,
    run_as: RunAs | None,
    limits: SiteLimits,
) -> Admitted:
    """:func:`admit` to ``partition``, one of those ``spec`` lists (a parent: its default
    sub-queue)."""
    queue = default_partition(session, partition)
    if queue != spec.queue:
        spec = spec.model_copy(update={"queue": queue})
    terms = queue_terms(session, user, spec)
    booked = book(session, spec, pool=terms.pool, known_flavors=known_flavors, limits=limits)
    res, job = booked.resources, booked.job
    indices = spec.array.indices if spec.array is not None else None
    output = spec.output
    if output is None and spec.script is not None:
        output = default_output(indices is not None)
    common = {
        "user_id": user.id,
        "unix_user": user.unix_user,
        "queue": spec.queue,
        "name": spec.name,
        "state": JobState.PENDING.value,
        "hold": "user" if spec.hold else None,
        "reason": HOLD_REASONS["user"] if spec.hold else "",
        "script": spec.script,
        "workdir": spec.workdir,
        "submit_dir": spec.submit_dir or spec.workdir,
        "submit_host": spec.submit_host,
        "export": spec.export,
        "env": dict(spec.env) | (app_env() if spec.terminal == "app" else {}),
        "flavor": res.flavor,
        "workers": res.workers,
        "gpus_per_worker": res.gpus_per_worker,
        "distinct_nodes": res.distinct_nodes,
        "ntasks_per_node": res.ntasks_per_node,
        "cpus_per_task": spec.cpus_per_task or 0,
        "mem_per_node_mb": res.mem_per_node_mb,
        "gpus_per_task": spec.gpus_per_task,
        "mem_per_cpu_mb": spec.mem_per_cpu,
        "mem_per_gpu_mb": spec.mem_per_gpu,
        "cpus_per_worker": res.cpus_per_worker,
        "mem_per_worker_gb": res.mem_per_worker_gb,
        "output": output,
        "error": spec.error,
        "open_mode": spec.open_mode,
        "dependency": spec.dependency.text if spec.dependency is not None else None,
        "priority": terms.priority,
        "nice": spec.nice,
        "preemptible": spec.preemptible,
        "walltime_s": spec.time,
        "topology_level": spec.topology.level if spec.topology else None,
        "topology_mode": spec.topology.mode if spec.topology else None,
        "min_runtime_s": spec.min_runtime_s,
        "checkpoint_grace_s": terms.grace_s,
        "warn_before_s": spec.signal.lead_s if spec.signal else None,
        "preempt_signal": spec.signal.name if spec.signal else DEFAULT_SIGNAL,
        "signal_batch_shell": spec.signal.batch_shell if spec.signal else False,
        "terminal": spec.terminal,
        "container": admit_container(
            session,
            spec,
            terms.lineage,
            user.unix_user,
            run_as.container_registries if run_as is not None else (),
        ),
        "image": spec.container.image if spec.container is not None else None,
        "requeue": spec.requeue,
        "umask": spec.umask,
        "requeue_on_failure": False,  # Slurm's --requeue: node failure and preemption only
        "restart_count": 0,
        "array_max_running": spec.array.max_running if spec.array is not None else None,
        "array_spec": spec.array.text if spec.array is not None else None,
        "submit_t_s": now_t_s,
        "updated_t_s": now_t_s,
        "begin_t_s": spec.begin_t_s,
        "deadline_t_s": spec.deadline_t_s,
        "kill_on_invalid_dep": spec.kill_on_invalid_dep,
        "tasks_given": spec.ntasks is not None or spec.ntasks_per_node is not None,
        "ntasks_alone": spec.ntasks is not None and spec.ntasks_per_node is None,
        "gpus_per_node_asked": gpus_per_node_asked(spec),
        "only_nodes": sorted(job.only_nodes) if job.only_nodes is not None else None,
        "never_nodes": sorted(job.never_nodes) or None,
    }
    return Admitted(common, indices, spec)


def gpus_per_node_asked(spec: JobSubmit) -> str | None:
    """``--gpus-per-node`` as sbatch 22.05 exports it in SLURM_GPUS_PER_NODE: the string
    given, ``[TYPE:]N`` (slurm_opt.c keeps it as typed; env.c writes it with "%s"); None
    for GPUs per node asked with ``--gres=gpu:N``, for which sbatch sets none."""
    if spec.gpus_per_node is None or spec.gres:
        return None
    return f"{spec.gpu_type}:{spec.gpus_per_node}" if spec.gpu_type else str(spec.gpus_per_node)


def admit_batch(
    session: Session,
    user: User,
    specs: Sequence[JobSubmit],
    now_t_s: float,
    *,
    known_flavors: set[str] | None = None,
    run_as: RunAs | None = None,
    limits: SiteLimits = DEFAULT_LIMITS,
) -> list[Admitted]:
    """:func:`admit` of each of a batch's jobs, all or nothing; a refusal names the element
    (``jobs[3].queue``). A spec equal to the one before it shares that one's admission: the
    same user, transaction and checks give the same answer, and its rows differ only in the
    numbers ``store_admitted`` gives them (1,000 alike jobs were 30 % of a batch's CPU)."""
    tasks = sum(len(spec.array.indices) if spec.array is not None else 1 for spec in specs)
    most = max(limits.max_array_size, MAX_BATCH_JOBS)  # a batch's 1,000 plain jobs stay fine
    if tasks > most:
        raise Invalid(
            "jobs",
            f"{tasks} tasks in one batch, over this site's limit of {most} per request "
            "(railyard up --max-array-size)",
            "send them in several requests",
        )
    check_jobs_per_user(session, user, tasks, limits)
    admitted: list[Admitted] = []
    for i, spec in enumerate(specs):
        if admitted and spec == specs[i - 1]:
            admitted.append(admitted[-1])  # immutable; no value of its own per job
            continue
        try:
            admitted.append(
                admit(
                    session,
                    user,
                    spec,
                    now_t_s,
                    known_flavors=known_flavors,
                    run_as=run_as,
                    limits=limits,
                    count_jobs=False,
                )
            )
        except Invalid as exc:  # name the element, so the one line says which job
            raise Invalid(f"jobs[{i}].{exc.field}", exc.message, exc.hint) from None
    return admitted
