"""Batch-script directives and Slurm-style values: every option, precedence, precise errors."""

from __future__ import annotations

from typing import Any

import pytest

from railyard.client import values
from railyard.client.scripts import ScriptErrors, merge, parse_script, resolve_export
from railyard.client.values import (
    parse_array,
    parse_mem,
    parse_priority,
    parse_signal,
    parse_topology,
    parse_walltime,
)
from railyard.control.submission import JobSubmit
from railyard.sched.model import Level, PriorityClass, TopologyMode

DIRECTIVES: list[tuple[str, dict[str, Any]]] = [
    ("--gpus=8", {"gpus": 8}),
    ("-G 8", {"gpus": 8}),
    ("--gpus=0", {"gpus": 0}),
    ("--gpus=h100:4", {"gpus": 4, "gpu_type": "h100"}),
    ("--nodes 2", {"nodes": 2}),
    ("-N2", {"nodes": 2}),
    ("--gpus-per-node=4", {"gpus_per_node": 4}),
    ("--gpus-per-node=a100:4", {"gpus_per_node": 4, "gpu_type": "a100"}),
    ("--gres=gpu:8", {"gpus_per_node": 8, "gres": True}),  # no SLURM_GPUS_PER_NODE
    ("--gres gpu:h100:2", {"gpus_per_node": 2, "gpu_type": "h100", "gres": True}),
    ("--gres=gpu", {"gpus_per_node": 1, "gres": True}),
    ("--gres=gpu:0", {"gpus": 0, "gpus_per_node": None}),  # no GPU, as Slurm reads it
    ("--gres=gpu:h100:0", {"gpus": 0, "gpus_per_node": None}),
    ("--gres=none", {"gpus": 0, "gpus_per_node": None}),
    ("--workers=3 --gpus-per-worker=2", {"workers": 3, "gpus_per_worker": 2}),
    ("--ntasks=4", {"ntasks": 4}),
    ("-n 1", {"ntasks": 1}),
    ("--ntasks-per-node=1", {"ntasks_per_node": 1}),
    ("--cpus-per-task=8", {"cpus_per_task": 8}),
    ("-c 4", {"cpus_per_task": 4}),
    ("--mem=64G", {"mem": "64G"}),
    ("--mem 16000", {"mem": "16000"}),
    ("--flavor=H100-SXM-80GB", {"flavor": "H100-SXM-80GB"}),
    ("--queue=research", {"queue": "research"}),
    ("--partition research", {"queue": "research"}),
    ("-p research", {"queue": "research"}),
    ("--priority=700", {"priority": "700"}),
    ("--priority high", {"priority": "high"}),
    ("--qos=critical", {"priority": "critical"}),
    ("--time=2:00:00", {"time": "2:00:00"}),
    ("-t 1-12", {"time": "1-12:00:00"}),
    ("--time=1:30", {"time": "0:02:00"}),  # MM:SS: whole minutes, rounded up, as sbatch
    ("-t 90", {"time": "1:30:00"}),
    ("--time=UNLIMITED", {"time": "UNLIMITED"}),
    ("--preemptible", {"preemptible": True}),
    ("--exclusive", {"exclusive": True}),
    ("--array=0-9%2", {"array": "0-9%2"}),
    ("-a 1,3,5", {"array": "1,3,5"}),
    ("--job-name=llm-7b", {"name": "llm-7b"}),
    ("-J 'my job'", {"name": "my job"}),
    ("--signal=B:USR1@90", {"signal": "B:USR1@90"}),
    ("--requeue", {"requeue": True}),
    ("--no-requeue", {"requeue": False}),
    ("--chdir=/work/run", {"workdir": "/work/run"}),
    ("-D /work/run", {"workdir": "/work/run"}),
    ("--export=A=1,B=x=y", {"export": "A=1,B=x=y"}),
    ("--export=ALL,HOME_DATA", {"export": "ALL,HOME_DATA"}),
    ("--export=NONE", {"export": "NONE"}),
    ("--env=A=1", {"env": {"A": "1"}}),
    (
        "--output=slurm-%j.out --error=err-%A_%a.txt",
        {"output": "slurm-%j.out", "error": "err-%A_%a.txt"},
    ),
    ("-o out.txt -e err.txt", {"output": "out.txt", "error": "err.txt"}),
    ("--dependency=afterok:12:13", {"dependency": "afterok:12:13"}),
    ("-d singleton", {"dependency": "singleton"}),
    ("--topology=preferred:scalable-unit", {"topology": "preferred:scalable-unit"}),
    ("--checkpoint-grace=120", {"checkpoint_grace_s": 120.0}),
    ("--min-runtime 600", {"min_runtime_s": 600.0}),
    ("--gpus=8   # a trailing comment", {"gpus": 8}),
    ("--container-image=nvcr.io/nvidia/pytorch:24.05-py3",
     {"container": {"image": "nvcr.io/nvidia/pytorch:24.05-py3"}}),
    ("--container-mounts=/data:/data:ro,/scratch", {"container": {"mounts": ["/data:/data:ro",
                                                                             "/scratch"]}}),
    ("--container-workdir /w --container-env=PATH,LD_LIBRARY_PATH",
     {"container": {"workdir": "/w", "env": ["PATH", "LD_LIBRARY_PATH"]}}),
    ("--no-container-mount-home", {"container": {"mount_home": False}}),
    ("--open-mode=append", {"open_mode": "append"}),
    ("--open-mode=Truncate", {"open_mode": "truncate"}),
]  # fmt: skip


