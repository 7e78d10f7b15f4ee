"""``railyard perf validate``: every row of the published-measurement table, predicted.

One list of checks, whatever the row's kind, each with its target from the issue: collectives
and training throughput within 10%, memory within 5%, checkpoint time within 15%. The
collective rows and the training rows use the same network model, built for each row's
cluster by :mod:`railyard.twin.reference`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from importlib import resources

from railyard.twin.collective import CollectiveModel
from railyard.twin.reference import reference_blueprint
from railyard.twin.train import CommModel
from railyard.twin.validate_collective import read_reference, validate_collectives
from railyard.twin.validate_train import ValidationResult, validate_training


def _size(size_bytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:g} {unit}"
    return f"{size_bytes} B"


def shipped_reference() -> list[dict[str, str]]:
    """The table shipped in the package (a copy of shared/data/perf_reference.csv)."""
    path = resources.files("railyard.data").joinpath("perf_reference.csv")
    with resources.as_file(path) as file:
        return read_reference(file)


def _comm_for(row: Mapping[str, str]) -> CommModel:
    return CollectiveModel(reference_blueprint(row))


def validate_all(rows: Sequence[dict[str, str]] | None = None) -> list[ValidationResult]:
    """A check per predicted figure, in the table's order."""
    table = list(rows) if rows is not None else shipped_reference()
    checks = [
        ValidationResult(c.row_id, "collective", f"{c.op} busbw, {c.nodes}x{c.gpus_per_node} "
                         f"GPUs, {_size(c.size_bytes)}", c.published_gbyte_s,
                         c.predicted_gbyte_s, "GB/s", f"{c.algo}/{c.protocol}")
        for c in validate_collectives(table)
    ]  # fmt: skip
    checks += validate_training(table, comm_factory=_comm_for)
    order = {row["id"]: i for i, row in enumerate(table)}
    return sorted(checks, key=lambda c: order.get(c.row_id.split(".")[0], len(order)))
