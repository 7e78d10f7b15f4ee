"""srun's ``-l/--label`` prefix, shared by the job's srun and ``railyard run``."""

from __future__ import annotations


def label_of(rank: int, ntasks: int) -> bytes:
    """The prefix of rank ``rank``'s lines in a step of ``ntasks`` tasks: ``0: ``, the rank
    right-aligned to the widest one (`` 3: `` among 16 tasks), as srun 22.05 prints it."""
    return f"{rank:>{len(str(max(ntasks - 1, 0)))}}: ".encode()
