"""The documentation (issue 58): a README short enough to read whose two commands are the ones
CI runs and whose links land; a site built from docs/ with MkDocs, strictly (a broken link or
anchor, or a page left out of the nav, fails the build); and reference pages generated from
the code that name every command, API route and configuration key."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tests.parts import needs

pytestmark = pytest.mark.long  # the site's build and the reference's rendering take a while

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
# The quick start's two commands, as .ci/run runs the second one.
UP = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/railyard up --gpus 8"
TEST = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[dev]' && .venv/bin/pytest"


@cache
def hook() -> ModuleType:
    """docs/hooks/reference.py, the generator MkDocs runs, loaded without MkDocs."""
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks/reference.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short_and_its_two_commands_are_the_ones_ci_runs() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: move the detail into docs/"
    assert UP in lines
    assert TEST in lines
    assert TEST in (ROOT / ".ci/run").read_text().splitlines()


def test_the_readmes_links_land_on_files_of_the_checkout() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert len(local) > 20
    assert [t for t in local if not (ROOT / t).exists()] == []


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node] if node.endswith(".md") else []
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def test_every_page_is_in_the_nav_and_every_screenshot_on_a_page() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    nav = _nav_pages(config["nav"])
    pages = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(nav) == pages
    text = "".join((DOCS / page).read_text() for page in pages)
    shots = sorted(p.name for p in DOCS.glob("*.png"))
    assert shots
    assert [s for s in shots if f"({s})" not in text and f"/{s})" not in text] == []


def test_the_cli_reference_has_every_command_and_sub_command() -> None:
    from railyard.cli.main import CONTROL, DESIGN

    text = hook().cli_reference()
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}
    paths = hook().control_commands()
    assert {p[0] for p in paths} == set(CONTROL)
    assert ["admin", "queues", "members", "add"] in paths
    wanted = {f"railyard {' '.join(p)}" for p in paths} | {f"railyard {d}" for d in DESIGN}
    wanted |= {f"railyard perf {sub}" for sub in ("collective", "train", "validate")}
    assert wanted - headings == set()
    assert "--container-image" in text
    assert "--victim-searches-per-queue" in text
    assert "╭" not in text  # typer's rich boxes are off: plain help, as click prints it


def test_the_api_reference_has_every_route_and_schema() -> None:
    document = hook().openapi_document()
    text = hook().api_reference()
    routes = [(m, p) for p, ops in document["paths"].items() for m in ops]
    assert len(routes) > 20
    assert [r for r in routes if f"### {r[0].upper()} `{r[1]}`" not in text] == []
    schemas = document["components"]["schemas"]
    assert [name for name in schemas if f"### {name} {{#schema-" not in text] == []


def test_the_configuration_reference_has_every_key() -> None:
    from railyard.cli.configfile import settable
    from railyard.cli.main import command

    text = hook().config_reference()
    for section in ("up", "join"):
        keys = settable(command(section).parser())
        assert len(keys) > 5
        assert [k for k in keys if f"| `{k}` |" not in text] == [], section


def test_the_reference_pages_hold_the_markers_the_hook_fills() -> None:
    for page, marker in (("cli.md", "cli"), ("api.md", "openapi"), ("configuration.md", "config")):
        assert f"<!-- railyard:{marker} -->" in (DOCS / "reference" / page).read_text()


@needs("mkdocs")
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a link to a missing page or anchor, a page missing from the
    nav, or a hook that fails ends the build with an error."""
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    cli = (site / "reference/cli/index.html").read_text()
    assert "railyard admin queues members add" in cli
    assert "railyard:cli" not in cli
    api = (site / "reference/api/index.html").read_text()
    assert "/v1/jobs/cancel" in api
    assert "railyard:openapi" not in api
    assert (site / "how-to/dashboard/index.html").read_text().count("<img") >= 15
