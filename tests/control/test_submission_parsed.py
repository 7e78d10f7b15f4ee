"""A submission is parsed once, where it is validated: its Slurm-style fields hold what their
parsers return, the refusals of a bad spelling are what they were, and admission and the
loop's row reading never parse a submitted string again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from pydantic import ValidationError

from railyard.control.store.convert import _dependencies
from railyard.control.submission import JobSubmit
from railyard.sched.model import DependencyKind, Level, TopologyMode

SRC = Path(__file__).resolve().parents[2] / "src" / "railyard"


def test_the_slurm_fields_hold_their_parsed_values() -> None:
    spec = JobSubmit(
        command=["true"],
        mem="16G",
        time="1-00:30:00",
        priority="high",
        array="0-15:4%2",
        signal="B:USR2@90",
        dependency=" afterok:12:13_2 ",
        topology="preferred:leaf-group",
        nodelist="gpu[01-03]",
        constraint="ib&nvme|h100",
        container={"image": "x:1", "mounts": ["/data//set:/d:ro"]},
    )
    assert spec.mem == 16 * 1024
    assert spec.time == 86400 + 1800
    assert spec.priority is not None
    assert (spec.priority.value, spec.priority.shown) == (1000, "'high' (1000)")
    assert spec.array is not None
    assert (spec.array.text, spec.array.indices, spec.array.max_running) == (
        "0-15:4%2",
        [0, 4, 8, 12],
        2,
    )
    assert spec.signal is not None
    assert tuple(spec.signal) == ("SIGUSR2", 90.0, True)
    assert spec.dependency is not None
    assert spec.dependency.text == "afterok:12:13_2"
    assert spec.dependency.job_ids == {"12", "13_2"}
    assert [d.kind for d in spec.dependency.terms] == [DependencyKind.AFTER_OK]
    assert spec.topology is not None
    assert (spec.topology.level, spec.topology.mode) == ("leaf-group", "preferred")
    assert spec.topology.requirement.level == Level.parse("leaf-group")
    assert spec.topology.requirement.mode == TopologyMode.PREFERRED
    assert spec.nodelist == ("gpu01", "gpu02", "gpu03")
    assert spec.constraint is not None
    assert spec.constraint.any_of == (frozenset({"ib", "nvme"}), frozenset({"h100"}))
    assert spec.container is not None
    assert [(m.src, m.dst, m.readonly) for m in spec.container.mounts] == [
        ("/data/set", "/d", True)
    ]
    assert spec.container.model_dump()["mounts"] == ["/data/set:/d:ro"]  # stored as text
    assert spec.stored_bytes == len("true") + 1


def test_an_integer_time_is_minutes_and_an_unset_field_stays_none() -> None:
    spec = JobSubmit(command=["true"], time=90, mem_per_gpu=2048)
    assert (spec.time, spec.mem_per_gpu, spec.mem, spec.array, spec.signal) == (
        5400.0,
        2048,
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("field", "value", "loc", "msg"),
    [
        ("mem", "lots", ("mem",), "Value error, bad memory size 'lots' (hint: e.g. 16G, "
         "512M, 64000)"),
        ("mem", [1], ("mem", "function-after[clean_text(), constrained-str]"),
         "Input should be a valid string"),
        ("array", "9-1", ("array",), "Value error, bad array range '9-1' (hint: e.g. 0-9, "
         "1,3,5, 0-15:4 or 0-9%2)"),
        ("signal", "FOO", ("signal",), "Value error, unknown signal 'FOO' (hint: e.g. USR1, "
         "USR2, TERM, INT)"),
        ("dependency", "x" * 1025, ("dependency",), "String should have at most 1024 "
         "characters"),
        ("topology", "bad", ("topology",), "Value error, unknown topology level 'bad' (hint: "
         "[required:|preferred:]node|leaf-group|scalable-unit)"),
        ("priority", "urgent", ("priority",), "Value error, unknown priority 'urgent' (hint: "
         "an integer or low|normal|high|critical)"),
        ("container", {"image": "x:1", "mounts": ["rel:path"]}, ("container", "mounts"),
         "Value error, 'rel:path': the source must be an absolute path without '..'"),
    ],
)  # fmt: skip
def test_a_bad_spelling_is_refused_as_before(
    field: str, value: object, loc: tuple[str, ...], msg: str
) -> None:
    """The field and line of each refusal, as the API answered them before the fields kept
    their parsed values (taken from the previous code)."""
    with pytest.raises(ValidationError) as caught:
        JobSubmit(command=["true"], **{field: value})
    first = caught.value.errors()[0]
    assert (first["loc"], first["msg"]) == (loc, msg)


ADMISSION = ("admission", "queuerules", "booking", "containers", "sizebounds")
PARSERS = {
    "railyard.client.values": {"parse_mem", "parse_walltime", "parse_priority", "parse_array",
                               "parse_signal", "parse_topology", "parse_hostlist",
                               "parse_constraint", "parse_dependency"},
    "railyard.sched.dependencies": {"parse_dependency"},
    "railyard.exec.containers.container": {"parse_mounts"},
}  # fmt: skip


@pytest.mark.parametrize("module", ADMISSION)
def test_admission_parses_no_submitted_string(module: str) -> None:
    """Admission reads the values validation kept: none of its modules imports a parser."""
    tree = ast.parse((SRC / "control" / "usecases" / f"{module}.py").read_text("utf-8"))
    imported = {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module in PARSERS
        for alias in node.names
    }
    assert not {(m, n) for m, n in imported if n in PARSERS[m]}, module


def test_a_stored_dependency_is_parsed_once_per_text() -> None:
    """Every loop step reads every pending job: the same stored text gives the same parsed
    terms, not a new parse each read."""
    text = "afterany:41?afterok:42"
    first, again = _dependencies(text), _dependencies(text)
    assert first["dependencies"] is again["dependencies"]
    assert first["dependency_any"] is True
    assert [d.job_ids for d in first["dependencies"]] == [("41",), ("42",)]
    assert _dependencies("afterok:nonsense")["dependencies"][0].job_ids == ("?",)
