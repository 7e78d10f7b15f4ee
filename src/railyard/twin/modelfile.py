"""A model described in a YAML or JSON file, for ``railyard perf train --model-file FILE``.

The fields are those of :data:`railyard.twin.spec.ARCH_FIELDS` (layers, hidden, heads,
kv_heads, ffn_hidden, ffn_kind, vocab, seq_len, and optionally experts, top_k, moe_ffn_hidden,
kv_channels, positions, biases, dropout, tied_embeddings, base, name). Every problem is one
line ``file:line: field: message (hint: ...)``; JSON is read as YAML, so both keep lines.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from railyard.twin.models import LlmArch
from railyard.twin.spec import SpecError, arch_from_fields


class ModelFileError(ValueError):
    """One bad model file: ``file:line: field: message (hint: ...)``."""


def _line_of(root: yaml.Node | None, key: str) -> int:
    if isinstance(root, yaml.MappingNode):
        for k, _ in root.value:
            if k.value == key:
                return int(k.start_mark.line) + 1
    return 1


def load_model_file(path: str | Path) -> LlmArch:
    """The architecture a model file describes; ModelFileError says where it is wrong."""
    file = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelFileError(f"{file}: no such file (hint: give a YAML or JSON path)") from None
    except UnicodeDecodeError:
        raise ModelFileError(f"{file}: not UTF-8 text (hint: save it as YAML or JSON)") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else 1
        raise ModelFileError(f"{file}:{line}: not YAML or JSON: {exc.problem}") from None
    if not isinstance(data, dict):
        raise ModelFileError(
            f"{file}:1: expected a mapping of fields (hint: layers: 32, hidden: 4096, ...)"
        )
    fields = {"name": Path(path).stem} | {str(k): v for k, v in data.items()}
    try:
        return arch_from_fields(fields)
    except SpecError as exc:
        raise ModelFileError(f"{file}:{_line_of(root, exc.field)}: {exc}") from None


__all__ = ["ModelFileError", "load_model_file"]
