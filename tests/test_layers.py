"""Imports point down only (docs/architecture.md): checked on the source, not by convention."""

from __future__ import annotations

import ast
import sys
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
# The client is a leaf: a `railyard submit` must load none of the server. The server may use
# its vocabulary (wire types, value spellings, bounds); the client uses nothing of railyard's.
PACKAGES = {p.stem for p in SRC.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
FORBIDDEN["client"] = PACKAGES - {"client", "__init__", "__main__"}
# The control-plane commands that users run in loops reach the server through the client only.
CLIENT_COMMANDS = (
    "main",
    "args",
    "jobs",
    "showjob",
    "jobctl",
    "run",
    "history",
    "cluster",
    "text",
    "hostnames",
)


def _imported_modules(path: Path) -> set[str]:
    """Every absolute module an ``import`` names, at any depth (a lazy import counts too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _railyard_imports(path: Path) -> set[str]:
    parts = (name.split(".") for name in _imported_modules(path))
    return {p[1] for p in parts if p[0] == "railyard" and len(p) > 1}


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


def test_the_client_imports_the_standard_library_only() -> None:
    """No third-party package either: pydantic or httpx would cost a CLI call more than the
    request itself (benchmarks/bench_cli.py)."""
    files = sorted((SRC / "client").rglob("*.py"))
    assert files
    for path in files:
        tops = {name.split(".")[0] for name in _imported_modules(path)}
        bad = tops - set(sys.stdlib_module_names) - {"__future__", "railyard"}
        assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}"


@pytest.mark.parametrize("module", CLIENT_COMMANDS)
def test_client_commands_reach_the_server_through_the_client(module: str) -> None:
    bad = _railyard_imports(SRC / "cli" / f"{module}.py") - {"client", "cli"}
    assert not bad, f"cli/{module}.py imports railyard.{sorted(bad)}"


# The dashboard reads the store through control's use-cases only (issue 22): never the tables,
# the row converters, /healthz or /metrics internals, nor SQL of its own, so who-may-see-what
# is decided in one place for the API and the pages alike.
WEB_MAY_USE = {"usecases", "errors", "schemas"}
SESSION_QUERIES = {"execute", "scalars", "scalar", "get", "query", "add", "delete", "merge"}


def _dashboard_breaches(path: Path) -> list[str]:
    """Each import of control beyond WEB_MAY_USE, each use of SQLAlchemy but the Session type
    it passes on, and each query run on a variable named ``session``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules = [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [(node.module, alias.name) for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "session"
            and node.func.attr in SESSION_QUERIES
        ):
            found.append(f"line {node.lineno}: session.{node.func.attr}(...)")
            continue
        else:
            continue
        for module, name in modules:
            parts = module.split(".") + ([name] if name else [])
            if parts[:2] == ["railyard", "control"]:
                if len(parts) < 3 or parts[2] not in WEB_MAY_USE:
                    found.append(f"line {node.lineno}: {'.'.join(parts)}")
            elif parts[0] == "sqlalchemy" and parts != ["sqlalchemy", "orm", "Session"]:
                found.append(f"line {node.lineno}: {'.'.join(parts)}")
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in (SRC / "web").glob("*.py")))
def test_the_dashboard_reads_through_use_cases_only(module: str) -> None:
    bad = _dashboard_breaches(SRC / "web" / module)
    assert not bad, f"web/{module}: {bad}"


# Each way of running jobs is a backend in exec (`railyard.exec.backend`): control composes
# one by name and speaks the protocol alone, so adding one changes nothing in control.
CONCRETE_BACKENDS = {
    "railyard.exec.localbackend", "railyard.exec.local",  # the embedded backend
    "railyard.exec.ray.raybackend", "railyard.exec.ray.rayexec", "railyard.exec.ray.rayagent",
    "railyard.exec.ray.rayauth",  # Ray's
}  # fmt: skip


def _exec_modules(path: Path) -> set[str]:
    """The exec modules a file imports, a name from the package resolved to its module."""
    from railyard.exec import _LAZY

    found = {m for m in _imported_modules(path) if m.startswith("railyard.exec.")}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "railyard.exec":
            found.update(_LAZY.get(a.name, f"railyard.exec.{a.name}") for a in node.names)
    return found


def test_every_registered_backend_is_a_concrete_one() -> None:
    from railyard.exec.backend import _REGISTRY

    modules = {str(target).split(":")[0] for target in _REGISTRY.values()}
    assert modules <= CONCRETE_BACKENDS, sorted(modules - CONCRETE_BACKENDS)


@pytest.mark.parametrize("module", sorted(CONCRETE_BACKENDS))
def test_concrete_backends_exist(module: str) -> None:
    assert (SRC.parent / (module.replace(".", "/") + ".py")).exists()


def test_control_imports_no_concrete_backend() -> None:
    """Nor does the protocol's module: it names them, and imports the one chosen."""
    files = [SRC / "exec" / "backend.py", *sorted((SRC / "control").rglob("*.py"))]
    for path in files:
        bad = _exec_modules(path) & CONCRETE_BACKENDS
        assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}: use railyard.exec.backend"


