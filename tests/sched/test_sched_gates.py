"""Gates before the cycle: holds, dependencies (Slurm's `--dependency`), array throttles."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sched_fakes import flat_queues, job, nodes, running

from railyard.sched import NodeState, Reason, SchedulerConfig
from railyard.sched.dependencies import parse_dependency
from railyard.sched.gates import gate
from railyard.sched.lifecycle import Exit, ExitKind, StepInput, step

DONE = {"1": "completed", "2": "failed", "3": "running", "4": "pending", "5": "cancelled"}


def deps(text: str) -> dict[str, object]:
    dependencies, any_of = parse_dependency(text)
    return {"dependencies": dependencies, "dependency_any": any_of}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("afterok:1", None),
        ("afterok:2", Reason.DEPENDENCY_NEVER_SATISFIED),
        ("afterok:3", Reason.DEPENDENCY),
        ("afternotok:2", None),
        ("afternotok:5", None),  # cancelled is not OK
        ("afternotok:1", Reason.DEPENDENCY_NEVER_SATISFIED),
        ("afterany:1:2:5", None),
        ("afterany:1:3", Reason.DEPENDENCY),
        ("after:3", None),  # it has started
        ("after:4", Reason.DEPENDENCY),
        ("afterok:1,afterok:3", Reason.DEPENDENCY),
        ("afterok:2?afterok:1", None),  # any one of them
        ("afterok:2?afterok:5", Reason.DEPENDENCY_NEVER_SATISFIED),
        ("afterok:99", Reason.DEPENDENCY_NEVER_SATISFIED),  # no such job
    ],
)
def test_dependencies(text, reason):
    eligible, held = gate([job("j", **deps(text))], [], DONE)
    assert held.get("j") is reason
    assert bool(eligible) is (reason is None)


def test_singleton_runs_one_job_of_a_name_and_user_at_a_time():
    single = deps("singleton")
    pending = [
        job("a", name="train", user="u", submit_t_s=1, **single),
        job("b", name="train", user="u", submit_t_s=2, **single),
        job("c", name="train", user="v", submit_t_s=3, **single),  # another user
    ]
    eligible, held = gate(pending, [])
    assert ([j.id for j in eligible], held) == (["a", "c"], {"b": Reason.DEPENDENCY})
    busy = [running(job("r", name="train", user="u"), "n0:0")]
    eligible, held = gate(pending, busy)
    assert [j.id for j in eligible] == ["c"]


def test_holds_come_first_and_say_who_held():
    pending = [job("u", hold="user"), job("a", hold="admin"), job("free")]
    eligible, held = gate(pending, [])
    assert [j.id for j in eligible] == ["free"]
    assert held == {"u": Reason.JOB_HELD_USER, "a": Reason.JOB_HELD_ADMIN}


def test_array_throttle_lets_the_lowest_indices_go_first():
    tasks = [
        job(f"9_{i}", array_parent="9", array_index=i, array_max_running=2) for i in (10, 2, 1)
    ]
    eligible, held = gate(tasks[:2], [running(tasks[2], "n0:0")])  # 9_1 runs
    assert [j.id for j in eligible] == ["9_2"]
    assert held == {"9_10": Reason.JOB_ARRAY_TASK_LIMIT}


@pytest.mark.parametrize("bad", ["afterok", "afterok:", "before:1", "afterok:1,afterok:2?x", ""])
def test_bad_dependencies_say_how_to_write_them(bad):
    with pytest.raises(ValueError, match=r"hint: e\.g\. afterok:12"):
        parse_dependency(bad)


@pytest.mark.parametrize(
    ("text", "now_t_s", "reason"),
    [
        ("after:3+5", 100.0 + 299.0, Reason.DEPENDENCY),  # started at 100: 5 min not yet up
        ("after:3+5", 100.0 + 300.0, None),
        ("after:5+1", 160.0, Reason.DEPENDENCY),  # cancelled unstarted at 150: 60 s from then
        ("after:5+1", 210.0, None),
        ("after:4+1", 1e9, Reason.DEPENDENCY),  # not started: after waits however long
        ("after:3+5:5", 399.0, Reason.DEPENDENCY),  # each id its own wait; none for 5
        ("after:3+0", 100.0, None),
    ],
)
def test_after_plus_minutes_waits_that_long_after_the_start(text, now_t_s, reason):
    """sbatch(1): after:job_id+time, 'time' minutes after the job started or was cancelled."""
    times = {"3": 100.0, "5": 150.0}
    eligible, held = gate([job("j", **deps(text))], [], DONE, now_t_s, times)
    assert held.get("j") is reason
    assert bool(eligible) is (reason is None)


def test_after_plus_minutes_wakes_the_step_when_it_falls_due_and_only_after_takes_it():
    then = job("2", gpus=1, **deps("after:1+2"))
    given = StepInput(nodes(1), flat_queues({"a": 8}), [then], [], [], 50.0,
                      job_states={"1": "running"}, job_times={"1": 10.0})  # fmt: skip
    plan = step(given, SchedulerConfig())
    assert (plan.held, plan.next_deadline_t_s) == ({"2": Reason.DEPENDENCY}, 130.0)
    later = step(replace(given, now_t_s=130.0), SchedulerConfig())
    assert [s.job_id for s in later.result.starts] == ["2"]
    with pytest.raises(ValueError, match=r"\+MINUTES goes with after:"):
        parse_dependency("afterok:1+5")


def test_a_dependency_settled_in_the_same_step_counts():
    """The lifecycle step adds the end states it settles before gating."""
    first = running(job("1", gpus=8), "n0:0-7")
    then = job("2", gpus=8, **deps("afterok:1"))
    plan = step(
        StepInput(
            nodes(1),
            flat_queues({"a": 8}),
            [then],
            [first],
            [Exit("1", 0, ExitKind.COMPLETED, 0)],
            10.0,
        ),
        SchedulerConfig(),
    )
    assert [s.job_id for s in plan.result.starts] == ["2"]


def test_an_across_node_group_starts_when_its_nodes_are_idle_and_holds_them_meanwhile():
    """A sweep's nodes take no new job (they are being checked); its group's test starts in
    the step where every node of the group is idle, never beside a user's job."""
    from railyard.sched.health import HealthInput, HealthPolicy

    policy = HealthPolicy(interval_s=None, gate_joins=False)
    busy = running(job("1", gpus=8), "n1:0-7")
    held = HealthInput(policy, checking=frozenset({"n0", "n1"}), group=("n0", "n1"))
    given = StepInput(nodes(3), flat_queues({"a": 24}), [job("2", gpus=8)], [busy], [], 10.0)
    plan = step(replace(given, health=held), SchedulerConfig())
    assert plan.group_check == ()  # n1 still runs job 1
    assert [dict(s.placement) for s in plan.result.starts] == [{"n2": tuple(range(8))}]

    first = [Exit("1", 0, ExitKind.COMPLETED, 0)]
    given = StepInput(nodes(3), flat_queues({"a": 24}), [job("3", gpus=8, workers=2)], [busy],
                      first, 20.0, health=held)  # fmt: skip
    plan = step(given, SchedulerConfig())
    assert plan.group_check == ("n0", "n1")  # job 1 ended in this step: both idle now
    assert not plan.result.starts  # the 2-node job waits: n0 and n1 are held

    down = [replace(n, state=NodeState.DOWN) if n.name == "n0" else n for n in nodes(3)]
    plan = step(StepInput(down, flat_queues({"a": 24}), [], [], [], 30.0, health=held),
                SchedulerConfig())  # fmt: skip
    assert plan.group_check == ()  # a down node is not tested


