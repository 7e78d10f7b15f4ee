"""Issue 57's habits of a user switching from Slurm 22.05, end to end: a submission through
``jobs.submit``, the scheduler loop, the LocalExecutor and real processes (SQLite only: the
store's part is covered on both databases elsewhere)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError
from sqlalchemy import delete
from tests.control.loop_helpers import NODE, Cluster, states, step_until

from railyard.client.scripts import parse_script, resolve_export
from railyard.control.adminschemas import QueueCreate
from railyard.control.api.validation import validation_line
from railyard.control.errors import Conflict, Forbidden
from railyard.control.store.tables import JobRow, QueueMember, QueueRow, User
from railyard.control.submission import JobSubmit
from railyard.control.usecases.jobs import cancel_job, release_job
from railyard.control.usecases.jobviews import read_job_log
from railyard.control.usecases.requeue import requeue_job


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    yield made
    made.store.close()


@pytest.mark.parametrize(("mode", "kept"), [("append", True), ("truncate", False)])
def test_open_mode_appends_to_or_truncates_the_output_file(
    cluster: Cluster, mode: str, kept: bool
) -> None:
    """sbatch --open-mode=append writes after what the file held; truncate starts it over."""
    out = cluster.out / "train.out"
    out.write_text("from an earlier run\n")
    script = f"#!/bin/bash\n#SBATCH --open-mode={mode}\necho second run\n"
    options = parse_script(script, "job.sh").options
    [job_id] = cluster.submit(script=script, output=str(out), **options)
    cluster.run(job_id)
    expected = ("from an earlier run\n" if kept else "") + "second run\n"
    assert out.read_text() == expected


def test_open_mode_is_checked_at_parse() -> None:
    with pytest.raises(ValueError, match="--open-mode: expected append or truncate"):
        parse_script("#!/bin/bash\n#SBATCH --open-mode=sideways\nrun\n", "job.sh")


def _only_debug_for_alice(cluster: Cluster) -> None:
    """Partitions gpu and debug; alice may submit to debug alone (as a Slurm AllowAccounts)."""
    with cluster.store.session() as session:
        session.execute(delete(QueueMember))
        for name in ("gpu", "debug"):
            session.add(QueueRow(name=name, parent="root", created_t_s=0.0))
        session.flush()
        session.add(QueueMember(queue="debug", user_id=2))


def test_a_partition_list_takes_the_first_partition_that_admits_the_job(
    cluster: Cluster,
) -> None:
    """sbatch -p gpu,debug: the job goes to a partition of the list that can run it."""
    _only_debug_for_alice(cluster)
    [job_id] = cluster.submit(command=["true"], queue="gpu,debug")
    [both] = cluster.submit(command=["true"], queue="debug,gpu")
    with cluster.store.session() as session:
        assert [session.get(JobRow, j).queue for j in (job_id, both)] == ["debug", "debug"]  # type: ignore[union-attr]
    with pytest.raises(Forbidden, match="queue 'gpu'"):  # none admits it: the first one's word
        cluster.submit(command=["true"], queue="gpu,nosuch")


def test_a_partition_list_passes_over_one_whose_max_time_the_job_exceeds(
    cluster: Cluster,
) -> None:
    """-p short,long --time 1-0 with short's MaxTime 10 minutes: the job goes to long, where
    it can start (it went to short and waited there for ever); within short's bound, to short.
    Over every listed MaxTime, the first admits it, as with one partition (PartitionTimeLimit)."""
    with cluster.store.session() as session:
        session.execute(delete(QueueMember))
        session.add(QueueRow(name="short", parent="root", created_t_s=0.0, max_time_s=600.0))
        session.add(QueueRow(name="long", parent="root", created_t_s=0.0, max_time_s=86_400.0))
        session.flush()
        session.add_all(QueueMember(queue=q, user_id=2) for q in ("short", "long"))  # alice
    [day] = cluster.submit(command=["true"], queue="short,long", time="1-0")
    [minutes] = cluster.submit(command=["true"], queue="short,long", time="5")
    [week] = cluster.submit(command=["true"], queue="short,long", time="7-0")
    with cluster.store.session() as session:
        queues = [session.get(JobRow, j).queue for j in (day, minutes, week)]  # type: ignore[union-attr]
    assert queues == ["long", "short", "short"]


@pytest.mark.parametrize(
    ("model", "fields", "line"),
    [
        (JobSubmit, {"command": ["x"], "queue": "gpu debug"},
         "queue: 'gpu debug' is not a queue name (hint: letters, digits"),
        (JobSubmit, {"command": ["x"], "queue": ",".join(["q"] * 17)},
         "queue: 17 partitions (hint: at most 16)"),
        (QueueCreate, {"name": "gpu,debug"},
         "name: 'gpu,debug' is not allowed here (hint: letters, digits, '_', '.' or '-' only)"),
        (JobSubmit, {"command": ["x"], "script": "#" * (3 << 20)},
         "script: 3,145,728 characters, over the 1,048,576 allowed (hint: make it shorter"),
    ],
)  # fmt: skip
def test_a_bad_queue_name_is_one_line_naming_the_field_with_a_hint(
    model: type[BaseModel], fields: dict[str, Any], line: str
) -> None:
    with pytest.raises(ValidationError) as refused:
        model(**fields)
    said, _ = validation_line(list(refused.value.errors()))
    assert said.startswith(line), said
    assert "should match" not in said


@pytest.mark.parametrize(
    ("export", "present", "absent"),
    [
        ("NONE,FOO=bar", {"FOO": "bar"}, {"FROM_SUBMITTER", "HOME_DATA"}),
        ("ALL,FOO=bar", {"FOO": "bar", "FROM_SUBMITTER": "yes"}, set()),
        ("HOME_DATA", {"HOME_DATA": "/data"}, {"FROM_SUBMITTER", "FOO"}),
    ],
)
def test_export_lists_run_with_what_they_name(
    cluster: Cluster, export: str, present: dict[str, str], absent: set[str]
) -> None:
    """sbatch --export=NONE,FOO=bar runs with FOO set and the submitter's variables gone;
    ALL,FOO=bar adds FOO to them; a bare NAME takes the submitter's value."""
    submitter = {"PATH": "/usr/bin:/bin", "FROM_SUBMITTER": "yes", "HOME_DATA": "/data"}
    script = f"#!/bin/bash\n#SBATCH --export={export}\nenv > {cluster.out}/env.txt\n"
    options = parse_script(script, "job.sh").options
    value, env, _ = resolve_export(options.pop("export"), submitter)
    [job_id] = cluster.submit(script=script, export=value, env=env, **options)
    cluster.run(job_id)
    lines = (cluster.out / "env.txt").read_text().splitlines()
    seen = dict(line.partition("=")[::2] for line in lines)
    assert {k: seen.get(k) for k in present} == present
    assert not absent & seen.keys()
    if not export.startswith("ALL"):
        assert seen["SLURM_EXPORT_ENV"] == export


