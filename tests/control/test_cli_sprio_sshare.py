"""``railyard sprio`` and ``railyard sshare`` against a real server: the keys the loop's
fair-share ordering compares (priority, then the fair tree, then age), each pending job's
place by them, and the fair tree's figures in sshare's columns."""

from __future__ import annotations

import math
import time

from sqlalchemy import select
from tests.control.test_cli_client import Cli, cli, server

from railyard.control.loop.world import WorldReader
from railyard.control.store.database import Store
from railyard.control.store.tables import JobRow, UsageRow, User
from railyard.control.usecases import priorityviews
from railyard.sched.config import SchedulerConfig
from railyard.sched.policies.ordering import FairShare
from railyard.sched.policies.registry import OrderContext
from railyard.sched.quota import QuotaTree

__all__ = ["cli", "server"]  # the fixtures, used by name


def _usage(store: Store, **gpu_s: float) -> None:
    """Decayed usage rows as the loop saves them (``queue:NAME``, ``user:QUEUE/USER``)."""
    with store.session() as session:
        for key, value in gpu_s.items():
            session.add(UsageRow(key=key.replace("__", ":").replace("_", "/"), gpu_s=value,
                                 updated_t_s=time.time()))  # fmt: skip


def _submit(cli: Cli, user: str, *args: str) -> str:
    result = cli(user, "submit", "--parsable", *args, "--", "true")
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def test_sprio_shows_the_keys_the_fair_share_ordering_compares(cli: Cli, store: Store) -> None:
    """alice used 3/4 of queue default's usage, bob 1/4: bob's later job goes before
    alice's earlier one at the same priority, and alice's niced job after both; a held job
    has no place. A plain user sees their own lines, with their places among everyone's."""
    _usage(store, queue__default=4000.0, user__default_alice=3000.0, user__default_bob=1000.0)
    first = _submit(cli, "alice")
    niced = _submit(cli, "alice", "--nice", "5")
    held = _submit(cli, "alice", "-H")
    later = _submit(cli, "bob")
    with store.session() as session:  # an order that does not depend on the clock's grain
        for n, job_id in enumerate((first, niced, held, later)):
            row = session.get(JobRow, job_id)
            assert row is not None
            row.submit_t_s = time.time() - 100 + n
    shown = cli("root", "sprio")
    assert shown.exit_code == 0, shown.output
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert lines[0] == ["JOBID", "PARTITION", "USER", "ORDER", "PRIORITY", "NICE", "FAIRSHARE",
                        "AGE"]  # fmt: skip
    by_id = {line[0]: line for line in lines[1:]}
    assert [line[0] for line in lines[1:]] == [later, first, niced, held]
    assert [by_id[j][3] for j in (later, first, niced, held)] == ["1", "2", "3", "held"]
    assert by_id[first][6] == "2.00/1.50"  # queue default: 100% of usage for 50% of weight
    assert by_id[later][6] == "2.00/0.50"  # bob: 25% of the queue's usage for 50%
    assert int(by_id[first][4]) - int(by_id[niced][4]) == 5
    assert by_id[niced][5] == "5"
    mine = cli("alice", "sprio", "-h").stdout.splitlines()
    assert [(line.split()[0], line.split()[3]) for line in mine] == [
        (first, "2"),
        (niced, "3"),
        (held, "held"),
    ]
    weights = cli("alice", "sprio", "-w").stdout
    assert weights.startswith("ordering fairshare: STARVING (waited past 7-00:00:00")
    assert "then PRIORITY (higher first" in weights
    assert weights.index("PRIORITY") < weights.index("FAIRSHARE") < weights.index("AGE")
    answer = cli.json("root", "sprio", "-j", later)
    assert answer["keys"] == ["starving", "priority", "fair_share", "age"]
    assert [j["fair_share"] for j in answer["jobs"]] == [[2.0, 0.5]]


def test_sshare_prints_the_fair_trees_figures(cli: Cli, store: Store) -> None:
    _usage(store, queue__default=4000.0, user__default_alice=3000.0, user__default_bob=1000.0)
    shown = cli("root", "sshare", "-a", "-l")
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["Account", "User", "RawShares", "NormShares", "RawUsage",
                                "EffectvUsage", "FairShare", "LevelFS"]  # fmt: skip
    assert set(lines[1]) == {"-", " "}
    parsable = cli("root", "sshare", "-l", "-P", "-n").stdout.splitlines()
    assert parsable == [
        "default||1|0.500000|4000|1.000000||0.500000",
        " default|alice|1|0.500000|3000|0.750000|0.500000|0.666667",
        " default|bob|1|0.500000|1000|0.250000|1.000000|2.000000",
        "research||1|0.500000|0|0.000000||inf",
    ]
    mine = cli("alice", "sshare", "-P", "-n").stdout.splitlines()
    assert mine == [
        "default||1|0.500000|4000|1.000000|",
        " default|alice|1|0.500000|3000|0.750000|0.500000",
    ]  # a plain user: their queues, their own line
    assert [s["user"] for s in cli.json("root", "sshare", "-u", "bob")] == ["", "bob", ""]


def test_sprios_order_is_the_schedulers_own(cli: Cli, store: Store) -> None:
    """The places sprio prints are those `sched.policies.ordering.FairShare` gives the
    pending jobs the loop reads from the same store (not a copy that could drift)."""
    _usage(store, queue__default=500.0, queue__research=100.0, user__default_alice=100.0,
           user__default_bob=400.0, user__research_root=100.0)  # fmt: skip
    for user, args in [("alice", ()), ("bob", ()), ("alice", ("--nice", "1")), ("bob", ()),
                       ("root", ("-p", "research")), ("alice", ())]:  # fmt: skip
        _submit(cli, user, *args)
    answer = cli.json("root", "sprio")
    with store.session() as session:
        step, _ = WorldReader(SchedulerConfig()).read(session, time.time(), [], None)
    ctx = OrderContext(step.now_t_s, step.usage, QuotaTree(step.queues), step.pending)
    ordered = sorted(step.pending, key=FairShare().sort_key(ctx))
    assert [j["id"] for j in answer["jobs"]] == [j.id for j in ordered]
    assert [j["order"] for j in answer["jobs"]] == list(range(1, 7))


def test_a_job_past_the_loops_starvation_limit_goes_first(cli: Cli, store: Store) -> None:
    """`up --starvation-limit`: the limit the loop runs with is the one sprio applies (a job
    waiting longer goes before a higher priority); no limit (infinite) names no such key."""
    old = _submit(cli, "alice", "--nice", "50")
    new = _submit(cli, "bob")
    with store.session() as session:
        row = session.get(JobRow, old)
        assert row is not None
        row.submit_t_s = time.time() - 120
    with store.session() as session:
        root = session.scalars(select(User).where(User.name == "root")).one()
        now = time.time()
        default = priorityviews.priorities(session, root, "fairshare", now)
        short = priorityviews.priorities(session, root, "fairshare", now, 60.0)
        never = priorityviews.priorities(session, root, "fairshare", now, math.inf)
    assert [j["id"] for j in default["jobs"]] == [new, old]  # 7 days: priority decides
    assert [(j["id"], j["starving"]) for j in short["jobs"]] == [(old, True), (new, False)]
    assert (short["starvation_limit_s"], short["keys"][0]) == (60.0, "starving")
    assert (never["starvation_limit_s"], "starving" in never["keys"]) == (None, False)