@pytest.mark.parametrize(
    ("states", "index", "reason"),
    [
        ({"12": "running", "12_2": "completed"}, 2, None),  # its own index is done
        ({"12": "running", "12_2": "running"}, 2, Reason.DEPENDENCY),
        ({"12": "failed", "12_2": "failed"}, 2, Reason.DEPENDENCY_NEVER_SATISFIED),
        ({"12": "completed", "12_0": "completed"}, 2, None),  # no task 2 there: nothing to wait
        ({}, 2, Reason.DEPENDENCY_NEVER_SATISFIED),  # no such array
        ({"12": "running"}, None, Reason.DEPENDENCY),  # not an array task: afterok on 12
        ({"12": "completed"}, None, None),
    ],
)
def test_aftercorr_waits_for_the_task_of_its_own_index(states, index, reason):
    task = job("13_2", array_parent="13" if index is not None else None, array_index=index,
               **deps("aftercorr:12"))  # fmt: skip
    _, held = gate([task], [], states)
    assert held.get("13_2") is reason


def test_aftercorr_names_the_task_of_its_index():
    from railyard.sched.dependencies import named_ids

    task = job("13_2", array_parent="13", array_index=2, **deps("aftercorr:12,afterok:7"))
    assert named_ids(task) == {"12", "12_2", "7"}