# Inside control, rooms with doors (issue 22): the API calls use-cases, use-cases call the
# store, the loop reads the store and calls use-cases, and nothing but `server.py` (the one
# composition root) imports the API. The shared vocabulary beside them (errors, schemas,
# jobspec) leans on the store's tables alone.
CONTROL = SRC / "control"
CONTROL_ROOMS = {"store", "usecases", "api", "loop", "metrics", "process"}
CONTROL_FORBIDDEN = {
    "store": {"usecases", "api", "loop", "metrics", "server", "process"},
    "usecases": {"api", "loop", "metrics", "server", "process"},
    "metrics": {"api", "loop", "server", "process"},
    "loop": {"api", "server", "process"},
    "api": {"server", "process"},
    # the server process's directories and a standby's wait: beside the composition root
    "process": {"api", "loop", "metrics", "server"},
    "shared": {"usecases", "api", "loop", "metrics", "server", "process"},
}


def _control_room(path: Path) -> str:
    first = path.relative_to(CONTROL).parts[0]
    return first if first in CONTROL_ROOMS else "server" if first == "server.py" else "shared"


def _control_imports(path: Path) -> set[str]:
    parts = (name.split(".") for name in _imported_modules(path))
    return {p[2] for p in parts if p[:2] == ["railyard", "control"] and len(p) > 2}


@pytest.mark.parametrize("room", sorted(CONTROL_FORBIDDEN))
def test_control_rooms_import_inward_only(room: str) -> None:
    files = [p for p in sorted(CONTROL.rglob("*.py")) if _control_room(p) == room]
    files = [p for p in files if "migrations" not in p.parts or room != "store"]
    assert files
    for path in files:
        bad = _control_imports(path) & CONTROL_FORBIDDEN[room]
        assert not bad, f"{path.relative_to(SRC)} ({room}) imports control.{sorted(bad)}"


def test_control_keeps_its_modules_in_rooms() -> None:
    """A new module goes in a room: only the composition root and the shared vocabulary sit
    at control's top level."""
    top = {p.stem for p in CONTROL.glob("*.py")}
    vocabulary = {"schemas", "adminschemas", "health_schemas", "containerschema", "jobspec",
                  "submission", "submitfields"}  # fmt: skip
    assert top <= {"__init__", "server", "errors", *vocabulary}, top


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only(tree: ast.AST) -> set[int]:
    """The nodes under ``if TYPE_CHECKING:``: imports that never run."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        test = getattr(node, "test", None)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test or node):
            skipped.update(id(inner) for stmt in node.body for inner in ast.walk(stmt))
    return skipped


def _module_edges(name: str, path: Path, modules: set[str]) -> set[str]:
    """The railyard modules ``name`` imports when it runs, function-level imports included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = _typing_only(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in modules else base)
    return (out & modules) - {name}


def test_no_import_circle_anywhere() -> None:
    """Issue 54: two circles were closed by imports inside functions; every import counts."""
    paths = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph = {name: _module_edges(name, path, set(paths)) for name, path in paths.items()}
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                circles.append(sorted([v, *component]))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in graph:
        if module not in order:
            visit(module)
    assert not circles, circles


# exec/ by trade (issue 54): the executor's core (the protocol, the local executor, its
# backends, exits and logs) at the top, each trade in a room of its own. A room's imports of
# another exec room are listed here; Ray, on top, is imported by nobody (the backend registry
# names it by a string, imported only when chosen).
EXEC = SRC / "exec"
EXEC_ROOMS = {"cgroups", "containers", "terminals", "task", "ray"}
EXEC_MAY_IMPORT = {
    "cgroups": {"core"},  # the kernel's side: nothing above it
    "containers": {"core", "cgroups", "task"},
    "terminals": {"core", "task"},
    "task": {"core", "cgroups", "containers", "terminals"},  # the wrapper runs each trade
    "core": {"cgroups", "containers", "terminals", "task"},
    "ray": {"core", "cgroups", "containers", "terminals", "task"},
}


def _exec_room(path: Path) -> str:
    first = path.relative_to(EXEC).parts[0]
    return first if first in EXEC_ROOMS else "core"


@pytest.mark.parametrize("room", sorted(EXEC_MAY_IMPORT))
def test_exec_rooms_import_what_their_trade_needs(room: str) -> None:
    files = [p for p in sorted(EXEC.rglob("*.py")) if _exec_room(p) == room]
    assert files
    for path in files:
        for name in _imported_modules(path):
            parts = name.split(".")
            if parts[:2] != ["railyard", "exec"] or len(parts) < 3:
                continue
            target = parts[2] if parts[2] in EXEC_ROOMS else "core"
            if target == room:
                continue
            assert target in EXEC_MAY_IMPORT[room], f"{path.relative_to(SRC)} imports {name}"


def test_exec_keeps_its_trades_in_rooms_each_with_a_one_line_docstring() -> None:
    """The core stays small: a new module goes in its trade's room."""
    top = {p.stem for p in EXEC.glob("*.py")}
    core = {"__init__", "protocol", "errors", "backend", "local", "localbackend", "cleanup",
            "exits", "exitwatch", "jobstate", "logread", "procfs", "usage", "attempt"}  # fmt: skip
    assert top <= core, top - core
    for room in EXEC_ROOMS:
        doc = ast.get_docstring(ast.parse((EXEC / room / "__init__.py").read_text()))
        assert doc is not None, room
        assert len(doc.splitlines()) == 1, room
