"""Hierarchical quota with borrowing and lending, in the spirit of Kueue's cohort tree.

Per flavor, every queue q has its own nominal N(q). What a subtree offers its parent is its
*pool* minus the part it never lends (the *guaranteed* part):

    pool(q)       = N(q) + sum(pool(c) - guaranteed(c) for c in children(q))
    guaranteed(q) = max(0, pool(q) - lending_limit(q))      (0 when no lending limit)
    used(q)       = GPUs of q's jobs (leaf) | sum(max(0, used(c) - guaranteed(c))) (inner)

A queue may use its guaranteed part plus what its parent has available, capped by its
borrowing limit (beyond its pool). The recursion up the tree is `available()`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from railyard.sched.model import Queue

T = TypeVar("T")


class QuotaTree:
    """Quota bookkeeping for one cycle; `add`/`remove` are O(depth) and reversible."""

    def __init__(self, queues: Sequence[Queue], flavors: Iterable[str] = ()) -> None:
        self.queues = {q.name: q for q in sorted(queues, key=lambda q: q.name)}
        if len(self.queues) != len(queues):
            raise ValueError("duplicate queue names")
        self.parent: dict[str, str | None] = {}
        self.children: dict[str, list[str]] = {n: [] for n in self.queues}
        for q in self.queues.values():
            if q.parent is not None and q.parent not in self.queues:
                raise ValueError(f"queue {q.name}: unknown parent {q.parent}")
            self.parent[q.name] = q.parent
            if q.parent is not None:
                self.children[q.parent].append(q.name)
        self.paths = {n: self._path(n) for n in self.queues}
        all_flavors = set(flavors)
        for q in self.queues.values():
            all_flavors.update(q.nominal_gpus)
        self.flavors = sorted(all_flavors)
        self.pool: dict[tuple[str, str], int] = {}
        self.guaranteed: dict[tuple[str, str], int] = {}
        self.subtree_nominal: dict[tuple[str, str], int] = {}
        for f in self.flavors:
            for root in (n for n, p in self.parent.items() if p is None):
                self._fill(root, f)
        self.used: dict[tuple[str, str], int] = {}
        self.total: dict[tuple[str, str], int] = {}  # all GPUs of jobs in the subtree
        self._memo: dict[tuple[str, str], int] = {}
        self._reclaim_memo: dict[tuple[str, str, str, int], bool] = {}
        self._borrowing_memo: dict[str, bool] = {}
        self._path_keys: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._exposed: dict[tuple[str, str], list[tuple[str, str]]] = {}  # see reclaim_exposed
        self._used_behind: list[tuple[str, str, int]] | None = None  # see ask_moved

    def _path(self, name: str) -> tuple[str, ...]:
        out = [name]
        seen = {name}
        while (p := self.parent[out[-1]]) is not None:
            if p in seen:
                raise ValueError(f"queue cycle through {p}")
            seen.add(p)
            out.append(p)
        return tuple(reversed(out))

    def _fill(self, name: str, flavor: str) -> None:
        q = self.queues[name]
        pool = q.nominal_gpus.get(flavor, 0)
        nominal = pool
        for c in self.children[name]:
            self._fill(c, flavor)
            pool += self.pool[c, flavor] - self.guaranteed[c, flavor]
            nominal += self.subtree_nominal[c, flavor]
        lend = q.lending_limit_gpus.get(flavor)
        self.pool[name, flavor] = pool
        self.guaranteed[name, flavor] = 0 if lend is None else max(0, pool - lend)
        self.subtree_nominal[name, flavor] = nominal

    def is_leaf(self, name: str) -> bool:
        return name in self.queues and not self.children[name]

    def nominal(self, name: str, flavor: str) -> int:
        return self.queues[name].nominal_gpus.get(flavor, 0)

    def available(self, name: str, flavor: str) -> int:
        """GPUs of `flavor` a job in queue `name` could still take right now (memoised until
        the next change of usage: most jobs of a cycle ask about unchanged queues)."""
        key = (name, flavor)
        memo = self._memo.get(key)
        if memo is None:
            memo = self._memo[key] = self._available(name, flavor)
        return memo

    def _available(self, name: str, flavor: str) -> int:
        if self._used_behind is not None:
            self._catch_up()
        key = (name, flavor)
        if key not in self.pool:
            return 0
        used = self.used.get(key, 0)
        parent = self.parent[name]
        if parent is None:
            return self.pool[key] - used
        guaranteed = self.guaranteed[key]
        local = max(0, guaranteed - used)
        from_parent = self.available(parent, flavor)
        borrow = self.queues[name].borrowing_limit_gpus.get(flavor)
        if borrow is not None:
            stored = self.pool[key] - guaranteed
            used_in_parent = max(0, used - guaranteed)
            from_parent = min(from_parent, stored - used_in_parent + borrow)
        return local + from_parent

    def fits(self, name: str, flavor: str, gpus: int) -> bool:
        return self.available(name, flavor) >= gpus

    def add(self, name: str, flavor: str, gpus: int) -> None:
        self._apply(name, flavor, gpus)

    def remove(self, name: str, flavor: str, gpus: int) -> None:
        self._apply(name, flavor, -gpus)

    def ask_moved(
        self,
        from_queue: str,
        from_gpus: int,
        to_queue: str,
        to_gpus: int,
        flavor: str,
        question: Callable[[], T],
    ) -> T:
        """`question`'s answer with `from_gpus` of `from_queue` taken away and `to_gpus`
        given to `to_queue` (a victim swapped for its preemptor), all undone before
        returning. Time slicing asks hundreds of these a cycle, so they are cheap: what was
        memoised before stays valid after and is kept aside rather than thrown away, and
        `used` is brought along only if the question reads availability (asking whether the
        victim would reclaim reads only the totals)."""
        if self._used_behind is not None:  # asked inside another's question
            self._catch_up()
        saved = self._memo, self._reclaim_memo, self._borrowing_memo
        self._memo, self._reclaim_memo, self._borrowing_memo = {}, {}, {}
        self._move_total(from_queue, flavor, -from_gpus)
        self._move_total(to_queue, flavor, to_gpus)
        self._used_behind = [(from_queue, flavor, -from_gpus), (to_queue, flavor, to_gpus)]
        try:
            return question()
        finally:
            self._move_total(to_queue, flavor, -to_gpus)
            self._move_total(from_queue, flavor, from_gpus)
            if self._used_behind is None:  # the question read availability: undo it too
                self._move_used(to_queue, flavor, -to_gpus)
                self._move_used(from_queue, flavor, from_gpus)
            self._used_behind = None
            self._memo, self._reclaim_memo, self._borrowing_memo = saved

    def _apply(self, name: str, flavor: str, delta: int) -> None:
        self._memo.clear()
        self._reclaim_memo.clear()
        self._borrowing_memo.clear()
        self._move_total(name, flavor, delta)
        self._move_used(name, flavor, delta)

    def _keys(self, name: str, flavor: str) -> list[tuple[str, str]]:
        """(queue, flavor) from the queue up to its root, made once."""
        keys = self._path_keys.get((name, flavor))
        if keys is None:
            keys = self._path_keys[name, flavor] = [(q, flavor) for q in reversed(self.paths[name])]
        return keys

    def _move_total(self, name: str, flavor: str, delta: int) -> None:
        total = self.total
        for key in self._keys(name, flavor):
            total[key] = total.get(key, 0) + delta

    def _move_used(self, name: str, flavor: str, delta: int) -> None:
        if self._used_behind is not None:
            self._catch_up()
        used, guaranteed = self.used, self.guaranteed
        for key in self._keys(name, flavor):
            if not delta:
                break
            old = used.get(key, 0)
            new = old + delta
            used[key] = new
            g = guaranteed.get(key, 0)
            delta = max(0, new - g) - max(0, old - g)

    def _catch_up(self) -> None:
        """Bring `used` along with the totals of an `ask_moved` before it is read."""
        behind, self._used_behind = self._used_behind, None
        for name, flavor, delta in behind or ():
            self._move_used(name, flavor, delta)

    def borrowing(self, flavor: str) -> bool:
        """Does any queue below a root use more than its subtree's nominal? If none does,
        nobody can reclaim anything (:meth:`reclaimable` needs such a branch): a pass asks
        before it looks for reclaim victims among thousands of running jobs."""
        hit = self._borrowing_memo.get(flavor)
        if hit is None:
            total, nominal = self.total, self.subtree_nominal
            hit = self._borrowing_memo[flavor] = any(
                total.get((q, flavor), 0) > nominal.get((q, flavor), 0)
                for q, parent in self.parent.items()
                if parent is not None
            )
        return hit

    def reclaim_exposed(self, name: str, flavor: str, gpus: int) -> bool:
        """Would `gpus` more in queue `name` take a queue on its path over its subtree's
        nominal where a sibling holds a nominal of its own, and so be open to reclaim?
        What a team's only queue takes of the team's own nominal, no other branch may take
        back: the job is within its team's quota, not borrowing from another's."""
        levels = self._exposed.get((name, flavor))
        if levels is None:
            if name not in self.paths:
                return False
            levels = self._exposed[name, flavor] = [
                (q, f)
                for q, f in self._keys(name, flavor)
                if (parent := self.parent[q]) is not None
                and any(
                    self.subtree_nominal.get((s, f), 0) for s in self.children[parent] if s != q
                )
            ]
        total, nominal = self.total, self.subtree_nominal
        return any(total.get(key, 0) + gpus > nominal.get(key, 0) for key in levels)

    def may_reclaim(self, preemptor_queue: str, flavor: str, gpus: int) -> bool:
        """Could the preemptor reclaim from anyone? Some queue on its path below the root
        must stay within its nominal after taking `gpus` (see :meth:`reclaimable`)."""
        return any(
            self.total.get((q, flavor), 0) + gpus <= self.subtree_nominal.get((q, flavor), 0)
            for q in self.paths.get(preemptor_queue, ())[1:]
        )

    def reclaimable(self, victim_queue: str, preemptor_queue: str, flavor: str, gpus: int) -> bool:
        """May the preemptor take back quota from the victim's queue? (Memoised until the
        next change of usage, like :meth:`available`.)"""
        key = (victim_queue, preemptor_queue, flavor, gpus)
        hit = self._reclaim_memo.get(key)
        if hit is None:
            hit = self._reclaim_memo[key] = self._reclaimable(*key)
        return hit

    def _reclaimable(self, victim_queue: str, preemptor_queue: str, flavor: str, gpus: int) -> bool:
        """May the preemptor take back quota from the victim's queue?

        Below their lowest common ancestor, the preemptor's branch must stay within its own
        nominal after taking `gpus`, and the victim's branch must use more than its nominal
        (it runs on quota borrowed from elsewhere under that ancestor). A queue deeper on the
        victim's side that borrows from its own siblings borrows nothing of the preemptor's:
        counting it let two branches of an over-committed tree (5 GPUs of nominal on a node
        of 4) reclaim from each other forever.
        """
        split = self._split(victim_queue, preemptor_queue)
        if split is None:
            return False
        mine, theirs = split
        if self.total.get((mine, flavor), 0) + gpus > self.subtree_nominal.get((mine, flavor), 0):
            return False
        return self.total.get((theirs, flavor), 0) > self.subtree_nominal.get((theirs, flavor), 0)

    def _split(self, victim_queue: str, preemptor_queue: str) -> tuple[str, str] | None:
        """The preemptor's and the victim's branches right under their lowest common
        ancestor; None if they are one queue, in two trees, or one is above the other."""
        pv, pp = self.paths[victim_queue], self.paths[preemptor_queue]
        if pv[0] != pp[0] or victim_queue == preemptor_queue:
            return None
        depth = 0
        while depth < min(len(pv), len(pp)) and pv[depth] == pp[depth]:
            depth += 1
        if depth >= len(pp) or depth >= len(pv):
            return None
        return pp[depth], pv[depth]

    def reclaimable_moved(
        self,
        from_queue: str,
        from_gpus: int,
        to_queue: str,
        to_gpus: int,
        flavor: str,
        gpus: int,
    ) -> bool:
        """`reclaimable(to_queue, from_queue, flavor, gpus)` as `ask_moved(from_queue,
        from_gpus, to_queue, to_gpus, ...)` would answer it, moving nothing: would a victim
        of `from_queue`, swapped out for a preemptor of `to_queue`, take its quota back?
        The two branches below the common ancestor are each on one path only, so the move
        shifts each by one side's GPUs. Time slicing asks this of hundreds of victim
        classes a cycle."""
        split = self._split(to_queue, from_queue)
        if split is None:
            return False
        mine, theirs = (split[0], flavor), (split[1], flavor)
        total, nominal = self.total, self.subtree_nominal
        if total.get(mine, 0) - from_gpus + gpus > nominal.get(mine, 0):
            return False
        return total.get(theirs, 0) + to_gpus > nominal.get(theirs, 0)

    def branch_between(self, victim_queue: str, preemptor_queue: str) -> str | None:
        """The victim's branch right under its common ancestor with the preemptor: the one
        :meth:`reclaimable` asks to be borrowing (None: no such branch)."""
        pv, pp = self.paths.get(victim_queue, ()), self.paths.get(preemptor_queue, ())
        depth = 0
        while depth < min(len(pv), len(pp)) and pv[depth] == pp[depth]:
            depth += 1
        if not pv or not pp or pv[0] != pp[0] or depth >= len(pv) or depth >= len(pp):
            return None
        return pv[depth]

    def borrowed(self, branch: str, flavor: str) -> int:
        """GPUs the branch uses beyond its subtree's nominal quota."""
        return self.total.get((branch, flavor), 0) - self.subtree_nominal.get((branch, flavor), 0)
