"""Where the Ray token comes from (Ray's order: RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH,
~/.ray/auth_token) and how railyard makes one: 0600, never through a planted file or link."""

from __future__ import annotations

from pathlib import Path

import pytest

from railyard.exec.ray.rayauth import TokenError, find_token, make_token, token_file


def test_the_variable_then_the_path_then_home(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    assert token_file(home) == tmp_path / ".ray" / "auth_token"
    assert find_token(home) is None
    make_token(tmp_path / ".ray" / "auth_token")
    assert find_token(home) == str(tmp_path / ".ray" / "auth_token")
    named = {**home, "RAY_AUTH_TOKEN_PATH": str(tmp_path / "t")}
    assert find_token(named) is None  # the path named, not HOME's
    assert find_token({**named, "RAY_AUTH_TOKEN": "c" * 64}) == "RAY_AUTH_TOKEN"


def test_a_made_token_is_0600_and_64_hex_digits(tmp_path: Path) -> None:
    path = tmp_path / "new" / "token"
    make_token(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert len(path.read_text()) == 64
    int(path.read_text(), 16)


def test_a_planted_file_or_link_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "victim"
    target.write_text("keep")
    link = tmp_path / "token"
    link.symlink_to(target)
    with pytest.raises(TokenError, match="cannot create the Ray token file"):
        make_token(link)
    assert target.read_text() == "keep"


@pytest.mark.parametrize(("mode", "content", "why"), [
    (0o644, "d" * 64, "readable by others"),
    (0o600, "", "empty"),
])  # fmt: skip
def test_an_unusable_token_file_is_one_line(
    tmp_path: Path, mode: int, content: str, why: str
) -> None:
    path = tmp_path / "token"
    path.write_text(content)
    path.chmod(mode)
    with pytest.raises(TokenError, match=why) as caught:
        find_token({"RAY_AUTH_TOKEN_PATH": str(path)})
    assert "\n" not in str(caught.value)
    assert "hint:" in str(caught.value)
