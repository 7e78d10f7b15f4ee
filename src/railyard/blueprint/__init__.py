"""Blueprints: the validated description of a cluster that every railyard package reads."""

from railyard.blueprint.catalog import GPUS, SWITCHES, GpuSpec, SwitchSpec
from railyard.blueprint.errors import BlueprintError, Problem
from railyard.blueprint.loader import LoadedBlueprint, SourceMap, load, load_text, preset_names
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
