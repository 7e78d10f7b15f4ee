"""Job ids as Slurm's commands take them (`scancel 12_[1-3]`, `squeue -j 13`), parsed before
any request is sent."""

from __future__ import annotations

import pytest

from railyard.cli.jobsel import expand_ids, job_ids, matches


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (["12"], ["12"]),
        (["12_3", "14"], ["12_3", "14"]),
        (["63_[5,6]"], ["63_5", "63_6"]),
        (["63_[0-3]"], ["63_0", "63_1", "63_2", "63_3"]),
        (["63_[0-6:3]"], ["63_0", "63_3", "63_6"]),
        (["63_1,63_2"], ["63_1", "63_2"]),
        (["63_[1-2],70", "63_2"], ["63_1", "63_2", "70"]),  # each id once, in order
    ],
)
def test_brackets_and_commas_name_each_task(texts: list[str], expected: list[str]) -> None:
    assert expand_ids(texts) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("63_[1-3%2]", "a throttle (%N) names no task"),
        ("63_[3-1]", "bad array range '3-1'"),
        ("63_[0-99999999]", "has more than"),
    ],
)
def test_a_bad_bracket_is_one_line_and_exit_2(
    text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        expand_ids([text])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert text in err
    assert err.count("\n") == 1


def test_squeue_s_job_list_takes_brackets() -> None:
    assert job_ids("12,13_[1-2]") == ["12", "13_1", "13_2"]


@pytest.mark.parametrize("text", ["abc", "12,x", "12_", "-3"])
def test_squeue_s_job_list_refuses_what_is_no_job_id(
    text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        job_ids(text)
    assert exited.value.code == 2
    assert "is not a job id (hint: -j 12" in capsys.readouterr().err


def test_an_array_task_matches_its_own_number_and_its_array_s() -> None:
    task = {"id": "12_0", "task_number": 13}
    named = ["13", "12", "12_0", "14", "12_1"]
    assert [matches(task, [n]) for n in named] == [True, True, True, False, False]
    assert not matches({"id": "15", "task_number": None}, ["13"])