def test_batch_environment_as_sbatch_sets_it(cluster: Cluster) -> None:
    """Without --ntasks, sbatch leaves SLURM_NTASKS/NPROCS/NTASKS_PER_NODE unset, and with
    --ntasks alone SLURM_NTASKS_PER_NODE; it sets SLURM_MEM_PER_CPU when asked,
    SLURM_JOB_ACCOUNT and _QOS always, SLURM_GPUS_PER_NODE for --gpus-per-node (not
    --gres), SLURM_JOB_DEPENDENCY as submitted even once the dependency is met, and never
    SLURM_UMASK in the batch shell (slurmstepd applies it, then unsets it)."""
    [first] = cluster.submit(command=["true"])
    dump = f"env > {cluster.out}/$SLURM_JOB_ID.env\n"
    plain = "#!/bin/bash\n#SBATCH --gres=gpu:2 --mem-per-cpu=512M -d afterok:1\n" + dump
    counted = "#!/bin/bash\n#SBATCH --ntasks=2\n" + dump
    per_node = "#!/bin/bash\n#SBATCH --ntasks-per-node=2 --gpus-per-node=2\n" + dump
    ids = [
        job_id
        for script in (plain, counted, per_node)
        for job_id in cluster.submit(script=script, umask=0o027, **parse_script(script).options)
    ]
    cluster.run(first, *ids)
    env = [_env_file(cluster.out / f"{n}.env") for n in (2, 3, 4)]
    assert not {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NTASKS_PER_NODE"} & env[0].keys()
    assert env[0]["SLURM_JOB_DEPENDENCY"] == "afterok:1"
    assert env[0]["SLURM_MEM_PER_CPU"] == "512"
    assert "SLURM_GPUS_PER_NODE" not in env[0]
    assert (env[0]["SLURM_JOB_ACCOUNT"], env[0]["SLURM_JOB_QOS"]) == ("default", "normal")
    assert (env[1]["SLURM_NTASKS"], env[1]["SLURM_NPROCS"]) == ("2", "2")
    assert "SLURM_NTASKS_PER_NODE" not in env[1]
    assert (env[2]["SLURM_NTASKS_PER_NODE"], env[2]["SLURM_GPUS_PER_NODE"]) == ("2", "2")
    assert not any("SLURM_UMASK" in e for e in env)


def _env_file(path: Path) -> dict[str, str]:
    return dict(line.partition("=")[::2] for line in path.read_text().splitlines())


def test_a_job_stopped_at_its_time_limit_says_so_in_its_output(cluster: Cluster) -> None:
    """slurmstepd's line, in the job's own --output file, written by its wrapper."""
    out = cluster.out / "slow.out"
    [job_id] = cluster.submit(script="#!/bin/bash\necho started\nsleep 60\n", output=str(out))
    with cluster.store.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        row.walltime_s = 1.0  # a second: --time counts whole minutes
    step_until(cluster.loop, lambda: states(cluster.store)[job_id] == "timeout", timeout_s=90)
    lines = out.read_text().splitlines()
    assert lines[0] == "started"
    pattern = (
        rf"slurmstepd-{NODE}: error: \*\*\* JOB 1 ON {NODE} CANCELLED AT "
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d DUE TO TIME LIMIT \*\*\*"
    )
    assert [line for line in lines if re.fullmatch(pattern, line)], lines


def test_a_cancelled_job_says_so_in_its_output(cluster: Cluster) -> None:
    """scancel's line (no reason), in the job's own --output file."""
    out = cluster.out / "cancelled.out"
    [job_id] = cluster.submit(script="#!/bin/bash\necho started\nsleep 60\n", output=str(out))
    step_until(cluster.loop, lambda: out.exists() and "started" in out.read_text(), timeout_s=90)
    with cluster.store.session() as session:
        actor = session.get(User, 2)
        assert actor is not None
        cancel_job(session, actor, job_id, time.time())
    step_until(cluster.loop, lambda: states(cluster.store)[job_id] == "cancelled", timeout_s=90)
    pattern = rf"slurmstepd-{NODE}: error: \*\*\* JOB 1 ON {NODE} CANCELLED AT \S+ \*\*\*"
    assert [line for line in out.read_text().splitlines() if re.fullmatch(pattern, line)]


def test_an_output_file_that_cannot_be_opened_is_named_by_railyard_logs(cluster: Cluster) -> None:
    """The job fails, as under Slurm, and ``railyard logs`` shows why (the wrapper's line in
    the spool log) instead of an empty page."""
    out = cluster.out / "no-such-dir" / "x.out"
    [job_id] = cluster.submit(script="#!/bin/bash\necho never\n", output=str(out))
    step_until(cluster.loop, lambda: states(cluster.store)[job_id] == "failed", timeout_s=90)
    with cluster.store.session() as session:
        actor = session.get(User, 2)
        assert actor is not None
        piece = read_job_log(session, actor, job_id, 0, 0, cluster.tmp / "jobs", None)
        last = read_job_log(session, actor, job_id, 0, piece.offset, cluster.tmp / "jobs", None)
    assert f"Could not open stdout file {out}" in piece.text, piece.text
    assert (last.text, last.finished) == ("", True)


REQUEUED = r"slurmstepd-\S+: error: \*\*\* JOB 1 ON \S+ CANCELLED AT \S+ DUE TO JOB REQUEUE \*\*\*"


@pytest.mark.parametrize(
    ("mode", "kept"), [(None, ["run 1"]), ("append", ["run 0", REQUEUED, "run 1"])]
)
def test_requeue_stops_a_running_job_and_runs_it_again(
    cluster: Cluster, mode: str | None, kept: list[str]
) -> None:
    """scontrol requeue: restart count 1; the second run starts the output file over, as
    Slurm 22.05's does (measured: benchmarks/slurm/compare_habits.py), unless
    ``--open-mode=append`` keeps both runs, with slurmstepd's line between them."""
    out = cluster.out / "again.out"
    script = (
        "#!/bin/bash\necho run ${SLURM_RESTART_COUNT:-0}\n"
        f'[ -n "$SLURM_RESTART_COUNT" ] || {{ touch {cluster.out}/up; sleep 60; }}\n'
    )
    options = {"open_mode": mode} if mode else {}
    [job_id] = cluster.submit(script=script, output=str(out), **options)
    step_until(cluster.loop, lambda: (cluster.out / "up").exists(), timeout_s=60)
    with cluster.store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        [(row, _)] = requeue_job(session, alice, job_id, time.time())
        assert row.state == "cancelling"
    cluster.run(job_id)
    with cluster.store.session() as session:
        done = session.get(JobRow, job_id)
        assert done is not None
        assert (done.state, done.restart_count) == ("completed", 1)
    lines = out.read_text().splitlines()
    assert len(lines) == len(kept), lines
    assert all(re.fullmatch(want, line) for want, line in zip(kept, lines, strict=True)), lines


def test_requeue_of_a_job_that_does_not_run_is_refused(cluster: Cluster) -> None:
    [job_id] = cluster.submit(command=["true"], hold=True)
    with cluster.store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        with pytest.raises(Conflict, match="only a running job can be requeued"):
            requeue_job(session, alice, job_id, time.time())


def test_requeuehold_brings_the_job_back_held_and_release_lets_it_run(cluster: Cluster) -> None:
    """scontrol requeuehold: the running job stops and comes back pending, held, reason
    JobHeldUser; release lets it run again (restart 1). Release of an ended job is refused,
    as scontrol refuses a job no longer pending."""
    up = cluster.out / "up"
    script = f'#!/bin/bash\n[ -n "$SLURM_RESTART_COUNT" ] || {{ touch {up}; sleep 60; }}\n'
    [job_id] = cluster.submit(script=script)
    step_until(cluster.loop, up.exists, timeout_s=60)
    with cluster.store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        [(row, _)] = requeue_job(session, alice, job_id, time.time(), hold=True)
        assert (row.state, row.hold) == ("cancelling", "user")
    step_until(cluster.loop, lambda: states(cluster.store)[job_id] == "pending", timeout_s=60)
    for _ in range(3):  # held: the loop leaves it pending
        cluster.loop.step()
    with cluster.store.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        assert (row.state, row.hold, row.reason, row.restart_count) == (
            "pending",
            "user",
            "JobHeldUser",
            1,
        )
        alice = session.get(User, 2)
        assert alice is not None
        assert [r.id for r, _ in release_job(session, alice, job_id, time.time())] == [job_id]
    cluster.run(job_id)
    with cluster.store.session() as session:
        alice = session.get(User, 2)
        assert alice is not None
        assert states(cluster.store)[job_id] == "completed"
        with pytest.raises(Conflict, match="is completed: only a pending job can be released"):
            release_job(session, alice, job_id, time.time())
