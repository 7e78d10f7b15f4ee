"""Container images in the scheduler: nodes holding a job's image win ties, never a better
fit; a job's time limit runs from when its image was on its nodes, not while it pulls."""

from __future__ import annotations

from dataclasses import replace

from sched_fakes import flat_queues, job, nodes, running, schedule, state

from railyard.sched.lifecycle import time_limits
from railyard.sched.limits import Estimates
from railyard.sched.model import PULL_LIMIT_S

Q = flat_queues({"a": 1024})
IMG = "registry.example/nemo:24.05"


def with_image(inventory, holders, image=IMG):
    return [replace(n, images=frozenset({image})) if n.name in holders else n for n in inventory]


def test_a_one_node_job_goes_where_its_image_is_when_free_counts_tie():
    inventory = with_image(nodes(4), {"n2"})
    result = schedule(state(inventory, Q, [job("j", gpus=8, image=IMG)]))
    assert list(result.starts[0].placement) == ["n2"]
    plain = schedule(state(inventory, Q, [job("j", gpus=8)]))
    assert list(plain.starts[0].placement) == ["n0"]  # no image: inventory order, as before
    other = schedule(state(inventory, Q, [job("j", gpus=8, image="other:1")]))
    assert list(other.starts[0].placement) == ["n0"]


def test_the_image_never_beats_a_tighter_fit():
    inventory = with_image(nodes(2), {"n1"})
    run = [running(job("r", gpus=6), "n0:0-5")]  # n0 has 2 free, n1 (with the image) 8
    result = schedule(state(inventory, Q, [job("j", gpus=2, image=IMG)], run))
    assert result.starts[0].placement == {"n0": (6, 7)}


def test_a_gang_prefers_the_leaf_group_and_nodes_holding_its_image():
    # 8 nodes, 2 per leaf group: every group can hold the 2-node gang, lg2 has the image
    inventory = with_image(nodes(8), {"n4", "n5"})
    result = schedule(state(inventory, Q, [job("j", gpus=8, workers=2, image=IMG)]))
    assert set(result.starts[0].placement) == {"n4", "n5"}
    # across groups of one SU: inside the chosen group, holders first
    inventory = with_image(nodes(4, per_lg=4), {"n3"})
    result = schedule(state(inventory, Q, [job("j", gpus=8, workers=1, image=IMG)]))
    assert set(result.starts[0].placement) == {"n3"}
    gang = schedule(state(inventory, Q, [job("g", gpus=8, workers=2, image=IMG)]))
    assert "n3" in gang.starts[0].placement


def test_the_time_limit_runs_from_when_the_image_was_ready():
    limited = job("j", gpus=1, walltime_s=100.0, image=IMG, warn_before_s=10.0)
    pulling = running(limited, "n0:0", start_t_s=0.0)
    assert pulling.limit_from_t_s == PULL_LIMIT_S  # never reported: an hour at most
    acts = time_limits([pulling], {}, now_t_s=3000.0)
    assert acts.stop == ()  # a 50-minute pull costs it nothing
    assert acts.warn == ()
    assert time_limits([pulling], {}, now_t_s=PULL_LIMIT_S + 100.0).stop == ("j",)
    ready = replace(pulling, run_t_s=30.0)
    assert time_limits([ready], {}, now_t_s=125.0).stop == ()
    assert time_limits([ready], {}, now_t_s=125.0).warn == ("j",)
    assert time_limits([ready], {}, now_t_s=130.0).stop == ("j",)
    bare = running(replace(limited, image=None), "n0:0", start_t_s=0.0)
    assert time_limits([bare], {}, now_t_s=100.0).stop == ("j",)


def test_a_pulling_job_is_expected_to_end_a_limit_after_now():
    estimates = Estimates({}, {}, None, 5.0)
    pulling = running(job("j", gpus=1, walltime_s=100.0, image=IMG), "n0:0", start_t_s=0.0)
    assert estimates.running_end_t_s(pulling, now_t_s=50.0) == 150.0
    ready = replace(pulling, run_t_s=20.0)
    assert estimates.running_end_t_s(ready, now_t_s=50.0) == 120.0
