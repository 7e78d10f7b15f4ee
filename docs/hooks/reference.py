"""MkDocs hook: the reference pages' generated parts, rendered from the code at build time.

A page holds a marker where its generated part goes; the hook replaces it, so the site's CLI,
REST API and configuration references are never older than the code that builds them (a
hand-kept copy drifts; the README's did):

- ``<!-- railyard:cli -->``: every command's ``--help``, from the parsers themselves (argparse
  for the control-plane commands, with their nested sub-commands; click, under typer, for the
  design commands), at a fixed width of 100 columns;
- ``<!-- railyard:openapi -->``: every route and schema of the server's OpenAPI document
  (``create_app(...).openapi()`` over an empty SQLite store in a temporary directory);
- ``<!-- railyard:config -->``: every key of the configuration file's ``[up]`` and ``[join]``
  tables, read from the parsers as ``railyard config check`` reads them.

``tests/test_docs.py`` renders each part without MkDocs and checks it names every command,
route and key.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

WIDTH = 100  # columns of the rendered help: the same on every machine that builds the site


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse and rich read ``COLUMNS``; fix it while rendering, then put it back."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _fence(text: str) -> str:
    return "```text\n" + text.rstrip() + "\n```\n"


# --- the CLI ----------------------------------------------------------------------------------


def _help_of(argv: list[str]) -> str:
    """What ``railyard ARGV --help`` prints, run in this process."""
    from railyard.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main([*argv, "--help"])
    return out.getvalue()


def _argparse_paths(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[list[str]]:
    """``path`` and each nested sub-command below it, depth first, in declaration order."""
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _argparse_paths(child, [*path, name])


def control_commands() -> list[list[str]]:
    """Every control-plane command and sub-command, as the words after ``railyard``."""
    from railyard.cli.main import CONTROL, command

    paths: list[list[str]] = []
    for name in CONTROL:
        found = command(name)
        if found.arguments is None:  # reads its own words (submit, run ...): no sub-commands
            paths.append([name])
        else:
            paths.extend(_argparse_paths(found.parser(), [name]))
    return paths


def _design_helps() -> Iterator[tuple[list[str], str]]:
    """(words, help) of each design command, through click with typer's rich boxes off. The
    click classes are taken from the commands (typer may carry its own copy of click)."""
    import typer

    from railyard.cli.design import full_app

    def context(command: Any, name: str, parent: Any) -> Any:
        return command.context_class(command, info_name=name, parent=parent,
                                     terminal_width=WIDTH, max_content_width=WIDTH)  # fmt: skip

    def walk(command: Any, ctx: Any, path: list[str]) -> Iterator[tuple[list[str], str]]:
        command.rich_markup_mode = None  # typer's plain help, as click prints it
        yield path, command.get_help(ctx)
        for name, child in getattr(command, "commands", {}).items():
            yield from walk(child, context(child, name, ctx), [*path, name])

    root = typer.main.get_command(full_app())
    top = context(root, "railyard", None)
    for name, child in getattr(root, "commands", {}).items():
        yield from walk(child, context(child, name, top), [name])


def cli_reference() -> str:
    """Markdown: ``railyard --help``, then a section per command with its help text."""
    from railyard.cli.main import root_help

    parts = ["## railyard\n", _fence(root_help())]
    with _columns(WIDTH):
        parts.append("## Operate a cluster\n")
        for path in control_commands():
            level = "#" * min(6, 2 + len(path))
            parts += [f"{level} railyard {' '.join(path)}\n", _fence(_help_of(path))]
        parts.append("## Plan and predict\n")
        for path, text in _design_helps():
            level = "#" * min(6, 2 + len(path))
            parts += [f"{level} railyard {' '.join(path)}\n", _fence(text)]
    return "\n".join(parts)


# --- the REST API -----------------------------------------------------------------------------


def openapi_document() -> dict[str, Any]:
    """The server's OpenAPI document, from an app over an empty store made for the purpose."""
    from railyard.control.api.app import create_app
    from railyard.control.store.database import Store, sqlite_url

    with tempfile.TemporaryDirectory(prefix="railyard-docs-") as tmp:
        store = Store(sqlite_url(Path(tmp) / "railyard.db"))
        try:
            return create_app(store, wake=lambda: None, state_dir=Path(tmp)).openapi()
        finally:
            store.close()


def _type_of(schema: dict[str, Any]) -> str:
    """A schema's type in a few words: ``integer``, ``array of JobOut``, ``string or null``."""
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[{name}](#schema-{name.lower()})"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " or ".join(_type_of(s) for s in schema[key])
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])  # _cell escapes it in a table
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"array of {_type_of(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_type_of(extra) if isinstance(extra, dict) else 'any'}"
    return kind


