"""Find the slow nodes in a set whose collective is slow: seed 004's method.

Seed 004 (A3 Mega) runs NCCL tests over a set of nodes and compares the bus bandwidth with
what the set should reach; when a set is slow, it splits it and tests the halves until the
slow node is cornered. `find_slow` does that over any test of a group of nodes (`passes`:
True when the group's all_reduce reaches its fraction of the twin's prediction for that
placement): halves are tested apart, a failing half is split again, and a failing pair is
resolved against a node already known good (a pair alone cannot say which of its two is slow).
Each test is one collective over the group, so a cluster of N nodes with one slow node costs
about 2 log2(N) tests instead of N(N-1)/2 pairwise runs.

The search is a generator (`steps`): it yields each group to test and is sent its verdict, so
the control loop can run one test as a system job, go on scheduling while it runs, and feed the
result back steps later (`Bisection`); `find_slow` drives it in one go.

How a group's figure is judged (`GroupTest.ok`) and what each node's result is when the search
ends (`node_result`) live here too, so the live sweep (`control.loop.sweeps`) and the
simulator's (`sim.sweeps`) judge and conclude alike.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass

from railyard.health.result import Expected, Result, Status

Test = Callable[[Sequence[str]], bool]
Steps = Generator[list[str], bool, list[str]]
Check = Generator[list[str], bool, bool]


def steps(nodes: Sequence[str]) -> Steps:
    """Yield each group to test, receive whether it passed; return the nodes blamed.

    Both halves of a failing group are tested before either is searched, so nodes known good
    are found early and pairs can be resolved against them. A group that fails while both its
    halves pass blames no node (the fault is between them: a link, a switch); with no
    known-good node at all, both nodes of a failing pair are blamed."""
    good: set[str] = set()

    def check(group: Sequence[str]) -> Check:
        ok = yield list(group)
        if ok:
            good.update(group)
        return ok

    def search(group: Sequence[str]) -> Steps:
        """`group` failed: which of its nodes are slow."""
        if len(group) == 2:
            return (yield from pair(group))
        half = len(group) // 2
        halves = [group[:half], group[half:]]
        verdicts = []
        for h in halves:  # both halves first (see above)
            verdicts.append((yield from check(h)) if len(h) >= 2 else None)
        out: list[str] = []
        for h, ok in zip(halves, verdicts, strict=True):
            if ok is False:
                out += yield from search(h)
            elif ok is None:  # a lone node: test it beside a good one
                for node in h:
                    if not (yield from with_partner(node)):
                        out.append(node)
        return out

    def with_partner(node: str) -> Check:
        partner = next((g for g in sorted(good) if g != node), None)
        return True if partner is None else (yield from check([node, partner]))

    def pair(group: Sequence[str]) -> Steps:
        if not any(g not in group for g in good):
            return list(group)  # nothing to tell them apart with
        out: list[str] = []
        for node in group:
            if not (yield from with_partner(node)):
                out.append(node)
        return out

    if len(nodes) < 2 or (yield from check(nodes)):
        return []
    return (yield from search(list(nodes)))


def find_slow(nodes: Sequence[str], passes: Test) -> tuple[list[str], int]:
    """The nodes `passes` blames, and how many tests it took."""
    search = steps(nodes)
    tests = 0
    try:
        group = next(search)
        while True:
            tests += 1
            group = search.send(passes(group))
    except StopIteration as done:
        return list(done.value), tests


class Bisection:
    """`steps` driven one test at a time: `group` is the test to run next (None: done, and
    `blamed` holds the answer); `record` gives its verdict. `results` keeps every test run."""

    def __init__(self, nodes: Sequence[str]) -> None:
        self._search = steps(nodes)
        self.blamed: list[str] = []
        self.results: list[tuple[list[str], bool]] = []
        self.group: list[str] | None = None
        self._advance(None)

    def record(self, ok: bool) -> None:
        assert self.group is not None, "no test is waiting for a verdict"
        self.results.append((self.group, ok))
        self._advance(ok)

    def _advance(self, ok: bool | None) -> None:
        try:
            self.group = next(self._search) if ok is None else self._search.send(ok)
        except StopIteration as done:
            self.group, self.blamed = None, list(done.value)


# -- judging a sweep's tests and concluding it -------------------------------------------------

CHECK = "allreduce-across"  # the result each node of a sweep gets
FAIL_BELOW = 0.8  # of the expectation: NCCL's run-to-run spread is a few %, a bad link 2x
JOB_PREFIX = "health-across-"  # a group test's system job id: <prefix><start in ms>


@dataclass
class GroupTest:
    """One group's all_reduce: its figure and what it was judged against."""

    group: list[str]
    busbw_gbps: float | None  # None: the test printed no figure (it failed to run)
    expected: Expected | None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """At `FAIL_BELOW` of its expectation or more (no expectation: not judged, passes)."""
        if self.busbw_gbps is None:
            return False
        return self.expected is None or self.busbw_gbps >= FAIL_BELOW * self.expected.value


def node_result(node: str, tests: Sequence[GroupTest], blamed: Sequence[str]) -> Result:
    """A node's result when the search over it ended (`tests`: those with it in the group):
    the last slow group that cornered it (blamed: the pair with a node known good, when there
    was one), else its first passing group. A slow group with no blamed node in it warns its
    nodes (a link, a switch: no single node to blame)."""
    assert tests, f"{node} was in no test"
    slow = [t for t in tests if not t.ok]
    unexplained = [t for t in slow if not set(t.group) & set(blamed)]
    guilty = node in blamed
    test = slow[-1] if guilty and slow else next((t for t in tests if t.ok), tests[-1])
    judged = test.expected is not None
    status = (
        Status.FAIL
        if guilty
        else Status.SKIP
        if not judged
        else Status.WARN
        if unexplained
        else Status.PASS
    )
    detail = test.detail or f"all_reduce over {', '.join(test.group)}"
    if unexplained and not guilty:
        detail = f"{detail}; slow with {', '.join(unexplained[0].group)}, no single node to blame"
    return Result(
        check=CHECK,
        node=node,
        status=status,
        measured=test.busbw_gbps,
        expected=test.expected.value if test.expected else None,
        unit="GB/s",
        fail_below=FAIL_BELOW if judged else None,
        source=test.expected.source if test.expected else "no expectation (not judged)",
        detail=detail[:500],
    )
