"""A model and a training split from plain fields: a model file, CLI options or a table row.

The same field names serve three doors so a user learns them once: ``railyard perf train
--model-file FILE`` (YAML or JSON), the ``--layers --hidden ...`` options, and the ``params``
column of a reference table (``layers=30;hidden=4096;tp=2;...``) that ``perf validate --csv``
reads. Every problem is a :class:`SpecError` naming the field, what is wrong and a hint; callers
add the file and line.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from railyard.twin.models import PRESETS, LlmArch, Parallelism

# field -> (kind, meaning); kinds: int, bool, str, or a tuple of allowed words
ARCH_FIELDS: dict[str, tuple[Any, str]] = {
    "name": (str, "a name for the model"),
    "base": (str, "a preset to start from (railyard perf train --help lists them)"),
    "layers": (int, "transformer layers"),
    "hidden": (int, "hidden size h"),
    "heads": (int, "attention (query) heads"),
    "kv_heads": (int, "key/value heads (grouped-query attention); default: heads"),
    "kv_channels": (int, "head dimension when it is not hidden/heads"),
    "ffn_hidden": (int, "MLP width; default 4 x hidden"),
    "ffn_kind": (("gelu", "swiglu"), "MLP kind"),
    "vocab": (int, "vocabulary size"),
    "seq_len": (int, "sequence length"),
    "experts": (int, "routed experts per layer (mixture of experts); 0: dense"),
    "top_k": (int, "experts per token"),
    "moe_ffn_hidden": (int, "one expert's MLP width; default ffn_hidden"),
    "shared_experts": (int, "experts every token also takes (DeepSeek's shared experts)"),
    "capacity_factor": (
        float,
        "busiest expert's tokens over the mean (1: forced balance); default 1.25",
    ),
    "window": (int, "sliding-window attention: keys each query sees; 0: all"),
    "window_every": (int, "1: every layer windowed, 2: every other layer (GPT-OSS)"),
    "kv_lora_rank": (int, "multi-head latent attention: compressed key/value width"),
    "q_lora_rank": (int, "multi-head latent attention: compressed query width"),
    "rope_head_dim": (int, "multi-head latent attention: rotary part of each q/k head"),
    "v_head_dim": (int, "multi-head latent attention: value head size; default kv_channels"),
    "tied_embeddings": (bool, "input and output tables shared"),
    "positions": (("learned", "rope"), "learned position table or rotary"),
    "biases": (bool, "linear layers have biases (GPT) or not (Llama)"),
    "dropout": (bool, "dropout in the layers"),
}
SPLIT_FIELDS: dict[str, tuple[Any, str]] = {
    "tp": (int, "tensor parallel size"),
    "pp": (int, "pipeline stages"),
    "dp": (int, "data parallel size"),
    "cp": (int, "context parallel size"),
    "ep": (int, "expert parallel size (may exceed dp: ep x etp divides tp x dp x cp)"),
    "etp": (int, "tensor parallel size inside each expert; default tp"),
    "mbs": (int, "micro-batch size"),
    "gbs": (int, "global batch size (sequences)"),
    "v": (int, "virtual pipeline stages per GPU (interleaving depth)"),
    "stages": (str, "layers per pipeline stage, e.g. 7,8x14,7"),
    "recompute": (("none", "selective", "full"), "activation recompute"),
    "sp": (bool, "sequence parallelism"),
    "dist_opt": (bool, "Megatron's distributed optimizer"),
    "zero": (int, "ZeRO stage 0-3"),
    "precision": (("bf16", "fp8"), "GEMM precision"),
    "fp8_recipe": (
        ("delayed", "current", "block", "mxfp8", "tensorwise", "blockwise"),
        "FP8 scaling: per-tensor delayed or current (Megatron's tensorwise), 1x128 blocks "
        "(blockwise) or MXFP8",
    ),
    "dispatcher": (
        ("alltoall", "deepep", "hybridep"),
        "MoE token dispatcher: NCCL all-to-all of every routed copy, or DeepEP/HybridEP (a "
        "token crosses to each node, and each GPU, it is routed to once)",
    ),
    "impl": (("eager", "megatron", "megatron-te"), "software stack"),
    "attention": (("flash2", "flash3", "cudnn", "unfused"), "attention backend"),
    "fused_loss": (bool, "fused cross-entropy"),
    "cuda_graphs": (bool, "CUDA graphs"),
    "autocast": (bool, "eager PyTorch under bf16 autocast (default) or pure bf16 (false)"),
    "optimizer": (("fused", "foreach"), "Adam kernels"),
    "overlap": (str, "communication overlapped: any of tp,dp,pp,ep joined by +, or none"),
}
ALIASES = {"seq": "seq_len", "ffn": "ffn_hidden", "a": "heads", "h": "hidden"}
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


@dataclass(frozen=True)
class SpecError(ValueError):
    """One bad field: ``field: message (hint: hint)``."""

    field: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        hint = f" (hint: {self.hint})" if self.hint else ""
        return f"{self.field}: {self.message}{hint}"


def _value(field: str, raw: object, kind: Any, meaning: str) -> object:
    if isinstance(kind, tuple):
        text = str(raw).strip().lower()
        if text not in kind:
            raise SpecError(field, f"{raw!r} is not one of {', '.join(kind)}", meaning)
        return text
    if kind is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise SpecError(field, f"{raw!r} is not true or false", meaning)
    if kind is float:
        try:
            real = float(str(raw).strip())
        except ValueError:
            raise SpecError(field, f"{raw!r} is not a number", meaning) from None
        if not real >= 0 or real == float("inf"):
            raise SpecError(field, f"{raw!r} must be a finite number >= 0", meaning)
        return real
    if kind is int:
        if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()):
            raise SpecError(field, f"{raw!r} is not a whole number", meaning)
        try:
            number = int(str(raw).strip().replace("_", ""))
        except ValueError:
            raise SpecError(field, f"{raw!r} is not a whole number", meaning) from None
        if number < 0:
            raise SpecError(field, f"{number} is negative", meaning)
        return number
    return str(raw).strip()


def _known(fields: Mapping[str, object], allowed: Mapping[str, object]) -> dict[str, object]:
    out: dict[str, object] = {}
    for raw_key, raw in fields.items():
        key = ALIASES.get(str(raw_key), str(raw_key))
        if key not in allowed:
            guess = difflib.get_close_matches(key, list(allowed), n=1)
            hint = f"did you mean {guess[0]}?" if guess else f"known: {', '.join(allowed)}"
            raise SpecError(str(raw_key), "unknown field", hint)
        out[key] = raw
    return out


def arch_from_fields(fields: Mapping[str, object], *, default_name: str = "custom") -> LlmArch:
    """An architecture from ``ARCH_FIELDS`` (a ``base`` preset fills what is left out)."""
    values = {k: _value(k, v, *ARCH_FIELDS[k]) for k, v in _known(fields, ARCH_FIELDS).items()}
    base_name = values.pop("base", None)
    if base_name is not None:
        if base_name not in PRESETS:
            guess = difflib.get_close_matches(str(base_name), list(PRESETS), n=1)
            raise SpecError("base", f"unknown preset {base_name!r}", f"did you mean {guess[0]}?"
                            if guess else f"known: {', '.join(sorted(PRESETS))}")  # fmt: skip
        base: LlmArch | None = PRESETS[str(base_name)]
    else:
        base = None
        for need in ("layers", "hidden", "heads", "vocab", "seq_len"):
            if need not in values:
                raise SpecError(need, "missing", f"{ARCH_FIELDS[need][1]}, or give base=PRESET")
    mapping = {
        "ffn_kind": "mlp",
        "positions": "learned_positions",
    }
    changes: dict[str, object] = {}
    for key, value in values.items():
        target = mapping.get(key, key)
        if key == "positions":
            value = value == "learned"
        changes[target] = value
    name = str(changes.pop("name", base.name if base else default_name))
    if base is None:
        arch = LlmArch(
            name,
            int(changes.pop("layers")),  # type: ignore[call-overload]
            int(changes.pop("hidden")),  # type: ignore[call-overload]
            int(changes.pop("heads")),  # type: ignore[call-overload]
            seq_len=int(changes.pop("seq_len")),  # type: ignore[call-overload]
            vocab=int(changes.pop("vocab")),  # type: ignore[call-overload]
        )
    else:
        arch = dataclasses.replace(base, name=name)
    arch = dataclasses.replace(arch, **changes)  # type: ignore[arg-type]
    check_arch(arch)
    return arch


def check_arch(arch: LlmArch) -> None:
    """Raise SpecError for a shape no transformer has."""
    for field, value in (("layers", arch.layers), ("hidden", arch.hidden), ("heads", arch.heads),
                         ("vocab", arch.vocab), ("seq_len", arch.seq_len)):  # fmt: skip
        if value < 1:
            raise SpecError(field, f"{value} must be at least 1", ARCH_FIELDS[field][1])
    if not arch.kv_channels and arch.hidden % arch.heads:
        raise SpecError("heads", f"{arch.heads} heads do not divide hidden {arch.hidden}",
                        "set kv_channels for another head size")  # fmt: skip
    if arch.kv_heads and arch.heads % arch.kv_heads:
        raise SpecError(
            "kv_heads",
            f"{arch.kv_heads} does not divide {arch.heads} heads",
            "grouped-query attention shares each KV head among query heads",
        )
    if arch.experts and not 1 <= arch.top_k <= arch.experts:
        raise SpecError("top_k", f"{arch.top_k} is not 1..{arch.experts}", "experts per token")
    if arch.capacity_factor and arch.capacity_factor < 1:
        raise SpecError("capacity_factor", f"{arch.capacity_factor} is below 1",
                        "the busiest expert takes at least the mean")  # fmt: skip
    if arch.window_every < 1:
        raise SpecError("window_every", "must be at least 1", ARCH_FIELDS["window_every"][1])
    if (arch.q_lora_rank or arch.rope_head_dim or arch.v_head_dim) and not arch.kv_lora_rank:
        raise SpecError("kv_lora_rank", "missing for multi-head latent attention",
                        "MLA fields need kv_lora_rank")  # fmt: skip
    if arch.top_k and not arch.experts:
        raise SpecError("top_k", "set without experts", "give experts=N for a MoE model")


def expand_stages(text: str) -> tuple[int, ...]:
    """``7,8x14,7`` -> (7, 8, ..., 8, 7)."""
    out: list[int] = []
    for part in text.replace(" ", "").split(","):
        count, _, times = part.partition("x")
        try:
            out += [int(count)] * (int(times) if times else 1)
        except ValueError:
            raise SpecError("stages", f"{text!r} is not a list of layer counts",
                            "write e.g. 7,8x14,7") from None  # fmt: skip
    return tuple(out)


def split_from_fields(fields: Mapping[str, object], base: Parallelism | None = None) -> Parallelism:
    """A split from ``SPLIT_FIELDS``; what is left out keeps ``base`` (or the defaults)."""
    values = {k: _value(k, v, *SPLIT_FIELDS[k]) for k, v in _known(fields, SPLIT_FIELDS).items()}
    names = {"mbs": "micro_batch", "gbs": "global_batch", "v": "interleave",
             "sp": "sequence_parallel", "dist_opt": "distributed_optimizer",
             "zero": "zero_stage", "impl": "implementation"}  # fmt: skip
    changes: dict[str, object] = {}
    for key, value in values.items():
        if key == "stages":
            changes["stage_layers"] = expand_stages(str(value))
        elif key == "overlap":
            words = set() if value == "none" else set(str(value).split("+"))
            unknown = words - {"tp", "dp", "pp", "ep"}
            if unknown:
                raise SpecError("overlap", f"unknown {', '.join(sorted(unknown))}",
                                "any of tp, dp, pp, ep joined by +, or none")  # fmt: skip
            for kind in ("tp", "dp", "pp", "ep"):
                changes[f"overlap_{kind}_comm"] = kind in words
        else:
            changes[names.get(key, key)] = value
    return dataclasses.replace(base or Parallelism(), **changes)  # type: ignore[arg-type]


def parse_params(text: str) -> dict[str, str]:
    """``a=1;b=x`` -> {"a": "1", "b": "x"} (the reference table's params column)."""
    out: dict[str, str] = {}
    for part in text.split(";"):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise SpecError(part.strip(), "expected key=value", "separate fields with ;")
        out[key.strip()] = value.strip()
    return out


def split_fields(
    fields: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(architecture fields, split fields, the rest) of one params mapping."""
    arch, split, rest = {}, {}, {}
    for key, value in fields.items():
        name = ALIASES.get(key, key)
        if name in ARCH_FIELDS or key == "model":
            arch["base" if key == "model" else key] = value
        elif name in SPLIT_FIELDS:
            split[key] = value
        else:
            rest[key] = value
    return arch, split, rest


__all__ = [
    "ARCH_FIELDS",
    "SPLIT_FIELDS",
    "SpecError",
    "arch_from_fields",
    "expand_stages",
    "parse_params",
    "split_fields",
    "split_from_fields",
]
