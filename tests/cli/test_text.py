"""How the control-plane commands print placements."""

from __future__ import annotations

from railyard.cli.text import placement


def test_placement_names_gpus_per_node_and_cpu_jobs_by_node() -> None:
    assert placement({"n02": [0, 1, 2, 3, 6], "n01": [7]}) == "n01:7 n02:0-3,6"
    assert placement({"vm": []}) == "vm"  # a CPU job holds no GPU there
    assert placement(None) == ""
