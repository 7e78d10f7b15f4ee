"""`perf validate --holdout-by source`: sources found as a reader would group them, bands made
without a source judged on it, and the conformal width checked by hand."""

from __future__ import annotations

import json
import statistics

import pytest
from typer.testing import CliRunner

from railyard.cli.design import full_app
from railyard.twin.holdout import calibrated_half_width, held_out, source_key
from railyard.twin.validate_train import ValidationResult

ROWS = {
    "c01": {"id": "c01", "source": "https://github.com/Azure/AI-benchmarking-guide (Azure)"},
    "c02": {"id": "c02", "source": "same as c01"},
    "t01": {"id": "t01", "source": "Narayanan et al. SC'21 (arXiv 2104.04473) Table 1"},
    "t02": {"id": "t02", "source": "Dubey et al. 2024, The Llama 3 Herd (arXiv 2407.21783)"},
    "t03": {"id": "t03", "source": "Dubey et al. 2024 (arXiv 2407.21783) section 3.3.2"},
    "s01": {"id": "s01", "source": "seed 004_076d7fa115f1ffe8.txt (Google Cloud blog)"},
}


@pytest.mark.parametrize(
    ("row", "key"),
    [
        ("c01", "Azure/AI-benchmarking-guide"),
        ("c02", "Azure/AI-benchmarking-guide"),  # "same as c01" is c01's source
        ("t01", "arXiv 2104.04473"),
        ("t02", "Dubey 2024"),
        ("t03", "Dubey 2024"),  # one paper, cited two ways
        ("s01", "seed 004"),
    ],
)
def test_rows_citing_one_publication_are_one_source(row: str, key: str) -> None:
    assert source_key(ROWS[row], ROWS) == key


def test_the_conformal_width_is_the_kth_smallest_held_out_score() -> None:
    """Sources a (0.0, 0.1), b (0.2), c (-0.1): each scored against the others' median.
    a's errors against median(0.2, -0.1) = 0.05: 0.05, 0.05; b's against median(0, 0.1, -0.1)
    = 0: 0.2; c's against median(0, 0.1, 0.2) = 0.1: 0.2. Scores 0.05 0.05 0.2 0.2; 50%:
    k = ceil(0.5 x 5) = 3 -> 0.2; 80%: k = 4 -> 0.2; 90%: k = 5 > 4 scores -> none."""
    by_source = {"a": [0.0, 0.1], "b": [0.2], "c": [-0.1]}
    assert calibrated_half_width(by_source, 0.5) == pytest.approx(0.2)
    assert calibrated_half_width(by_source, 0.8) == pytest.approx(0.2)
    assert calibrated_half_width(by_source, 0.9) is None


def test_each_source_is_judged_by_bands_made_without_it() -> None:
    rows = [{"id": f"r{i}", "source": f"Author{i} et al. 2020", "gpu": "H100-SXM-80GB"}
            for i in range(5)]  # fmt: skip
    errors = [0.0, 0.02, -0.02, 0.01, 0.5]  # the last source is far off the others
    checks = [
        ValidationResult(f"r{i}", "training", "q", 100.0, 100.0 * (1 + e), "TFLOP/s")
        for i, e in enumerate(errors)
    ]
    [training, per_gpu] = held_out(checks, rows)
    assert (training.kind, per_gpu.kind) == ("training", "training on H100-SXM-80GB")
    assert (training.rows, training.sources, training.judged) == (5, 5, 5)
    assert training.max_abs_error == pytest.approx(0.5)
    # r4's 50% lies outside every band made without it, and so does the lowest error, r2's
    # -2% (the others' range is 0% to 50%): a min-max band misses a source's extremes
    assert training.range_covered == 3
    assert training.calibrated_coverage is not None
    assert training.calibrated_coverage <= 0.8
    # centered by the others' median: r4 against median(0, 0.02, -0.02, 0.01) = 0.005 keeps
    # 1.5 / 1.005 - 1 of its error; r0 against median(0.02, -0.02, 0.01, 0.5) = 0.015
    assert training.centered_max_abs_error == pytest.approx(1.5 / 1.005 - 1)
    by_hand = [
        abs((1 + e) / (1 + statistics.median(errors[:i] + errors[i + 1 :])) - 1)
        for i, e in enumerate(errors)
    ]
    assert by_hand[0] == pytest.approx(1 - 1 / 1.015)
    assert training.centered_mean_abs_error == pytest.approx(statistics.fmean(by_hand))


def test_a_source_off_by_the_common_bias_is_predicted_by_the_center() -> None:
    """Five sources all 15% optimistic: held out, each is 15% off, but the others' median
    takes that bias out, so the centered figure lands on it."""
    rows = [{"id": f"r{i}", "source": f"Author{i} et al. 2020", "gpu": "H100-SXM-80GB"}
            for i in range(5)]  # fmt: skip
    checks = [ValidationResult(f"r{i}", "training", "q", 100.0, 115.0, "TFLOP/s") for i in range(5)]
    [training, _] = held_out(checks, rows)
    assert training.mean_abs_error == pytest.approx(0.15)
    assert training.centered_max_abs_error == pytest.approx(0.0, abs=1e-12)


def test_the_cli_reports_held_out_coverage_per_kind() -> None:
    runner, app = CliRunner(env={"COLUMNS": "160"}), full_app()
    result = runner.invoke(app, ["perf", "validate", "--holdout-by", "source", "--json"])
    assert result.exit_code == 0, result.output
    kinds = {k["kind"]: k for k in json.loads(result.output)}
    assert kinds["training"]["judged"] >= 20
    assert 0 <= kinds["training"]["calibrated_coverage"] <= 1
    centered = kinds["training"]["centered_mean_abs_error"]
    assert 0 <= centered < kinds["training"]["mean_abs_error"]  # the shipped rows share a bias
    assert kinds["kernel"]["centered_mean_abs_error"] is None  # two sources: nothing judged
    wrong = runner.invoke(app, ["perf", "validate", "--holdout-by", "gpu"])
    assert wrong.exit_code == 2
    assert "--holdout-by: 'gpu' is not a grouping" in wrong.output


def test_the_verdict_says_when_a_band_is_wider_or_narrower_than_it_states() -> None:
    from railyard.twin.holdout import HeldOut

    def verdict(covered: int, judged: int = 20, shipped: float | None = 0.1) -> str:
        return HeldOut("k", judged, 4, 0.1, 0.2, judged, covered, covered, 0.8,
                       shipped_half_width=shipped).verdict  # fmt: skip

    assert verdict(16) == "calibrated"
    assert verdict(15) == "calibrated"  # 75%: the low end
    assert verdict(14) == "narrower than it says"
    assert verdict(18) == "wider than needed"
    assert verdict(5, judged=5).startswith("too few judged")
    assert verdict(16, shipped=None).startswith("no interval")
    three = HeldOut("k", 20, 3, 0.1, 0.2, 20, 16, 16, 0.8, shipped_half_width=0.1)
    assert three.verdict == "calibrated (indicative: held-out bands from 2 sources)"