@pytest.mark.parametrize("prefix", ["#SBATCH", "#RAILYARD"])
@pytest.mark.parametrize(("directive", "expected"), DIRECTIVES)
def test_every_directive(prefix: str, directive: str, expected: dict[str, Any]) -> None:
    text = f"#!/bin/bash\n{prefix} {directive}\npython train.py\n"
    assert parse_script(text, "job.sh").options == expected


HARMLESS = [
    ("--mail-type=END,FAIL", "--mail-type=END,FAIL accepted, ignored: railyard sends no mail"),
    ("--mail-user=me@example.org", "--mail-user=me@example.org accepted, ignored: railyard"),
    ("-A proj42", "--account=proj42 accepted, ignored: railyard has no accounts"),
    ("--get-user-env", "--get-user-env: --export=NONE starts from the login environment"),
    ("--cpus-per-gpu=4", "--cpus-per-gpu=4 accepted, ignored: give CPUs per task (-c)"),
    ("--tmp=10G", "--tmp=10G accepted, ignored: a node's local disk is not booked"),
    ("--time-min=30", "--time-min=30 accepted, ignored: the job runs for its --time"),
]


@pytest.mark.parametrize(("directive", "note"), HARMLESS)
def test_harmless_directives_are_accepted_with_a_note(directive: str, note: str) -> None:
    parsed = parse_script(f"#!/bin/bash\n#SBATCH {directive}\nrun\n", "job.sh")
    assert not parsed.options
    [line] = parsed.notes
    assert line.startswith(note)


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
    text = "#SBATCH --gpus=a100:4 --env=A=1\n#RAILYARD --gpus=8 --env=B=2\nrun\n"
    assert parse_script(text).options == {"gpus": 8, "env": {"A": "1", "B": "2"}}


