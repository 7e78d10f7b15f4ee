"""The terminal's frames (`client.frames`): the reader and the relay's checker agree with a
plain reading of the stream however it is cut into pieces. (That a megabyte of tiny frames
no longer stalls the API, issue 52, is tests/security/test_edge.py's.)"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from railyard.client import frames
from tests.tiers import examples

KINDS = st.sampled_from(sorted(frames.TO_TASK))
FRAMES = st.lists(st.tuples(KINDS, st.binary(max_size=40)), max_size=30)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


@examples(200, 3000, settings(suppress_health_check=[HealthCheck.too_slow], deadline=None))
@given(FRAMES, st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_reader_and_checker_take_any_cut_of_the_stream(
    sent: list[tuple[bytes, bytes]], points: list[int]
) -> None:
    stream = b"".join(frames.frame(kind, payload) for kind, payload in sent)
    reader, checker, got = frames.FrameReader(), frames.FrameChecker(frames.TO_TASK), []
    for piece in cut(stream, points):
        got += reader.feed(piece)
        checker.check(piece)
    assert got == sent


def check_in_two(stream: bytes, split: int) -> None:
    checker = frames.FrameChecker(frames.TO_TASK)
    checker.check(stream[:split])
    checker.check(stream[split:])


def test_the_checker_refuses_a_frame_for_the_client_or_over_the_cap_wherever_it_is_cut() -> None:
    good = frames.frame(frames.STDIN, b"abc")
    for bad in (frames.frame(frames.STDOUT, b"x"),
                struct.pack(">cI", b"i", frames.MAX_FRAME_BYTES + 1)):  # fmt: skip
        stream = good + bad
        for split in range(len(stream) + 1):
            with pytest.raises(ValueError, match=r"not for the task|at most"):
                check_in_two(stream, split)
