"""Slurm hostlist expressions: hand cases from the Slurm manuals, errors, the cap, and round
trips (a job's SLURM_JOB_NODELIST among them)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from railyard.client.hostlists import MAX_NAMES, compress_hostlist, expand_hostlist
from railyard.exec.task.launch import allocation, allocation_env


@pytest.mark.parametrize(
    ("names", "expr"),
    [
        (["gpu001", "gpu002", "gpu003", "gpu007"], "gpu[001-003,007]"),
        (["a1", "a2", "b3"], "a[1-2],b3"),
        (["login"], "login"),
        (["n9", "n10", "n11"], "n[9-11]"),  # unpadded numbers may grow a digit in one range
        (["gpu099", "gpu100", "gpu101"], "gpu[099-101]"),
        (["su0-lg0", "su0-lg1", "su1-lg0"], "su0-lg[0-1],su1-lg0"),
        (["tux0", "tux1", "tux2", "tux3", "tux12", "tux18", "tux19", "tux20"], "tux[0-3,12,18-20]"),
        (["a01", "a1"], "a01,a1"),  # different padding cannot share a bracket
        (["n10", "n9"], "n[10,9]"),  # input order is kept
        ([], ""),
    ],
)
def test_compress_hand_cases(names: list[str], expr: str) -> None:
    assert compress_hostlist(names) == expr
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("s[0-2,4-8,12]", ["s0", "s1", "s2", "s4", "s5", "s6", "s7", "s8", "s12"]),
        ("a[08-10]", ["a08", "a09", "a10"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("gpu[1-2],login,cpu[01-02]", ["gpu1", "gpu2", "login", "cpu01", "cpu02"]),
        ("node[1-2]-ib", ["node1-ib", "node2-ib"]),
        ("  n[1-2] ", ["n1", "n2"]),
        ("   ", []),
    ],
)
def test_expand_hand_cases(expr: str, names: list[str]) -> None:
    assert expand_hostlist(expr) == names


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("gpu[3-1]", "runs backwards"),
        ("gpu[1-3", "unclosed"),
        ("gpu1-3]", "unmatched"),
        ("a[[1-2]]", "nested"),
        ("a[]", "bad range"),
        ("a[1-]", "bad range"),
        ("a[x-y]", "bad range"),
        ("a,,b", "empty name"),
    ],
)
def test_expand_rejects_malformed(expr: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        expand_hostlist(expr)


@pytest.mark.parametrize("bad", ["", "a b", "a,b", "x[1]"])
def test_compress_rejects_unusable_names(bad: str) -> None:
    with pytest.raises(ValueError, match="cannot put"):
        compress_hostlist(["ok1", bad])


_names = st.builds(
    lambda prefix, width, number: f"{prefix}{number:0{width}d}",
    st.sampled_from(["gpu", "n", "rack1-node", "su2-lg", "x"]),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=1200),
)


@given(st.lists(_names, max_size=60, unique=True).map(sorted))
def test_round_trip_sorted_unique(names: list[str]) -> None:
    assert expand_hostlist(compress_hostlist(names)) == names


@given(st.lists(st.one_of(_names, st.sampled_from(["login", "mgmt-a"])), max_size=40))
def test_round_trip_any_order(names: list[str]) -> None:
    assert expand_hostlist(compress_hostlist(names)) == names


def test_the_documented_examples() -> None:
    assert expand_hostlist("gpu[001-003,005],login1") == [
        "gpu001", "gpu002", "gpu003", "gpu005", "login1",
    ]  # fmt: skip
    assert expand_hostlist("a[1-2]-b[3-4]") == ["a1-b3", "a1-b4", "a2-b3", "a2-b4"]
    assert compress_hostlist(["gpu001", "gpu002", "gpu003"]) == "gpu[001-003]"


@pytest.mark.parametrize(
    "expr",
    [
        f"n[1-{MAX_NAMES + 1}]",
        "n[0-999999999999]",  # refused before a list is built
        f"a[1-{MAX_NAMES}],b",
        "r[1-300]n[1-300]",  # each group small, the product too many
        "x[1-2]" * 40,  # 2**40: refused at the seventeenth group
    ],
)
def test_expand_refuses_more_than_the_cap(expr: str) -> None:
    with pytest.raises(ValueError, match=f"over {MAX_NAMES} hosts") as err:
        expand_hostlist(expr)
    assert "\n" not in str(err.value)
    assert len(str(err.value)) < 120


def test_the_cap_itself_expands() -> None:
    assert len(expand_hostlist(f"n[1-{MAX_NAMES}]")) == MAX_NAMES


def test_a_long_malformed_list_is_one_short_line() -> None:
    with pytest.raises(ValueError, match="unclosed") as err:
        expand_hostlist("gpu" * 10_000 + "[1-2")
    assert len(str(err.value)) < 120


@given(st.lists(_names, min_size=1, max_size=30, unique=True))
def test_the_job_nodelist_reads_back_exactly(names: list[str]) -> None:
    """SLURM_JOB_NODELIST as the executor writes it expands to the job's nodes, in order."""
    nodes = allocation({name: [] for name in names})
    env = allocation_env(nodes, nodes[0])
    assert expand_hostlist(env["SLURM_JOB_NODELIST"]) == names
    assert env["SLURM_NODELIST"] == env["SLURM_JOB_NODELIST"]
