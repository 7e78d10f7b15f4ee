"""The rule of tests/parts.py: a test that needs torch, a GPU, Slurm, Chromium, Podman, sshd,
Ray or Prometheus skips through it, saying why, where the part is absent, and fails under
CI=true where .ci/run installs the part. Checked on the source, so a new test cannot skip for
such a part on its own (and pass CI by skipping), nor fail on a machine without it."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import parts

TESTS = Path(__file__).resolve().parent
HELPER = {TESTS / "parts.py", Path(__file__).resolve()}
# What a skip for each part says, in its condition or its reason.
MENTIONS = re.compile(
    r"\btorch\b|\bray\b|nvml|nvidia|\bslurm|sinfo|chromium|chromedriver|selenium|podman|sshd"
    r"|promtool|prometheus",
    re.IGNORECASE,
)
SKIPS = {"skip", "skipif", "importorskip"}


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _own_skips(tree: ast.Module, source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of each skip in the module and the ``if`` that guards it."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called(node) in SKIPS:
            yield node.lineno, ast.get_source_segment(source, node) or ""
        if isinstance(node, ast.If):
            guarded = any(
                isinstance(inner, ast.Call) and _called(inner) in SKIPS
                for stmt in node.body
                for inner in ast.walk(stmt)
            )
            if guarded:
                yield node.lineno, ast.get_source_segment(source, node.test) or ""


def test_tests_skip_for_an_optional_part_only_through_tests_parts() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path in HELPER:
            continue
        source = path.read_text(encoding="utf-8")
        for line, text in _own_skips(ast.parse(source), source):
            if MENTIONS.search(text):
                offenders.append(f"{path.relative_to(TESTS.parent)}:{line}: {text.splitlines()[0]}")
    assert offenders == [], "skip through tests/parts.py (needs/require):\n" + "\n".join(offenders)


# Source that runs torch, in the test's process or in a job's script.
RUNS_TORCH = re.compile(
    r"import (os, )?torch|ddp_train|railyard\.health\.measure|railyard\.twin\.calibrate import"
)
ASKS_TORCH = re.compile(r"(needs|require)\(\"torch\"\)|except ImportError")


def test_tests_that_run_torch_ask_for_it() -> None:
    """torch is not in the `dev` extra: a test whose job imports it times out without it."""
    silent = [
        str(path.relative_to(TESTS.parent))
        for path in sorted(TESTS.rglob("*.py"))
        if path not in HELPER
        and RUNS_TORCH.search(text := path.read_text(encoding="utf-8"))
        and not ASKS_TORCH.search(text)
    ]
    assert silent == [], f"runs torch without needs('torch'): {silent}"


@pytest.fixture
def fake_parts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Two absent parts, one .ci/run installs and one it cannot (a GPU)."""
    monkeypatch.setitem(
        parts.PARTS, "gone", parts.Part(lambda: False, "apt-get install gone", True)
    )
    monkeypatch.setitem(parts.PARTS, "nogpu", parts.Part(lambda: False, "a GPU", ci=False))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("RAILYARD_CI_WITHOUT", raising=False)
    parts.present.cache_clear()
    yield
    parts.present.cache_clear()


@pytest.mark.usefixtures("fake_parts")
def test_an_absent_part_skips_naming_it_and_how_to_get_it() -> None:
    with pytest.raises(pytest.skip.Exception, match=r"needs gone.*\(apt-get install gone\)"):
        parts.require("gone")


@pytest.mark.usefixtures("fake_parts")
def test_under_ci_an_absent_part_that_ci_installs_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true: needs gone"):
        parts.require("gone")
    with pytest.raises(pytest.skip.Exception, match="needs nogpu"):
        parts.require("nogpu")  # CI has no GPU: still a skip
    monkeypatch.setenv("RAILYARD_CI_WITHOUT", "gone")  # .ci/run said it could not
    with pytest.raises(pytest.skip.Exception, match="needs gone"):
        parts.require("gone")


def test_a_marker_for_an_unknown_part_is_refused() -> None:
    with pytest.raises(AssertionError, match="unknown parts"):
        parts.needs("tensorflow")
