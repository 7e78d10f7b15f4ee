"""Batch-script directives and Slurm-style values: every option, precedence, precise errors."""

from __future__ import annotations

from typing import Any

import pytest

from railyard.control import values
from railyard.control.schemas import (
    JobSubmit,
    parse_array,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
)
from railyard.control.scripts import ScriptError, merge, parse_script
from railyard.sched.model import Level, PriorityClass, TopologyMode

ENV = {"HOME_DATA": "/data"}

DIRECTIVES: list[tuple[str, dict[str, Any]]] = [
    ("--gpus=8", {"gpus": 8}),
    ("-G 8", {"gpus": 8}),
    ("--gpus=h100:4", {"gpus": 4}),
    ("--nodes 2", {"nodes": 2}),
    ("-N2", {"nodes": 2}),
    ("--gpus-per-node=4", {"gpus_per_node": 4}),
    ("--gres=gpu:8", {"gpus_per_node": 8}),
    ("--gres gpu:h100:2", {"gpus_per_node": 2}),
    ("--workers=3 --gpus-per-worker=2", {"workers": 3, "gpus_per_worker": 2}),
    ("--flavor=H100-SXM-80GB", {"flavor": "H100-SXM-80GB"}),
    ("--queue=research", {"queue": "research"}),
    ("--partition research", {"queue": "research"}),
    ("-p research", {"queue": "research"}),
    ("--priority=700", {"priority": "700"}),
    ("--priority high", {"priority": "high"}),
    ("--qos=critical", {"priority": "critical"}),
    ("--time=2:00:00", {"time": "2:00:00"}),
    ("-t 1-12", {"time": "1-12"}),
    ("--preemptible", {"preemptible": True}),
    ("--array=0-9%2", {"array": "0-9%2"}),
    ("-a 1,3,5", {"array": "1,3,5"}),
    ("--job-name=llm-7b", {"name": "llm-7b"}),
    ("-J 'my job'", {"name": "my job"}),
    ("--signal=B:USR1@90", {"signal": "B:USR1@90"}),
    ("--requeue", {"requeue": True}),
    ("--no-requeue", {"requeue": False}),
    ("--chdir=/work/run", {"workdir": "/work/run"}),
    ("-D /work/run", {"workdir": "/work/run"}),
    ("--export=A=1,B=x=y", {"env": {"A": "1", "B": "x=y"}}),
    ("--export=ALL,HOME_DATA", {"env": {"HOME_DATA": "/data"}}),
    ("--env=A=1", {"env": {"A": "1"}}),
    ("--topology=preferred:scalable-unit", {"topology": "preferred:scalable-unit"}),
    ("--checkpoint-grace=120", {"checkpoint_grace_s": 120.0}),
    ("--min-runtime 600", {"min_runtime_s": 600.0}),
    ("--output=slurm-%j.out --error=err.txt", {}),
    ("--gpus=8   # a trailing comment", {"gpus": 8}),
]


@pytest.mark.parametrize("prefix", ["#SBATCH", "#RAILYARD"])
@pytest.mark.parametrize(("directive", "expected"), DIRECTIVES)
def test_every_directive(prefix: str, directive: str, expected: dict[str, Any]) -> None:
    text = f"#!/bin/bash\n{prefix} {directive}\npython train.py\n"
    assert parse_script(text, "job.sh", ENV).options == expected


def test_output_and_error_are_noted_not_honoured() -> None:
    parsed = parse_script("#SBATCH --output=o.txt\n#SBATCH -e e.txt\nrun\n", "job.sh")
    assert parsed.options == {}
    assert len(parsed.notes) == 2
    assert parsed.notes[0] == (
        "--output=o.txt ignored: logs go to railyard's log dir (railyard logs ID)"
    )


def test_directives_stop_at_the_first_command() -> None:
    text = "\n".join(
        [
            "#!/bin/bash",
            "",
            "# a comment",
            "#SBATCH --gpus=4",
            "##SBATCH --gpus=64",  # disabled, as Slurm users do
            "#SBATCHX --nonsense",
            "module load cuda",
            "#SBATCH --gpus=8",  # after the first command: a comment, as in sbatch
            "#SBATCH --bogus",
        ]
    )
    assert parse_script(text, "job.sh").options == {"gpus": 4}


def test_later_directives_override_earlier_and_env_accumulates() -> None:
    text = "#SBATCH --gpus=4 --export=A=1\n#RAILYARD --gpus=8 --env=B=2\nrun\n"
    assert parse_script(text).options == {"gpus": 8, "env": {"A": "1", "B": "2"}}


