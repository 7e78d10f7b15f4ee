"""Quantities with units in blueprint files.

A blueprint field named ``speed_gbit_s`` takes a bare number in its own unit, or a string with
a unit such as ``"400G"``, ``"400 Gb/s"``, ``"50 GB/s"`` or ``"10 GiB/s"``. A string of the wrong
dimension (``"10 TB"`` for a bandwidth) is an error, so a unit slip cannot pass silently.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated

from pydantic import BeforeValidator

_NUMBER = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")

# Scale of each unit spelling to the dimension's base unit.
# Bandwidth base: bits per second. Data size base: bytes. Power base: watts.
_BANDWIDTH_BIT_S: dict[str, float] = {
    "Mb/s": 1e6,
    "Mbps": 1e6,
    "G": 1e9,
    "Gb/s": 1e9,
    "Gbps": 1e9,
    "Gbit/s": 1e9,
    "T": 1e12,
    "Tb/s": 1e12,
    "Tbps": 1e12,
}
_BANDWIDTH_BYTE_S: dict[str, float] = {
    "GB/s": 8e9,
    "GBps": 8e9,
    "TB/s": 8e12,
    "MB/s": 8e6,
    "GiB/s": 8 * 2.0**30,
    "TiB/s": 8 * 2.0**40,
    "MiB/s": 8 * 2.0**20,
}
_SIZE_BYTE: dict[str, float] = {
    "B": 1.0,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "PB": 1e15,
    "KiB": 2.0**10,
    "MiB": 2.0**20,
    "GiB": 2.0**30,
    "TiB": 2.0**40,
    "PiB": 2.0**50,
}
_POWER_W: dict[str, float] = {"W": 1.0, "kW": 1e3, "MW": 1e6}


class UnitError(ValueError):
    """A quantity whose unit is unknown or of the wrong dimension."""


def _split(text: str) -> tuple[float, str]:
    match = _NUMBER.match(text)
    if not match:
        raise UnitError(f"'{text}' is not a number with a unit")
    return float(match.group(1)), match.group(2)


def _bandwidth_bit_s(text: str) -> float:
    value, unit = _split(text)
    if unit in _BANDWIDTH_BYTE_S:
        return value * _BANDWIDTH_BYTE_S[unit]
    if unit in _BANDWIDTH_BIT_S:
        return value * _BANDWIDTH_BIT_S[unit]
    raise UnitError(f"'{text}' is not a bandwidth; write e.g. '400 Gb/s', '50 GB/s' or '10 GiB/s'")


def _size_byte(text: str) -> float:
    value, unit = _split(text)
    if unit in _SIZE_BYTE:
        return value * _SIZE_BYTE[unit]
    raise UnitError(f"'{text}' is not a size; write e.g. '80 GB', '2 TiB' or '3.84 TB'")


def _power_w(text: str) -> float:
    value, unit = _split(text)
    if unit in _POWER_W:
        return value * _POWER_W[unit]
    raise UnitError(f"'{text}' is not a power; write e.g. '700 W' or '10.2 kW'")


def _converter(
    parse: Callable[[str], float], base_per_field_unit: float
) -> Callable[[object], object]:
    """Convert a string with a unit into the field's own unit; leave numbers alone."""

    def convert(raw: object) -> object:
        if isinstance(raw, str):
            return parse(raw) / base_per_field_unit
        return raw

    return convert


GbitPerS = Annotated[float, BeforeValidator(_converter(_bandwidth_bit_s, 1e9))]
"""Bandwidth in gigabits per second (network convention: 400G NIC = 400)."""
GbytePerS = Annotated[float, BeforeValidator(_converter(_bandwidth_bit_s, 8e9))]
"""Bandwidth in gigabytes (1e9 bytes) per second (storage and memory convention)."""
TbytePerS = Annotated[float, BeforeValidator(_converter(_bandwidth_bit_s, 8e12))]
"""Bandwidth in terabytes (1e12 bytes) per second (HBM convention)."""
Gbyte = Annotated[float, BeforeValidator(_converter(_size_byte, 1e9))]
"""Size in gigabytes (1e9 bytes)."""
Tbyte = Annotated[float, BeforeValidator(_converter(_size_byte, 1e12))]
"""Size in terabytes (1e12 bytes)."""
Watt = Annotated[float, BeforeValidator(_converter(_power_w, 1.0))]
"""Power in watts."""
KiloWatt = Annotated[float, BeforeValidator(_converter(_power_w, 1e3))]
"""Power in kilowatts."""
