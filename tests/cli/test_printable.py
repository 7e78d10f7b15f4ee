"""The one rule for a user's string on its way to a terminal or a page
(:mod:`railyard.client.printable`), and the CLI's layer that applies it to every table,
field and line it prints."""

from __future__ import annotations

import contextlib
import io

from railyard.cli.jobformat import sacct_table, squeue_lines
from railyard.cli.main import main
from railyard.cli.text import PrintableStream, pairs, raw, table
from railyard.client.printable import printable, printable_lines
from railyard.web.page import esc

ATTACK = "/bin/echo \x1b]0;PWNED\x07\x1b[2J"


def test_what_acts_is_shown_as_its_escape() -> None:
    assert printable(ATTACK) == "/bin/echo \\e]0;PWNED\\x07\\e[2J"
    assert printable("a\nb\tc\rd\x00\x7f\x9b") == "a\\nb\\tc\\rd\\x00\\x7f\\x9b"
    assert printable("evil\u202etxt.exe \u2066x\u2069") == "evil\\u202etxt.exe \\u2066x\\u2069"
    assert printable("plain /path/ü é 漢字 a\\b") == "plain /path/ü é 漢字 a\\b"


def test_lines_keep_their_newlines_tabs_and_crlf_but_not_a_lone_cr() -> None:
    assert printable_lines("one\ttwo\r\nthree\n") == "one\ttwo\r\nthree\n"
    assert printable_lines("fake\rreal\x1b[2J\u202e") == "fake\\rreal\\e[2J\\u202e"


def test_every_cli_layout_escapes_its_values() -> None:
    assert "\x1b" not in table(["COMMAND"], [[ATTACK]])
    assert "\x1b" not in pairs([("command", ATTACK)])
    job = {"id": "7", "command": ["/bin/echo", "\x1b[2J\nforged row"], "name": "\x07",
           "user": "bob", "queue": "default", "state": "failed", "reason": "r\x1b",
           "placement": {}}  # fmt: skip
    lines = squeue_lines("%i %o %j %r", [job])  # type: ignore[list-item]
    assert lines[1] == "7 /bin/echo \\e[2J\\nforged row \\x07 r\\e"
    rows = sacct_table("JobID,JobName,Reason", [job], lambda j: "0:0", parsable=True)  # type: ignore[list-item]
    assert rows[1] == "7|\\x07|r\\e"


def test_whatever_a_command_prints_reaches_the_terminal_escaped() -> None:
    out = io.StringIO()
    stream = PrintableStream(out)
    print(f"railyard: note: {ATTACK}", file=stream)
    assert out.getvalue() == "railyard: note: /bin/echo \\e]0;PWNED\\x07\\e[2J\n"
    assert raw(stream) is out  # a job's own log is written as the job wrote it
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["version"]) == 0
    assert printed.getvalue().strip()


def test_the_dashboard_escapes_html_and_what_acts() -> None:
    assert esc(f"<b>{ATTACK}</b>") == "&lt;b&gt;/bin/echo \\e]0;PWNED\\x07\\e[2J&lt;/b&gt;"