def _cell(text: object) -> str:
    """One table cell: a line, its pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _bounds(schema: dict[str, Any]) -> str:
    names = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
             "maxLength", "minItems", "maxItems", "pattern", "default")  # fmt: skip
    return ", ".join(f"{n} `{schema[n]}`" for n in names if n in schema)


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### {method.upper()} `{path}`\n"]
    if op.get("summary"):
        lines.append(f"**{op['summary']}**\n")
    if op.get("description"):
        lines.append(op["description"].strip() + "\n")
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | description |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            about = " ".join(x for x in (p.get("description", ""), _bounds(schema)) if x)
            lines.append(f"| `{p['name']}` | {p['in']} | {_cell(_type_of(schema))} | "
                         f"{'yes' if p.get('required') else 'no'} | {_cell(about)} |")  # fmt: skip
        lines.append("")
    body = op.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            lines.append(f"Request body ({media}): {_type_of(content.get('schema', {}))}\n")
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for status, answer in op.get("responses", {}).items():
        content = answer.get("content", {})
        kinds = ", ".join(_type_of(c.get("schema", {})) for c in content.values()) or "-"
        lines.append(f"| {status} | {_cell(answer.get('description', ''))} | {_cell(kinds)} |")
    lines.append("")
    return lines


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name} {{#schema-{name.lower()}}}\n"]  # apart from the tags' headings
    if schema.get("description"):
        lines.append(schema["description"].strip() + "\n")
    props = schema.get("properties", {})
    if not props:
        lines.append(f"{_type_of(schema)}\n")
        return lines
    required = set(schema.get("required", []))
    lines += ["| field | type | required | description |", "|---|---|---|---|"]
    for field, spec in props.items():
        about = " ".join(x for x in (spec.get("description", ""), _bounds(spec)) if x)
        lines.append(f"| `{field}` | {_cell(_type_of(spec))} | "
                     f"{'yes' if field in required else 'no'} | {_cell(about)} |")  # fmt: skip
    lines.append("")
    return lines


def api_reference() -> str:
    """Markdown: the routes grouped by their tag, then the schemas they carry."""
    doc = openapi_document()
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            tag = (op.get("tags") or ["other"])[0]
            groups.setdefault(tag, []).append((method, path, op))
    lines = [f"OpenAPI {doc['openapi']}, {doc['info']['title']} {doc['info']['version']}: "
             f"{len(doc['paths'])} paths.\n"]  # fmt: skip
    for tag in sorted(groups):
        lines.append(f"## {tag}\n")
        for method, path, op in groups[tag]:
            lines += _operation(method, path, op)
    lines.append("## Schemas\n")
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        lines += _schema(name, schema)
    return "\n".join(lines)


# --- the configuration file -------------------------------------------------------------------


def _toml_type(action: argparse.Action) -> str:
    if isinstance(action, argparse._StoreTrueAction | argparse._StoreFalseAction):
        return "boolean"
    if isinstance(action, argparse.BooleanOptionalAction):
        return "boolean"
    names: dict[object, str] = {int: "integer", float: "float"}
    item = names.get(action.type, "string")
    if isinstance(action, argparse._AppendAction):
        return f"array of {item}s (or one {item})"
    return item


def config_keys(section: str) -> list[tuple[str, argparse.Action]]:
    """The keys ``[section]`` may hold, in the command's flag order, as ``config`` reads them."""
    from railyard.cli.configfile import settable
    from railyard.cli.main import command

    return list(settable(command(section).parser()).items())


def config_reference() -> str:
    """Markdown: a table per section, every key with its TOML type, default and meaning."""
    lines: list[str] = []
    for section in ("up", "join"):
        lines += [f"## [{section}]\n",
                  f"The flags of `railyard {section}`, without their dashes.\n",
                  "| key | type | default | meaning |", "|---|---|---|---|"]  # fmt: skip
        for key, action in config_keys(section):
            default = action.default
            shown = "-" if default in (None, False, argparse.SUPPRESS, []) else f"`{default}`"
            choices = f" (one of {', '.join(map(str, action.choices))})" if action.choices else ""
            about = _cell((action.help or "").replace("%%", "%") + choices)
            lines.append(f"| `{key}` | {_toml_type(action)} | {_cell(shown)} | {about} |")
        lines.append("")
    return "\n".join(lines)


# --- the hook ---------------------------------------------------------------------------------

MARKERS: dict[str, Callable[[], str]] = {
    "<!-- railyard:cli -->": cli_reference,
    "<!-- railyard:openapi -->": api_reference,
    "<!-- railyard:config -->": config_reference,
}


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs calls this with each page's Markdown before rendering it."""
    for marker, render in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, render())
    return markdown
