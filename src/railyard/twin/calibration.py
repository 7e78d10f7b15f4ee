"""A calibration file: what ``railyard perf calibrate`` measured on one device, and how the step
model uses it.

The file is JSON with a format version and the device's name. The model takes four things from
it, each replacing a published constant for that device only: the best GEMM efficiency (the
card's burst matmul rate, which the tile-and-wave shape model then scales by shape), fused
attention rates by backend, pass, causality, head dimension and sequence length, the streaming
memory bandwidth, and the host and GPU cost of one kernel launch. The raw GEMM table is kept so a
user can compare the shape model with what the card did.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1


class CalibrationError(ValueError):
    """A calibration file that cannot be used: ``file: field: problem (hint: ...)``."""


@dataclass(frozen=True, slots=True)
class GemmPoint:
    m: int
    n: int
    k: int
    tflops: float
    efficiency: float  # of the peak given in the file


@dataclass(frozen=True, slots=True)
class AttentionPoint:
    backend: str
    direction: str  # fwd or bwd
    causal: bool
    head_dim: int
    seq: int
    tflops: float


@dataclass(frozen=True, slots=True)
class Calibration:
    """Measured device figures (see the module docstring)."""

    device: str
    torch_version: str
    peak_tflops: float  # the bf16 dense peak the efficiencies are relative to
    hbm_gbyte_s: float
    host_us_per_kernel: float
    gpu_us_per_kernel: float
    gemm: tuple[GemmPoint, ...] = ()
    attention: tuple[AttentionPoint, ...] = ()
    version: int = FORMAT_VERSION
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best_gemm_tflops(self) -> float:
        """The best measured GEMM rate: the card's burst matmul rate (its MAMF)."""
        return max((g.tflops for g in self.gemm), default=0.0)

    def attention_tflops(
        self, backend: str, direction: str, causal: bool, head_dim: int, seq: float
    ) -> float | None:
        """Measured rate nearest in log2(seq) and head dimension, or None when not measured."""
        points = [
            a
            for a in self.attention
            if a.backend == backend and a.direction == direction and a.causal == causal
        ]
        if not points:
            return None
        best = min(
            points,
            key=lambda a: (abs(math.log2(a.head_dim / head_dim)), abs(math.log2(a.seq / seq))),
        )
        return best.tflops

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"


def save(cal: Calibration, path: str | Path) -> None:
    Path(path).write_text(cal.to_json(), encoding="utf-8")


def _need(data: dict[str, Any], key: str, kind: type | tuple[type, ...], file: str) -> Any:
    if key not in data:
        raise CalibrationError(f"{file}: {key}: missing (hint: run railyard perf calibrate)")
    value = data[key]
    if isinstance(value, bool) and kind is not bool:
        raise CalibrationError(f"{file}: {key}: expected a number, got {value!r}")
    if not isinstance(value, kind):
        raise CalibrationError(f"{file}: {key}: expected {_kind_name(kind)}, got {value!r}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def load(path: str | Path) -> Calibration:
    """Read a calibration file; CalibrationError names the file and field of any problem."""
    file = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CalibrationError(
            f"{file}: no such file (hint: railyard perf calibrate -o FILE)"
        ) from None
    except json.JSONDecodeError as exc:
        raise CalibrationError(f"{file}:{exc.lineno}: not JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise CalibrationError(f"{file}: expected a JSON object")
    version = _need(data, "version", int, file)
    if version != FORMAT_VERSION:
        raise CalibrationError(
            f"{file}: version: {version} is not {FORMAT_VERSION} (hint: calibrate again)"
        )
    num = (int, float)
    gemm = []
    for i, g in enumerate(_need(data, "gemm", list, file)):
        where = f"gemm[{i}]"
        if not isinstance(g, dict):
            raise CalibrationError(f"{file}: {where}: expected an object")
        gemm.append(
            GemmPoint(
                m=int(_need(g, "m", int, f"{file}: {where}")),
                n=int(_need(g, "n", int, f"{file}: {where}")),
                k=int(_need(g, "k", int, f"{file}: {where}")),
                tflops=float(_need(g, "tflops", num, f"{file}: {where}")),
                efficiency=float(_need(g, "efficiency", num, f"{file}: {where}")),
            )
        )
    attention = []
    for i, a in enumerate(_need(data, "attention", list, file)):
        where = f"{file}: attention[{i}]"
        if not isinstance(a, dict):
            raise CalibrationError(f"{where}: expected an object")
        attention.append(
            AttentionPoint(
                backend=str(_need(a, "backend", str, where)),
                direction=str(_need(a, "direction", str, where)),
                causal=bool(_need(a, "causal", bool, where)),
                head_dim=int(_need(a, "head_dim", int, where)),
                seq=int(_need(a, "seq", int, where)),
                tflops=float(_need(a, "tflops", num, where)),
            )
        )
    cal = Calibration(
        device=str(_need(data, "device", str, file)),
        torch_version=str(_need(data, "torch_version", str, file)),
        peak_tflops=float(_need(data, "peak_tflops", num, file)),
        hbm_gbyte_s=float(_need(data, "hbm_gbyte_s", num, file)),
        host_us_per_kernel=float(_need(data, "host_us_per_kernel", num, file)),
        gpu_us_per_kernel=float(_need(data, "gpu_us_per_kernel", num, file)),
        gemm=tuple(gemm),
        attention=tuple(attention),
        version=version,
        notes=tuple(str(n) for n in data.get("notes", [])),
    )
    for name in ("peak_tflops", "hbm_gbyte_s"):
        if getattr(cal, name) <= 0:
            raise CalibrationError(f"{file}: {name}: must be positive")
    if not cal.gemm:
        raise CalibrationError(f"{file}: gemm: no measurements (hint: calibrate again)")
    return cal


__all__ = [
    "FORMAT_VERSION",
    "AttentionPoint",
    "Calibration",
    "CalibrationError",
    "GemmPoint",
    "load",
    "save",
]
