"""Load a blueprint from YAML, turning every failure into one precise line.

YAML is parsed once into a node tree (which keeps line numbers) and once into Python values;
pydantic's error locations and our own field paths are mapped back to the line that holds them.
"""

from __future__ import annotations

import re
import types
import typing
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ValidationError

from railyard.blueprint.checks import check_references
from railyard.blueprint.errors import BlueprintError, FieldPath, Problem, format_path, nearest
from railyard.blueprint.local import local_blueprint_yaml
from railyard.blueprint.models import Blueprint

PRESET_PACKAGE = "railyard.blueprint.presets"


@dataclass(frozen=True)
class SourceMap:
    """Field path -> line number in the file the blueprint came from."""

    file: str
    root: yaml.Node | None

    def line_of(self, path: FieldPath) -> int | None:
        """The 1-based line of the deepest node on ``path`` that exists in the file."""
        node = self.root
        line = node.start_mark.line + 1 if node is not None else None
        for part in path:
            child: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if key.value == part:
                        child = value
                        line = key.start_mark.line + 1
                        break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and 0 <= part < len(node.value)
            ):
                child = node.value[part]
                line = child.start_mark.line + 1
            if child is None:
                break
            node = child
        return line

    def error(self, problem: Problem) -> BlueprintError:
        return BlueprintError(
            problem.message,
            file=self.file,
            line=self.line_of(problem.path),
            field=format_path(problem.path),
            hint=problem.hint,
        )


@dataclass(frozen=True)
class LoadedBlueprint:
    """A valid blueprint and where its fields came from (for errors found later)."""

    blueprint: Blueprint
    source: SourceMap


def preset_names() -> list[str]:
    """Presets shipped with the package, by name."""
    files = resources.files(PRESET_PACKAGE).iterdir()
    return sorted(f.name.removesuffix(".yaml") for f in files if f.name.endswith(".yaml"))


def load(name_or_path: str) -> LoadedBlueprint:
    """A preset name (``gaggle-h100``) or a path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise BlueprintError("no such file", file=str(path), hint="check the path")
        return load_text(path.read_text(encoding="utf-8"), file=str(path))
    if name_or_path == "local":
        return load_text(local_blueprint_yaml(), file="preset:local")
    if name_or_path not in preset_names():
        guess = nearest(name_or_path, [*preset_names(), "local"])
        hint = f"did you mean '{guess}'?" if guess else "give a preset name or a .yaml path"
        raise BlueprintError(
            f"'{name_or_path}' is neither a preset nor a file", file=name_or_path, hint=hint
        )
    text = resources.files(PRESET_PACKAGE).joinpath(f"{name_or_path}.yaml").read_text("utf-8")
    return load_text(text, file=f"preset:{name_or_path}")


def load_text(text: str, *, file: str = "<blueprint>") -> LoadedBlueprint:
    """Parse and validate; raise :class:`BlueprintError` naming the file, line and field."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise BlueprintError(
            f"malformed YAML: {exc.problem or exc.context}",
            file=file,
            line=line,
            hint="check indentation and quoting near this line",
        ) from None
    source = SourceMap(file, root)
    _reject_duplicate_keys(root, source)
    if not isinstance(data, dict):
        raise BlueprintError(
            "a blueprint is a mapping of sections", file=file, line=1, hint="start with 'name:'"
        )
    try:
        blueprint = Blueprint.model_validate(data)
    except ValidationError as exc:
        raise _first_error(exc, source) from None
    problems = check_references(blueprint)
    if problems:
        raise source.error(problems[0])
    return LoadedBlueprint(blueprint, source)


def _reject_duplicate_keys(node: yaml.Node | None, source: SourceMap) -> None:
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if key.value in seen:
                raise BlueprintError(
                    f"key '{key.value}' appears twice",
                    file=source.file,
                    line=key.start_mark.line + 1,
                    hint="YAML keeps only the last; remove one",
                )
            seen.add(key.value)
            _reject_duplicate_keys(value, source)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _reject_duplicate_keys(item, source)


def _first_error(exc: ValidationError, source: SourceMap) -> BlueprintError:
    errors = exc.errors(include_url=False)
    # A misspelt key also makes the real one "missing": report the misspelling, it is the cause.
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc: FieldPath = tuple(p for p in err["loc"] if isinstance(p, str | int))
    kind = err["type"]
    message = str(err["msg"]).removeprefix("Value error, ")
    hint = ""
    if kind == "extra_forbidden" and loc:
        fields = _fields_at(loc[:-1])
        guess = nearest(str(loc[-1]), fields)
        message = f"unknown key '{loc[-1]}'"
        hint = f"did you mean '{guess}'?" if guess else f"allowed: {', '.join(sorted(fields))}"
    elif kind == "missing":
        message = "required field is missing"
        hint = "add it"
    elif kind in ("float_parsing", "int_parsing", "int_from_float"):
        hint = "give a number, or a string with a unit such as '400 Gb/s'"
    elif kind == "enum":
        choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
        guess = nearest(str(err.get("input", "")), choices)
        message = f"'{err.get('input')}' is not one of {', '.join(choices)}"
        hint = f"did you mean '{guess}'?" if guess else "pick one of those"
    return source.error(Problem(loc, message, hint))


def _fields_at(loc: FieldPath) -> list[str]:
    """Field names of the model found by walking ``loc`` from :class:`Blueprint`."""
    current: object = Blueprint
    for part in loc:
        current = _step(current, part)
        if current is None:
            return []
    model = _as_model(current)
    return list(model.model_fields) if model else []


def _step(annotation: object, part: str | int) -> object | None:
    model = _as_model(annotation)
    if model is not None:
        field = model.model_fields.get(str(part))
        return field.annotation if field else None
    args: list[object] = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (list, tuple) and args:
        return args[0]
    if origin is dict and len(args) == 2:
        return args[1]
    return None


def _as_model(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):  # Model | None
        for arg in typing.get_args(annotation):
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                return arg
    return None