ERRORS = [
    ("#SBATCH --gpu=8", "unknown #SBATCH option '--gpu' (hint: did you mean '--gpus'?)"),
    ("#RAILYARD --preemptable", "unknown #RAILYARD option '--preemptable' (hint: did you mean"),
    ("#SBATCH --mem-per-cpu=lots", "--mem-per-cpu: bad memory size 'lots' (hint: e.g. 16G"),
    ("#SBATCH --uid=bob", "unsupported #SBATCH option '--uid' (hint: jobs run as the"),
    ("#SBATCH --time=1h", "--time: bad time '1h' (hint: use MM, MM:SS"),
    ("#SBATCH --gpus=-1", "--gpus: expected an integer >= 0, got '-1'"),
    ("#SBATCH --nodes=2-4", "--nodes: node ranges are not supported: '2-4'"),
    ("#SBATCH --ntasks=0", "--ntasks: expected a positive integer, got '0'"),
    ("#SBATCH --mem=lots", "--mem: bad memory size 'lots' (hint: e.g. 16G"),
    ("#SBATCH --gres=mps:10", "--gres: unsupported --gres 'mps:10' (hint: use gpu:N"),
    ("#SBATCH --qos=urgent", "--qos: unknown priority 'urgent'"),
    ("#SBATCH --dependency=afterwards:1", "--dependency: unknown dependency type 'afterwards'"),
    ("#SBATCH -d afterok:x", "--dependency: bad job ids 'x' in dependency 'afterok:x'"),
    ("#SBATCH --time", "--time needs a value"),
    ("#SBATCH --requeue=yes", "--requeue takes no value"),
    ("#SBATCH --export=1A=2", "--export: bad variable name '1A'"),
    ("#SBATCH --export=NONE,ALL", "--export: ALL and NONE together: 'NONE,ALL'"),
    ("#SBATCH gpus=8", "unexpected argument 'gpus=8' (hint: options only"),
    ("#SBATCH -J 'open", "cannot split directive: No closing quotation"),
    ("#SBATCH --signal=USR1@soon", "--signal: bad signal 'USR1@soon'"),
    ("#SBATCH --mail-type=END,BOGUS", "--mail-type: invalid mail type 'BOGUS' (hint: one of"),
    ("#SBATCH --kill-on-invalid-dep=maybe", "--kill-on-invalid-dep: expected yes or no"),
]


@pytest.mark.parametrize(("line", "message"), ERRORS)
def test_errors_name_file_line_and_a_hint(line: str, message: str) -> None:
    text = f"#!/bin/bash\n#SBATCH --gpus=2\n{line}\nrun\n"
    with pytest.raises(ScriptErrors) as info:
        parse_script(text, "job.sh")
    [error] = info.value.errors
    assert str(error).startswith(f"job.sh:3: {message}")
    assert error.line_no == 3


def test_every_bad_directive_is_reported_in_one_pass() -> None:
    lines = ["#!/bin/bash", "#SBATCH --gpus=2"] + [line for line, _ in ERRORS] + ["run"]
    with pytest.raises(ScriptErrors) as info:
        parse_script("\n".join(lines), "job.sh")
    assert [e.line_no for e in info.value.errors] == list(range(3, 3 + len(ERRORS)))
    assert str(info.value).count("\n") == len(ERRORS) - 1  # one line each


def test_two_bad_options_on_one_line_are_two_errors() -> None:
    with pytest.raises(ScriptErrors) as info:
        parse_script("#SBATCH --gpu=1 --tmie=5 --mem=1G\nrun\n", "j.sh")
    assert [str(e) for e in info.value.errors] == [
        "j.sh:1: unknown #SBATCH option '--gpu' (hint: did you mean '--gpus'?)",
        "j.sh:1: unknown #SBATCH option '--tmie' (hint: did you mean '--time'?)",
    ]


@pytest.mark.parametrize(
    ("value", "expected_env", "note"),
    [
        ("ALL", {"HOME_DATA": "/data", "PATH": "/bin"}, None),
        ("NONE", {}, None),
        ("HOME_DATA,X=1", {"HOME_DATA": "/data", "X": "1"}, None),
        ("ALL,X=1", {"HOME_DATA": "/data", "PATH": "/bin", "X": "1"}, None),
        ("MISSING", {}, "--export: MISSING is not set here; not exported"),
        ("NONE,X=1", {"X": "1"}, None),
        ("NONE,HOME_DATA,X=a=b", {"HOME_DATA": "/data", "X": "a=b"}, None),
    ],
)
def test_export_as_sbatch(value: str, expected_env: dict[str, str], note: str | None) -> None:
    """sbatch 22.05: ALL copies everything, NONE nothing (the job starts from the login
    environment), a list only what it names (plus the login environment)."""
    _, env, notes = resolve_export(value, {"HOME_DATA": "/data", "PATH": "/bin"})
    assert env == expected_env
    assert notes == ([note] if note else [])


