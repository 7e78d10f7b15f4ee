"""Slurm habits a Slurm 22.05 user's review found missing (2026-12-06), against a real server:
squeue's long options, filters and order (``--states``, ``--partition``, ``-w``, ``-A``,
``-q``, ``-S``), a held job's priority 0 and Slurm's long state names, sacct's ``-l``, ``-D``
and its per-step usage fields, sbatch's bare ``--nice``, ``scontrol requeuehold`` and
``release`` of an ended job, and an array's update answered in one line."""

from __future__ import annotations

import time

from tests.control.test_cli_client import Cli, cli, server

from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow

__all__ = ["cli", "server"]  # the fixtures, used by name


def _set(store: Store, job_id: str, **values: object) -> None:
    with store.session() as session:
        row = session.get(JobRow, job_id)
        assert row is not None
        for key, value in values.items():
            setattr(row, key, value)


def _submit(cli: Cli, *args: str) -> str:
    done = cli("alice", "submit", "--parsable", *args, "--", "true")
    assert done.exit_code == 0, done.output
    return done.stdout.strip()


def test_squeue_long_options_filters_and_sort(cli: Cli, store: Store) -> None:
    low = _submit(cli, "--qos", "low", "-J", "a")
    high = _submit(cli, "--qos", "normal", "-J", "b")
    on_n01 = _submit(cli, "-J", "c")
    _set(store, on_n01, state="running", start_t_s=time.time(), placement={"n01": [0]})

    def ids(*args: str) -> list[str]:
        done = cli("alice", "queue", "-h", "-o", "%i", *args)
        assert done.exit_code == 0, done.output
        return done.stdout.split()

    assert ids("--states=pending") == [low, high]
    assert ids("--states", "R") == [on_n01]
    assert sorted(ids("--partition=default")) == sorted([low, high, on_n01])
    assert ids("--partition", "elsewhere") == []
    assert ids("-w", "n[01-02]") == [on_n01]
    assert ids("-A", "default,other", "-q", "low") == [low]
    assert ids("-S", "-Q") == [high, on_n01, low]  # priority, highest first
    assert ids("-S", "j") == [low, high, on_n01]
    assert ids("--sort=-i") == sorted([low, high, on_n01], key=int, reverse=True)
    fast = cli("alice", "queue", "-i", "0.01")
    assert (fast.exit_code, fast.stderr.strip()) == (
        2, "railyard: queue: --iterate takes 1 second or more"
    )  # fmt: skip
    bad = cli("alice", "queue", "-S", "%Z9")
    assert (bad.exit_code, bad.stderr.split(" (")[0]) == (
        2, "railyard: queue: --sort: unknown field '%Z9'"
    )  # fmt: skip


def test_a_held_job_shows_priority_0_and_states_have_slurms_long_names(
    cli: Cli, store: Store
) -> None:
    held = _submit(cli, "-H")
    free = _submit(cli)
    _set(store, free, state="cancelling", start_t_s=time.time(), placement={"n01": [0]})
    rows = cli("alice", "queue", "-h", "-o", "%i %Q %T %t").stdout.splitlines()
    assert rows == [f"{held} 0 PENDING PD", f"{free} 500 COMPLETING CG"]
    shown = cli("alice", "show", "job", held).stdout
    assert "Priority=0 " in shown
    assert "QOS=normal" in shown
    assert cli("alice", "release", held).exit_code == 0
    assert cli("alice", "queue", "-h", "-j", held, "-o", "%Q").stdout.strip() == "500"


def test_release_of_an_ended_job_is_refused_and_requeuehold_is_a_command(
    cli: Cli, store: Store
) -> None:
    done = _submit(cli)
    _set(store, done, state="completed", exit_code=0, start_t_s=time.time() - 2,
         end_t_s=time.time(), placement={"n01": [0]})  # fmt: skip
    refused = cli("alice", "release", done)
    assert refused.exit_code == 1
    assert f"job {done} is completed: only a pending job can be released" in refused.stderr
    requeued = cli("alice", "requeuehold", done)  # not running: refused the same way
    assert requeued.exit_code == 1
    assert "only a running job can be requeued" in requeued.stderr


def test_sacct_long_duplicates_and_usage_fields(cli: Cli, store: Store) -> None:
    job = _submit(cli)
    _set(store, job, state="completed", exit_code=0, start_t_s=time.time() - 5,
         end_t_s=time.time(), placement={"n01": [0]})  # fmt: skip
    usage = cli("alice", "history", "-X", "-P", "-n", "-j", job, "-o", "JobID,MaxRSS,State")
    assert usage.exit_code == 0, usage.output
    assert usage.stdout.splitlines() == [f"{job}||COMPLETED"]
    assert "MaxRSS: blank, no per-step usage is gathered" in usage.stderr
    long = cli("alice", "history", "-X", "-l", "-P", "-j", job)
    assert long.stdout.splitlines()[0].split("|")[:4] == ["JobID", "JobIDRaw", "JobName",
                                                           "Partition"]  # fmt: skip
    dup = cli("alice", "history", "-X", "-D", "-n", "-P", "-j", job, "-o", "JobID")
    assert dup.stdout.split() == [job]
    assert "a requeued job is one record here" in dup.stderr


