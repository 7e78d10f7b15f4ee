"""Bisecting a slow collective to its slow nodes (seed 004's method), over a test where a
group is slow when it holds a slow node, or spans a bad link between two halves."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from railyard.health.across import figure_of
from railyard.health.bisect import FAIL_BELOW, Bisection, GroupTest, find_slow, node_result
from railyard.health.result import Expected, Status

NODES = [f"n{i:02}" for i in range(16)]


def slow_with(bad: set[str]) -> tuple[list[list[str]], object]:
    seen: list[list[str]] = []

    def passes(group: Sequence[str]) -> bool:
        seen.append(list(group))
        return not bad.intersection(group)

    return seen, passes


@pytest.mark.parametrize("bad", [{"n00"}, {"n07"}, {"n15"}, {"n03", "n12"}, {"n04", "n05"}])
def test_the_slow_nodes_are_found(bad: set[str]) -> None:
    seen, passes = slow_with(bad)
    found, tests = find_slow(NODES, passes)  # type: ignore[arg-type]
    assert set(found) == bad
    assert tests == len(seen)


def test_one_slow_node_costs_about_two_log2_n_tests_not_all_pairs() -> None:
    _, passes = slow_with({"n09"})
    _, tests = find_slow(NODES, passes)  # type: ignore[arg-type]
    assert tests <= 2 * math.log2(len(NODES)) + 2
    assert tests < len(NODES) * (len(NODES) - 1) // 2


def test_a_healthy_set_takes_one_test() -> None:
    _, passes = slow_with(set())
    assert find_slow(NODES, passes) == ([], 1)  # type: ignore[arg-type]


def test_a_fault_between_halves_blames_no_node() -> None:
    def passes(group: Sequence[str]) -> bool:
        return not ({"n00", "n08"} <= set(group))  # the link between them is bad

    found, _ = find_slow(NODES, passes)
    assert found == []


def test_a_slow_pair_with_no_good_node_blames_both() -> None:
    _, passes = slow_with({"a", "b"})
    assert find_slow(["a", "b"], passes)[0] == ["a", "b"]  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [set(), {"n05"}, {"n01", "n14"}])
def test_stepwise_bisection_asks_the_same_tests_and_blames_the_same_nodes(bad: set[str]) -> None:
    """The loop's driver: one test at a time, its verdict recorded later."""
    seen, passes = slow_with(bad)
    expected = find_slow(NODES, passes)  # type: ignore[arg-type]
    asked = list(seen)
    search = Bisection(NODES)
    run: list[list[str]] = []
    while search.group is not None:
        run.append(search.group)
        search.record(not bad.intersection(search.group))
    assert run == asked
    assert (search.blamed, len(search.results)) == expected
    with pytest.raises(AssertionError):
        search.record(True)


EXPECTED = Expected(100.0, "floor 100 GB/s")


def test_a_group_passes_at_its_failing_fraction_of_the_expectation() -> None:
    assert GroupTest(["a", "b"], FAIL_BELOW * 100.0, EXPECTED).ok
    assert not GroupTest(["a", "b"], FAIL_BELOW * 100.0 - 0.1, EXPECTED).ok
    assert not GroupTest(["a", "b"], None, EXPECTED).ok  # no figure: the test failed to run
    assert GroupTest(["a", "b"], 1.0, None).ok  # no expectation: not judged


def test_each_node_gets_the_result_of_the_test_that_decided_it() -> None:
    """The rule both drivers conclude a sweep with: a blamed node fails on the slow pair
    that cornered it (its reason names that figure); the others pass on a passing group."""
    tests = [
        GroupTest(["a", "b", "c", "d"], 50.0, EXPECTED),
        GroupTest(["a", "b"], 99.0, EXPECTED),
        GroupTest(["c", "d"], 50.0, EXPECTED),
        GroupTest(["c", "a"], 98.0, EXPECTED),
        GroupTest(["d", "a"], 49.0, EXPECTED),
    ]
    mine = {n: [t for t in tests if n in t.group] for n in "abcd"}
    bad = node_result("d", mine["d"], ["d"])
    assert (bad.status, bad.measured) == (Status.FAIL, 49.0)
    assert bad.reason() == "health: allreduce-across 49 GB/s < 0.8 x expected 100 GB/s"
    good = node_result("c", mine["c"], ["d"])
    assert (good.status, good.measured) == (Status.PASS, 98.0)
    between = node_result("a", mine["a"][:2], [])  # slow with no one to blame: a link
    assert between.status is Status.WARN
    assert "no single node to blame" in between.detail


def test_the_figure_is_read_back_from_rank_zeros_last_json_line() -> None:
    assert figure_of('NCCL INFO ...\n{"busbw_gbps": 12.5, "ranks": 16}\n') == 12.5
    with pytest.raises(StopIteration):
        figure_of("rank 0 died before it printed\n")


def test_a_blueprint_without_a_fabric_expects_nothing_across_nodes() -> None:
    """`railyard up --blueprint` of nodes with no `fabric:` section started, printed its admin
    token, then stopped with a FabricError traceback here (issue 25)."""
    from railyard.blueprint import load_text
    from railyard.health.expect import group_expectation

    text = """
name: two-boxes
node_types:
  box: {gpu: H100-SXM-80GB, gpus: 8, power_w: 10000, price_usd: 1}
node_groups:
  gpu: {node_type: box, count: 2}
"""
    expect = group_expectation(load_text(text, file="two-boxes.yaml").blueprint)
    assert expect(["gpu001", "gpu002"], 8) is None
