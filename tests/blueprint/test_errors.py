"""Bad input gets one line naming file, line and field, with a hint."""

from __future__ import annotations

from importlib import resources

import pytest

from railyard.blueprint import BlueprintError, load, load_text

GAGGLE = resources.files("railyard.blueprint.presets").joinpath("gaggle-h100.yaml").read_text()


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    ("old", "new", "field", "hint"),
    [
        ("speed_gbit_s: 400 Gb/s", "speed_gbps: 400 Gb/s", "nics.speed_gbps", "speed_gbit_s"),
        ("speed_gbit_s: 400 Gb/s", "speed_gbit_s: 10 TB", "nics.speed_gbit_s", ""),
        ("node_type: dgx-h100,", "node_type: dgx-h10,", "node_groups.dgx.node_type", "dgx-h100"),
        ("gpu: H100-SXM-80GB", "gpu: H100-SXM", "dgx-h100.gpu", "H100-SXM-80GB"),
        ("design: rail-optimized", "design: rail-optimised", "fabric.design", "rail-optimized"),
        ("- {switch: QM9700}", "- {switch: QM970}", "fabric.tiers[0].switch", "QM9700"),
        ("count: 12,", "count: -1,", "node_groups.dgx.count", ""),
    ],
)
def test_field_errors_name_file_line_field_and_hint(
    old: str, new: str, field: str, hint: str
) -> None:
    text = GAGGLE.replace(old, new, 1)
    assert text != GAGGLE
    with pytest.raises(BlueprintError) as info:
        load_text(text, file="my.yaml")
    err = info.value
    assert err.file == "my.yaml"
    assert err.line == _line_of(text, new)
    assert field in err.field
    assert hint in (err.hint or "")
    assert "\n" not in str(err)
    assert str(err).startswith(f"my.yaml:{err.line}: ")


def test_wrong_unit_is_explained() -> None:
    with pytest.raises(BlueprintError, match="not a bandwidth"):
        load_text(GAGGLE.replace("speed_gbit_s: 400 Gb/s", "speed_gbit_s: 10 TB"))


def test_units_convert() -> None:
    text = GAGGLE.replace("speed_gbit_s: 400 Gb/s", "speed_gbit_s: 50 GB/s")
    nics = load_text(text).blueprint.node_types["dgx-h100"].nics
    assert nics is not None
    assert nics.speed_gbit_s == pytest.approx(400)


def test_malformed_yaml_gives_line() -> None:
    text = GAGGLE.replace("  dgx: {node_type", "  dgx: {node_type: [", 1)
    with pytest.raises(BlueprintError, match="malformed YAML") as info:
        load_text(text, file="x.yaml")
    assert info.value.line is not None


def test_duplicate_key_is_an_error() -> None:
    text = GAGGLE.replace("  routing: adaptive", "  routing: adaptive\n  routing: ecmp")
    with pytest.raises(BlueprintError, match="appears twice") as info:
        load_text(text)
    assert info.value.line == _line_of(text, "routing: ecmp")


def test_unknown_preset_suggests() -> None:
    with pytest.raises(BlueprintError, match="did you mean 'gaggle-h100'"):
        load("gagle-h100")


def test_missing_file() -> None:
    with pytest.raises(BlueprintError, match="no such file"):
        load("/nonexistent/cluster.yaml")


def test_not_a_mapping() -> None:
    with pytest.raises(BlueprintError, match="mapping"):
        load_text("- just\n- a list\n")