def test_bare_nice_is_100_and_an_arrays_update_is_one_line(cli: Cli) -> None:
    niced = cli("alice", "submit", "--nice", "--parsable", "--", "true")
    assert niced.exit_code == 0, niced.output
    job = niced.stdout.strip()
    assert cli("alice", "queue", "-h", "-j", job, "-o", "%y %Q").stdout.split() == ["100", "400"]
    array = _submit(cli, "-H", "--array", "0-99", "-t", "10")
    folded = cli("alice", "queue", "-h", "-j", array, "-o", "%i %K").stdout.split()
    assert folded == [f"{array}_[0-99]", "0-99"]  # squeue's %K of a pending array's line
    updated = cli("alice", "update", array, "TimeLimit=5")
    assert (updated.exit_code, updated.stdout) == (0, f"{array} updated\n"), updated.output
    limits = {j["walltime_s"] for j in cli.json("alice", "queue", "-r", "-j", array)}
    assert limits == {300}


def test_show_partition_and_node_print_scontrols_records(cli: Cli, store: Store) -> None:
    """``scontrol show partition [NAME]`` / ``show node [NAME]``: Key=Value records a script
    greps (MaxTime=, State=, Nodes=); an unknown name is scontrol's "not found", exit 1."""
    from railyard.control.store.tables import NodeRow, QueueRow

    with store.session() as session:
        session.add(QueueRow(name="gpu", parent="default", nominal_gpus={}, is_default=True,
                             max_time_s=7200.0, created_t_s=time.time()))  # fmt: skip
        node = session.get_one(NodeRow, "n02")
        node.state, node.reason = "draining", "bad fan"
    part = cli("alice", "show", "partition", "gpu")
    assert part.exit_code == 0, part.output
    lines = part.stdout.splitlines()
    assert lines[0] == "PartitionName=gpu"
    text = part.stdout
    assert "Default=YES" in text
    assert "MaxTime=02:00:00" in text
    assert "Nodes=n[01-02]" in text
    assert "State=UP TotalCPUs=" in text
    every = cli("alice", "show", "partition").stdout
    assert [b.splitlines()[0] for b in every.strip().split("\n\n")] == ["PartitionName=gpu"]
    shown = cli("alice", "show", "node", "n02").stdout.splitlines()
    assert shown[0] == "NodeName=n02"
    assert "   State=IDLE+DRAIN" in shown
    assert "   Reason=bad fan" in shown
    assert "   Partitions=gpu" in shown
    missing = cli("alice", "show", "partition", "nope")
    assert (missing.exit_code, missing.stderr.strip()) == (1, "railyard: Partition nope not found")
    assert cli("alice", "show", "node", "n99").exit_code == 1


def test_sinfo_views(cli: Cli, store: Store) -> None:
    """sinfo: a line per partition and state (default partition starred, TIMELIMIT its
    MaxTime), -s's NODES(A/I/O/T), -N a line per node, -R why a node is out, -p and -o."""
    from railyard.control.store.tables import NodeRow, QueueRow

    with store.session() as session:
        for name in ("gpu", "debug"):
            session.add(QueueRow(name=name, parent="default", nominal_gpus={},
                                 is_default=name == "gpu", max_time_s=3600.0 if name == "debug"
                                 else None, created_t_s=time.time()))  # fmt: skip
        node = session.get_one(NodeRow, "n02")
        node.state, node.reason = "draining", "bad fan"
    job = _submit(cli, "-G", "1")
    _set(store, job, state="running", start_t_s=time.time(), placement={"n01": [0]})
    plain = cli("alice", "sinfo")
    assert plain.exit_code == 0, plain.output
    assert [line.split() for line in plain.stdout.splitlines()] == [
        ["PARTITION", "AVAIL", "TIMELIMIT", "NODES", "STATE", "NODELIST"],
        ["debug", "up", "1:00:00", "1", "mix", "n01"],
        ["debug", "up", "1:00:00", "1", "drain", "n02"],
        ["gpu*", "up", "infinite", "1", "mix", "n01"],
        ["gpu*", "up", "infinite", "1", "drain", "n02"],
    ]
    summary = cli("alice", "sinfo", "-s", "-p", "gpu", "-h").stdout.split()
    assert summary == ["gpu*", "up", "infinite", "1/0/1/2", "n[01-02]"]
    per_node = cli("alice", "sinfo", "-N", "-h", "-o", "%N %R %T").stdout.splitlines()
    assert per_node == ["n01 debug mixed", "n01 gpu mixed", "n02 debug drained",
                        "n02 gpu drained"]  # fmt: skip
    reasons = cli("alice", "sinfo", "-R", "-h", "-o", "%E|%N").stdout.splitlines()
    assert reasons == ["bad fan|n02"]
    bad = cli("alice", "sinfo", "-o", "%Z")
    assert (bad.exit_code, bad.stderr.split(" (")[0]) == (
        2,
        "railyard: sinfo: -o: unknown field %Z",
    )
