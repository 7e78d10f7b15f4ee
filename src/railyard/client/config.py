"""Where the client finds its server: the state directory's ``client.json``.

The state directory is ``$RAILYARD_HOME`` or ``~/.railyard``; the server keeps its store there
too (:mod:`railyard.control.store.paths`), so both sides read its default from here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def default_state_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("RAILYARD_HOME") or Path.home() / ".railyard")


def client_config_path(state_dir: Path) -> Path:
    return state_dir / "client.json"
