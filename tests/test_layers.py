"""Imports point down only (docs/architecture.md): checked on the source, not by convention."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "railyard"

# package -> railyard packages it must never import
FORBIDDEN = {
    "probe": {
        "blueprint",
        "fabric",
        "plan",
        "sched",
        "twin",
        "exec",
        "control",
        "sim",
        "cli",
        "inventory",
    },
    "blueprint": {"fabric", "plan", "sched", "twin", "exec", "control", "sim", "cli", "inventory"},
    "fabric": {"plan", "sched", "twin", "exec", "control", "sim", "cli", "inventory"},
    "sched": {"blueprint", "fabric", "plan", "twin", "exec", "control", "sim", "cli", "inventory"},
    "plan": {"sched", "twin", "exec", "control", "sim", "cli", "inventory"},
    "inventory": {"plan", "twin", "exec", "control", "sim", "cli"},
    "twin": {"control", "sim", "cli", "exec", "inventory"},
    "exec": {"control", "sim", "cli", "twin", "plan", "inventory"},
    "control": {"sim", "cli", "web"},
    "sim": {"control", "cli", "web"},
}
for _below in FORBIDDEN.values():  # the dashboard sits on top, beside cli
    _below.add("web")
FORBIDDEN["web"] = {"cli"}
# health reads the hardware through probe alone, and takes its expectations from the twin
FORBIDDEN["health"] = {"sched", "exec", "control", "sim", "cli", "inventory", "plan"}


def _railyard_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "railyard" and len(parts) > 1:
                found.add(parts[1])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_down(package: str) -> None:
    base = SRC / package
    files = [base.with_suffix(".py")] if not base.is_dir() else sorted(base.rglob("*.py"))
    assert files
    for path in files:
        if not path.exists():
            continue
        bad = _railyard_imports(path) & FORBIDDEN[package]
        assert not bad, f"{path.relative_to(SRC)} imports railyard.{sorted(bad)}"
