"""``railyard show hostnames [LIST]`` and ``railyard show hostlist LIST``: scontrol's spellings,
answered without a server (no RAILYARD_URL is set here, so a request would fail)."""

from __future__ import annotations

import json

import pytest

from railyard.cli.main import main


@pytest.fixture(autouse=True)
def no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAILYARD_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("SLURM_JOB_NODELIST", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("argv", "out"),
    [
        (("show", "hostnames", "gpu[001-003,005],login1"),
         "gpu001\ngpu002\ngpu003\ngpu005\nlogin1\n"),
        (("show", "hostnames", "vm"), "vm\n"),  # was "show: one job id, not hostnames vm"
        (("show", "hostnames", "a[1-2]-b[3-4]"), "a1-b3\na1-b4\na2-b3\na2-b4\n"),
        (("show", "hostlist", "gpu001,gpu002,gpu003,login1"), "gpu[001-003],login1\n"),
        (("show", "hostlist", "n[1-2],n3"), "n[1-3]\n"),
    ],
)  # fmt: skip
def test_show_hostnames_and_hostlist(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], out: str
) -> None:
    assert _run(capsys, *argv) == (0, out, "")


def test_without_a_list_the_job_s_nodelist_is_read(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n[08-09]")
    assert _run(capsys, "show", "hostnames") == (0, "n08\nn09\n", "")
    assert (
        _run(capsys, "show", "hostnames", "--json")[1]
        == json.dumps(["n08", "n09"], indent=2) + "\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("show", "hostnames"), "give a list, or run it in a job"),
        (("show", "hostlist"), "give the names to compress"),
        (("show", "hostnames", "gpu[5-3]"), "runs backwards"),
        (("show", "hostnames", "gpu[1-3"), "unclosed"),
        (("show", "hostnames", "n[1-100000]"), "over 65536 hosts"),
    ],
)
def test_a_missing_or_bad_list_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert (code, out) == (2, "")
    assert err.startswith("railyard: show host")
    assert message in err
    assert err.count("\n") == 1


def test_another_second_word_is_still_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "show", "12", "13")
    assert code == 2
    assert "show: one job id, not 12 13" in err
