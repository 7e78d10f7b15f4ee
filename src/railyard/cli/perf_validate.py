"""``railyard perf validate``: the twin against published figures, and its held-out protocol.

Like the rest of ``railyard perf``, the model is imported when the command runs.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated, Any

import typer

from railyard.cli.args import fail


def validate(
    csv_file: Annotated[str | None, typer.Option("--csv", help="your own table, same columns")] = (
        None
    ),
    write_bands: Annotated[bool, typer.Option(help="rewrite the shipped error bands")] = False,
    holdout_by: Annotated[
        str | None,
        typer.Option(
            help="source: judge each source's rows by bands made without them "
            "(leave one source out), per kind"
        ),
    ] = None,
    coverage: Annotated[
        float, typer.Option(help="the calibrated interval's stated coverage (--holdout-by)")
    ] = 0.8,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Predicted vs published for every row of the shipped (or your own) reference table."""
    from rich.console import Console
    from rich.table import Table

    from railyard.twin.validate import TableError, read_table, shipped_reference, validate_all

    try:
        rows = read_table(csv_file) if csv_file else None
        checks = validate_all(rows, file=csv_file or "")
    except TableError as exc:
        fail(str(exc))
    if write_bands:
        _write_bands(checks, rows or shipped_reference())
    if holdout_by is not None:
        _held_out(checks, rows or shipped_reference(), holdout_by, coverage, as_json)
        return
    if as_json:
        out = [{**dataclasses.asdict(c), "error": c.error, "target": c.target,
                "within_target": c.within_target} for c in checks]  # fmt: skip
        print(json.dumps(out, indent=2))
        return
    source = csv_file or "data/perf_reference.csv"
    table = Table(title=f"railyard perf validate: predicted vs published ({source})")
    for column in ("row", "kind", "quantity", "published", "predicted", "unit", "error", "ok"):
        table.add_column(
            column, justify="right" if column in ("published", "predicted", "error") else "left"
        )
    for c in checks:
        ok = "[green]yes[/green]" if c.within_target else f"[red]no (±{c.target:.0%})[/red]"
        table.add_row(c.row_id, c.kind, c.quantity, f"{c.published:.4g}", f"{c.predicted:.4g}",
                      c.unit, f"{c.error:+.1%}", ok)  # fmt: skip
    console = Console()
    console.print(table)
    within = sum(c.within_target for c in checks)
    console.print(f"{within} of {len(checks)} figures within target")
    causes: dict[str, list[str]] = {}
    for c in checks:
        if not c.within_target:
            cause = c.note.split("miss: ", 1)[1] if "miss: " in c.note else "cause not known"
            causes.setdefault(cause, []).append(f"{c.row_id} {c.error:+.0%}")
    if causes:
        console.print("misses and their causes:")
        for cause, ids in causes.items():
            console.print(f"- {', '.join(ids)}: {cause}")


def _held_out(
    checks: list[Any], rows: list[dict[str, str]], by: str, coverage: float, as_json: bool
) -> None:
    """`perf validate --holdout-by source`: per kind, errors and held-out band coverage."""
    from rich.console import Console
    from rich.table import Table

    from railyard.twin.holdout import held_out

    if by != "source":
        fail(f"--holdout-by: {by!r} is not a grouping (hint: --holdout-by source)")
    if not 0 < coverage < 1:
        fail(f"--coverage: {coverage:g} is not a fraction (hint: e.g. 0.8)")
    found = held_out(checks, rows, coverage)
    if as_json:
        out = [{**dataclasses.asdict(h), "range_coverage": h.range_coverage,
                "calibrated_coverage": h.calibrated_coverage, "verdict": h.verdict}
               for h in found]  # fmt: skip
        print(json.dumps(out, indent=2))
        return

    def share(part: float | None) -> str:
        return "-" if part is None else f"{part:.0%}"

    def error(part: float | None) -> str:
        return "-" if part is None else f"{part:.1%}"

    def width(part: float | None) -> str:
        return "-" if part is None else f"±{part:.1%}"

    table = Table(title=f"railyard perf validate: each source held out ({coverage:.0%} bands)")
    for column in ("kind", "rows", "sources", "mean |err|", "max |err|", "judged",
                   "min-max band", f"{coverage:.0%} band", "held-out width",
                   "shipped width", "centered mean", "centered max", "verdict"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("kind", "verdict") else "right")
    for h in found:
        table.add_row(h.kind, str(h.rows), str(h.sources), f"{h.mean_abs_error:.1%}",
                      f"{h.max_abs_error:.1%}", str(h.judged), share(h.range_coverage),
                      share(h.calibrated_coverage), width(h.held_out_half_width),
                      width(h.shipped_half_width), error(h.centered_mean_abs_error),
                      error(h.centered_max_abs_error), h.verdict)  # fmt: skip
    console = Console()
    console.print(table)
    console.print(
        "judged: rows of a source with at least two other sources to make bands from; a "
        "band covers a row when it holds the row's error; held-out width: the mean half-width "
        "of the bands that judged them; verdict: calibrated when 75-85% held; centered: a "
        "judged row's error once "
        "the other sources' median error is taken out (what `perf train`'s \"published runs "
        'imply" figure would have missed it by)'
    )


def _write_bands(checks: list[Any], rows: list[dict[str, str]]) -> None:
    from importlib import resources

    from railyard.twin.bands import BANDS_FILE, compute_bands, write_bands

    target = resources.files("railyard.data").joinpath(BANDS_FILE)
    write_bands(compute_bands(checks, rows), str(target))
    typer.echo(f"wrote {target}", err=True)


__all__ = ["validate"]