@pytest.mark.parametrize(
    ("text", "mib"),
    [("16G", 16384), ("512M", 512), ("8000", 8000), ("1T", 1048576), ("2048K", 2), ("4gb", 4096)],
)
def test_memory_units_as_slurm(text: str, mib: int) -> None:
    assert parse_mem(text) == mib


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
    def shape(**kw: Any) -> tuple[int, int, bool, int | None]:
        return tuple(JobSubmit(command=["x"], **kw).shape())  # type: ignore[return-value]

    assert shape() == (1, 0, False, None)  # no GPU unless asked, as Slurm
    assert shape(gpus=0) == (1, 0, False, None)
    assert shape(gpus=8) == (8, 1, False, None)  # one-GPU chunks, one task each
    assert shape(nodes=2, gpus_per_node=8) == (2, 8, True, None)  # two distinct nodes
    assert shape(nodes=2, gpus=16) == (2, 8, True, None)
    assert shape(nodes=2) == (2, 0, True, None)
    assert shape(gpus_per_node=4) == (1, 4, True, None)
    assert shape(gpus=8, ntasks_per_node=1) == (1, 8, False, 1)  # torchrun in one task
    assert shape(gpus=8, ntasks=1) == (1, 8, False, 1)
    assert shape(gpus=8, ntasks=8) == (8, 1, False, None)
    assert shape(nodes=2, gpus_per_node=8, ntasks=2) == (2, 8, True, 1)
    assert shape(ntasks=4) == (1, 0, False, 4)
    assert shape(workers=2, gpus_per_worker=4) == (2, 4, False, None)
    with pytest.raises(ValueError, match="gpus=8 but nodes x gpus_per_node = 16"):
        shape(gpus=8, nodes=2, gpus_per_node=8)
    with pytest.raises(ValueError, match="ntasks=3 is not a multiple of nodes=2"):
        shape(nodes=2, gpus_per_node=8, ntasks=3)
    with pytest.raises(ValueError, match="gpus=15 is not divisible by nodes=2"):
        shape(nodes=2, gpus=15)


def test_value_names_are_the_schedulers() -> None:
    """client.values spells the scheduler's names itself (the CLI must not import sched)."""
    assert {c.name.lower(): c.value for c in PriorityClass} == values.PRIORITY_CLASSES
    assert tuple(lv.label for lv in Level if lv is not Level.FABRIC) == values.TOPOLOGY_LEVELS
    assert set(values.TOPOLOGY_MODES) == {m.value for m in TopologyMode}
    assert values.TOPOLOGY_MODES[0] == TopologyMode.REQUIRED.value


def test_container_directives_add_up_over_lines_and_flags_win() -> None:
    text = (
        "#!/bin/bash\n#SBATCH --container-image=docker-archive:/img/a.tar\n"
        "#SBATCH --container-mounts=/data:/data:ro\n#SBATCH --container-mounts=/scratch\n"
        "#SBATCH --gpus=2\ntorchrun train.py\n"
    )
    options = parse_script(text, "job.sh").options
    assert options["container"] == {
        "image": "docker-archive:/img/a.tar",
        "mounts": ["/data:/data:ro", "/scratch"],
    }
    merged = merge(options, {"container": {"image": "other:1"}})
    assert merged["container"] == {"image": "other:1", "mounts": ["/data:/data:ro", "/scratch"]}
    spec = JobSubmit(command=["true"], **merged)
    assert spec.container is not None
    assert spec.container.model_dump()["mounts"] == [  # as stored: normalised text
        "/data:/data:ro",
        "/scratch:/scratch",
    ]


@pytest.mark.parametrize(
    ("directive", "message"),
    [
        ("--container-image='-v x'", "is not an image reference"),
        ("--container-name=pyt", "unsupported #SBATCH option '--container-name'"),
    ],
)
def test_container_directive_errors(directive: str, message: str) -> None:
    with pytest.raises(ScriptErrors, match=message):
        parse_script(f"#!/bin/bash\n#SBATCH {directive}\nrun\n", "job.sh")


@pytest.mark.parametrize(
    ("mounts", "message"),
    [
        (["data:/data"], "must be an absolute path"),
        (["/a:/b:rx"], "the flag is ro or rw"),
        (["/a/../etc:/b"], "without '..'"),
    ],
)
def test_bad_container_mounts_are_refused_by_the_schema(mounts: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JobSubmit(command=["true"], container={"image": "x:1", "mounts": mounts})
