"""Blueprints: the validated description of a cluster that every railyard package reads.

The names below load with the first use of one: a server started without a blueprint
imports only the light modules it needs (``pools``, ``partitions``), not the YAML loader
and the models (~60 ms of every ``railyard up``)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from railyard.blueprint.catalog import GPUS, SWITCHES, GpuSpec, SwitchSpec
    from railyard.blueprint.errors import BlueprintError, Problem
    from railyard.blueprint.loader import (
        LoadedBlueprint,
        SourceMap,
        load,
        load_text,
        preset_names,
    )
    from railyard.blueprint.models import (
        Blueprint,
        Design,
        FabricSpec,
        NodeGroup,
        NodeType,
        Role,
        Routing,
        TierSpec,
        Transport,
    )

_HOMES = {
    "catalog": ("GPUS", "SWITCHES", "GpuSpec", "SwitchSpec"),
    "errors": ("BlueprintError", "Problem"),
    "loader": ("LoadedBlueprint", "SourceMap", "load", "load_text", "preset_names"),
    "models": ("Blueprint", "Design", "FabricSpec", "NodeGroup", "NodeType", "Role", "Routing",
               "TierSpec", "Transport"),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "GPUS",
    "SWITCHES",
    "Blueprint",
    "BlueprintError",
    "Design",
    "FabricSpec",
    "GpuSpec",
    "LoadedBlueprint",
    "NodeGroup",
    "NodeType",
    "Problem",
    "Role",
    "Routing",
    "SourceMap",
    "SwitchSpec",
    "TierSpec",
    "Transport",
    "load",
    "load_text",
    "preset_names",
]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next use is a plain lookup
    return value
