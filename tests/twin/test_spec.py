"""Models and splits from fields: model files, table params, MoE counts, uneven stages."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.twin.test_train import FakeComm

from railyard.blueprint.catalog import GPUS
from railyard.twin.modelfile import ModelFileError, load_model_file
from railyard.twin.models import PRESETS, LlmArch, Parallelism
from railyard.twin.spec import (
    SpecError,
    arch_from_fields,
    expand_stages,
    parse_params,
    split_fields,
    split_from_fields,
)
from railyard.twin.train import estimate_step

MIXTRAL = {
    "name": "mixtral-8x7b", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8,
    "ffn_hidden": 14336, "ffn_kind": "swiglu", "vocab": 32000, "seq_len": 4096,
    "positions": "rope", "biases": False, "dropout": False, "tied_embeddings": False,
    "experts": 8, "top_k": 2,
}  # fmt: skip


def test_fields_build_the_same_model_as_the_preset() -> None:
    fields = {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
              "ffn_kind": "swiglu", "vocab": 128256, "seq_len": 8192, "positions": "rope",
              "biases": "false", "dropout": "no", "tied_embeddings": 0}  # fmt: skip
    arch = arch_from_fields(fields)
    assert arch.params() == PRESETS["llama3-8b"].params()


def test_a_base_preset_fills_what_is_left_out() -> None:
    arch = arch_from_fields({"base": "llama3-8b", "seq_len": "4096"})
    assert arch.seq_len == 4096
    assert arch.layers == 32


def test_mixtral_counts_46_7b_parameters_12_9b_active() -> None:
    # Mistral AI, "Mixtral of experts" (arXiv 2401.04088): 46.7B total, 12.9B active per token
    arch = arch_from_fields(MIXTRAL)
    assert arch.params() / 1e9 == pytest.approx(46.7, abs=0.05)
    active = arch.layers * (arch.layer_active_matmul_params() + 2 * arch.hidden)
    active += arch.embedding_params() + arch.hidden
    assert active / 1e9 == pytest.approx(12.9, abs=0.05)


def test_moe_step_prices_the_all_to_all_on_the_expert_ranks() -> None:
    arch = arch_from_fields(MIXTRAL)
    par = Parallelism(tp=1, dp=8, ep=8, micro_batch=1, global_batch=64, zero_stage=1)
    comm = FakeComm()
    est = estimate_step(arch, par, GPUS["H100-SXM-80GB"], 8, comm)
    a2a = [c for c in comm.calls if c[0] == "alltoall"]
    assert a2a
    # the busiest rank sends the default imbalance (1.25) times its even share
    assert a2a[0][1] == pytest.approx(4096 * 2 * 4096 * 2 * 1.25)
    assert a2a[0][2:] == (1, 8)
    assert est.memory.stages[0].layer_states.total_bytes < arch.params() * 6


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"layers": 2, "hidden": 64, "heads": 4, "vocab": 100}, "seq_len", "missing"),
        ({"base": "llama3-8b", "hiden": 5}, "hiden", "did you mean hidden"),
        ({"base": "llama3-8b", "layers": "many"}, "layers", "not a whole number"),
        ({"base": "llama3-8b", "ffn_kind": "relu"}, "ffn_kind", "not one of gelu, swiglu"),
        ({"base": "llama3-8b", "heads": 33}, "heads", "do not divide"),
        ({"base": "llama3-8b", "top_k": 2}, "top_k", "without experts"),
        ({"base": "llama9"}, "base", "unknown preset"),
    ],
)
def test_bad_fields_name_the_field(fields: dict[str, object], field: str, words: str) -> None:
    with pytest.raises(SpecError) as err:
        arch_from_fields(fields)
    assert err.value.field == field
    assert words in str(err.value)


def test_split_fields_and_stage_lists() -> None:
    assert expand_stages("7,8x14,7") == (7,) + (8,) * 14 + (7,)
    par = split_from_fields({"tp": "8", "pp": "16", "v": "2", "stages": "7,8x14,7",
                             "overlap": "tp+dp", "dist_opt": "1", "impl": "eager"})  # fmt: skip
    assert (par.tp, par.pp, par.interleave, par.implementation) == (8, 16, 2, "eager")
    assert par.overlap_tp_comm
    assert par.overlap_dp_comm
    assert not par.overlap_pp_comm
    assert par.stage_layers[0] == 7
    assert par.distributed_optimizer
    arch_f, split_f, rest = split_fields(parse_params("model=llama3-8b;tp=2;flops=model"))
    assert arch_f == {"base": "llama3-8b"}
    assert split_f == {"tp": "2"}
    assert rest == {"flops": "model"}
    with pytest.raises(SpecError, match="overlap"):
        split_from_fields({"overlap": "tp+xx"})


def test_uneven_stages_must_add_up() -> None:
    arch = PRESETS["llama3-405b"]
    with pytest.raises(ValueError, match="add up to 127"):
        Parallelism(pp=16, stage_layers=(8,) * 15 + (7,)).check(arch)
    with pytest.raises(ValueError, match="16 positive counts"):
        Parallelism(pp=16, stage_layers=(63, 63)).check(arch)


def test_uneven_stages_make_the_first_stage_lighter_and_the_step_follows_the_slowest() -> None:
    arch = PRESETS["llama3-405b"]
    even = Parallelism(tp=8, pp=16, dp=1, micro_batch=1, global_batch=32, sequence_parallel=True)
    uneven = Parallelism(tp=8, pp=16, dp=1, micro_batch=1, global_batch=32,
                         sequence_parallel=True, stage_layers=(7,) + (8,) * 14 + (7,))  # fmt: skip
    h100 = GPUS["H100-SXM-80GB"]
    e, u = (estimate_step(arch, p, h100, 8, FakeComm()) for p in (even, uneven))
    assert u.stage_times_s[0] < u.stage_times_s[1]
    assert e.stage_times_s[0] > e.stage_times_s[1]  # 8 layers plus the embedding
    assert u.step_time_s < e.step_time_s


def test_model_file_in_yaml_and_json(tmp_path: Path) -> None:
    yaml_file = tmp_path / "mine.yaml"
    yaml_file.write_text("layers: 24\nhidden: 2048\nheads: 16\nvocab: 50304\nseq_len: 2048\n")
    arch = load_model_file(yaml_file)
    assert (arch.name, arch.layers, arch.ffn) == ("mine", 24, 8192)
    json_file = tmp_path / "moe.json"
    json_file.write_text('{"base": "llama3-8b", "experts": 8, "top_k": 2}')
    assert isinstance(load_model_file(json_file), LlmArch)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("layers: 24\nhidden: 2048\nheads: 16\nvocab: 50304\nseq_len: 2048\nffn_kind: relu\n",
         "mine.yaml:6: ffn_kind: 'relu' is not one of gelu, swiglu"),
        ("layers: 24\nhiden: 2048\n", "mine.yaml:2: hiden: unknown field (hint: did you mean"),
        ("layers: [24\n", "mine.yaml:2: not YAML or JSON"),
        ("- 1\n- 2\n", "mine.yaml:1: expected a mapping"),
    ],
)  # fmt: skip
def test_model_file_errors_name_file_line_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    with pytest.raises(ModelFileError) as err:
        load_model_file(path)
    assert str(err.value).startswith(str(tmp_path / expected.split(":")[0]))
    assert expected.split(":", 1)[1] in str(err.value)