ERRORS = [
    ("#SBATCH --gpu=8", "unknown #SBATCH option '--gpu' (hint: did you mean '--gpus'?)"),
    ("#RAILYARD --preemptable", "unknown #RAILYARD option '--preemptable' (hint: did you mean"),
    ("#SBATCH --ntasks=8", "unsupported #SBATCH option '--ntasks' (hint: railyard runs one"),
    ("#SBATCH -c 4", "unsupported #SBATCH option '-c' (hint: CPUs come with the GPUs"),
    ("#SBATCH --time=1h", "--time: bad time '1h' (hint: use MM, MM:SS"),
    ("#SBATCH --gpus=0", "--gpus: expected a positive integer, got '0'"),
    ("#SBATCH --gres=mps:10", "--gres: unsupported --gres 'mps:10' (hint: use gpu:N"),
    ("#SBATCH --qos=urgent", "--qos: unknown priority 'urgent'"),
    ("#SBATCH --time", "--time needs a value"),
    ("#SBATCH --requeue=yes", "--requeue takes no value"),
    ("#SBATCH --export=1A=2", "--export: bad variable name '1A'"),
    ("#SBATCH --export=NOT_SET_ANYWHERE", "--export: NOT_SET_ANYWHERE is not set"),
    ("#SBATCH gpus=8", "unexpected argument 'gpus=8' (hint: options only"),
    ("#SBATCH -J 'open", "cannot split directive: No closing quotation"),
    ("#SBATCH --signal=USR1@soon", "--signal: bad signal 'USR1@soon'"),
]


@pytest.mark.parametrize(("line", "message"), ERRORS)
def test_errors_name_file_line_and_a_hint(line: str, message: str) -> None:
    text = f"#!/bin/bash\n#SBATCH --gpus=2\n{line}\nrun\n"
    with pytest.raises(ScriptError) as info:
        parse_script(text, "job.sh", ENV)
    assert str(info.value).startswith(f"job.sh:3: {message}")
    assert info.value.line_no == 3


def test_flags_override_directives() -> None:
    script = {"gpus": 8, "queue": "a", "time": "10", "env": {"A": "1", "B": "1"}}
    flags = {"queue": "b", "env": {"B": "2"}}
    expected = {"gpus": 8, "queue": "b", "time": "10", "env": {"A": "1", "B": "2"}}
    assert merge(script, flags) == expected


def test_a_shape_on_the_command_line_replaces_the_scripts() -> None:
    assert merge({"nodes": 2, "gpus_per_node": 8}, {"gpus": 4}) == {"gpus": 4}
    assert merge({"gpus": 16}, {"nodes": 4}) == {"nodes": 4}
    by_node = {"nodes": 4, "gpus_per_node": 8}
    assert merge({"nodes": 2, "gpus_per_node": 8}, {"nodes": 4}) == by_node
    assert merge({"gpus": 2}, {"workers": 1, "gpus_per_worker": 8}) == {
        "workers": 1,
        "gpus_per_worker": 8,
    }


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 5400),
        ("1:30", 90),
        ("2:00:00", 7200),
        ("1-12", 129600),
        ("1-0:30", 88200),
        ("2-01:02:03", 176523),
        (45, 2700),
        ("0", None),
        ("UNLIMITED", None),
    ],
)
def test_walltime_formats(text: str | int, seconds: float | None) -> None:
    assert parse_walltime(text) == seconds


@pytest.mark.parametrize("text", ["1h", "1:2:3:4", "1-", "-5", "1.5", ""])
def test_bad_walltimes(text: str) -> None:
    with pytest.raises(ValueError, match="bad time"):
        parse_walltime(text)


def test_signal_array_priority_topology() -> None:
    assert parse_signal("USR1@60") == ("SIGUSR1", 60.0)
    assert parse_signal("B:SIGUSR2@5") == ("SIGUSR2", 5.0)
    assert parse_signal("10") == ("SIGUSR1", 60.0)
    assert parse_array("0-15:4%2") == ([0, 4, 8, 12], 2)
    assert parse_array("3,1-2") == ([1, 2, 3], None)
    with pytest.raises(ValueError, match="more than"):
        parse_array("0-100000")
    assert parse_priority("low") == 100
    assert parse_priority(42) == 42
    assert parse_topology("leaf-group") == ("leaf-group", "required")
    assert parse_topology("preferred:node") == ("node", "preferred")


def test_submission_shapes() -> None:
    def shape(**kw: Any) -> tuple[int, int]:
        return JobSubmit(command=["x"], **kw).shape()

    assert shape() == (1, 1)
    assert shape(gpus=8) == (8, 1)
    assert shape(nodes=2, gpus_per_node=8) == (16, 1)
    assert shape(nodes=2, gpus=16) == (16, 1)
    assert shape(workers=2, gpus_per_worker=4) == (2, 4)
    with pytest.raises(ValueError, match="nodes needs gpus_per_node"):
        shape(nodes=2)
    with pytest.raises(ValueError, match="gpus=8 but nodes x gpus_per_node = 16"):
        shape(gpus=8, nodes=2, gpus_per_node=8)


def test_value_names_are_the_schedulers() -> None:
    """control.values spells the scheduler's names itself (the CLI must not import sched)."""
    assert {c.name.lower(): c.value for c in PriorityClass} == values.PRIORITY_CLASSES
    assert tuple(lv.label for lv in Level if lv is not Level.FABRIC) == values.TOPOLOGY_LEVELS
    assert set(values.TOPOLOGY_MODES) == {m.value for m in TopologyMode}
    assert values.TOPOLOGY_MODES[0] == TopologyMode.REQUIRED.value
