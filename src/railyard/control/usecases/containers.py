"""A containerised job at submit: its mounts against what its queue allows.

An admin lists, per queue, the path prefixes its jobs may mount in their containers
(``railyard admin queues update Q --container-mounts /datasets,/scratch``); a sub-queue
without a list takes its nearest ancestor's, and a queue with none allows no extra mount. The
user's home and the job's working directory are always mounted (unless declined) and need no
prefix. The check here is on the path as written; the wrapper checks again on the real path
it opened as the user (:mod:`railyard.exec.containers.containerrun`), so a symlink cannot lead a
mount
out of these prefixes. The allowed prefixes are stored with the job, so a queue changed later
does not change what an admitted job may mount.

Nothing a job names may make root act on the host for it: its container workdir and mount
destinations may not lie inside another mount (the runtime would create them as root in the
host directory mounted there), its working directory may not carry a volume's separators,
and its image may not name a registry on a loopback, link-local or private host unless the
admin listed it (``railyard up --container-registry``); whether the node may pull the image
at all (the default: never, its own images only) is decided here and stored with the job.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.errors import Forbidden, Invalid
from railyard.control.store.bulk import once
from railyard.control.store.tables import QueueRow
from railyard.control.submission import JobSubmit
from railyard.control.usecases.queues import parent_map, path
from railyard.exec.containers.container import (
    Mount,
    may_pull,
    nested_problem,
    path_separator_problem,
    registry_problem,
    under,
)

REGISTRY_HINT = "use an image the nodes have, or ask an admin: up --container-registry HOST"


def queue_mount_prefixes(session: Session, queue: str) -> list[str]:
    """What ``queue``'s jobs may mount: its own list, else its nearest ancestor's."""
    parents = once(session, "queues", lambda: parent_map(session))
    return mount_prefixes(session, path(parents, queue))


def mount_prefixes(session: Session, lineage: list[str]) -> list[str]:
    """What a queue's jobs may mount, from its ``lineage`` (the queues from the root down)."""
    lists = once(
        session,
        "container_mounts",
        lambda: dict(session.execute(select(QueueRow.name, QueueRow.container_mounts)).all()),
    )
    for name in reversed(lineage):
        found = lists.get(name)
        if found is not None:
            return list(found)
    return []


def _home(unix_user: str) -> str:
    try:
        return pwd.getpwnam(unix_user).pw_dir if unix_user else ""
    except KeyError:
        return ""


def _check_paths(spec: JobSubmit, mounts: list[Mount], unix_user: str) -> None:
    """Invalid for a working directory a volume cannot carry, or a container workdir or mount
    destination inside another mount (see the module's note)."""
    assert spec.container is not None
    home = _home(unix_user)
    cwd = spec.workdir or home
    problem = path_separator_problem(cwd)
    if problem is not None:
        raise Invalid(
            "workdir",
            f"{problem} (the job's working directory is mounted in its container)",
            "run the container job from a directory without ':' or ','",
        )
    own = [Mount(cwd, cwd)] if cwd not in ("", "/") else []
    if spec.container.mount_home and home not in ("", "/", cwd):
        problem = path_separator_problem(home)
        if problem is not None:
            raise Invalid("container_mount_home", f"home {problem}", "--no-container-mount-home")
        own.append(Mount(home, home))
    taken = {m.dst for m in own}
    every = own + [m for m in mounts if m.dst not in taken]
    hint = "name a path in the image, or mount that directory itself at the path"
    if spec.container.workdir:
        workdir = os.path.normpath(spec.container.workdir)
        problem = nested_problem(workdir, every, "the workdir")
        if problem is not None:
            raise Invalid("container_workdir", problem, hint)
    for mount in mounts:
        # a directory mounted at its own path inside another such mount (a home's subtree
        # at the same place) is there already: nothing is made, and the wrapper checks it
        # at start, walking from the pinned source without following links
        same = mount.src == mount.dst
        around = [m for m in every if m.src != m.dst] if same else every
        problem = nested_problem(mount.dst, around, "the destination")
        if problem is not None:
            raise Invalid("container_mounts", f"{mount.to_text()}: {problem}", hint)


def admit_container(
    session: Session,
    spec: JobSubmit,
    lineage: list[str],
    unix_user: str = "",
    registries: Sequence[str] = (),
) -> dict[str, Any] | None:
    """The stored form of ``spec.container`` (with the prefixes allowed and whether its image
    may be pulled), or None; Forbidden names the first mount outside its queue's prefixes
    (``lineage``: the queues from the root down to it, `queuerules.QueuePlace`), Invalid a
    path or registry root must not act on (see the module's note)."""
    if spec.container is None:
        return None
    problem = registry_problem(spec.container.image, registries)
    if problem is not None:
        raise Invalid("container_image", problem, REGISTRY_HINT)
    allowed = mount_prefixes(session, lineage)
    mounts = spec.container.mounts
    _check_paths(spec, mounts, unix_user)
    for i, mount in enumerate(mounts):
        if not any(under(mount.src, prefix) for prefix in allowed):
            raise Forbidden(
                f"{mount.src} is outside what queue {spec.queue!r} lets containers mount "
                f"({', '.join(allowed) or 'nothing beyond home and the working directory'})",
                field=f"container.mounts[{i}]",
                hint="mount a path under those, or ask an admin: railyard admin queues update "
                f"{spec.queue} --container-mounts PREFIX,...",
            )
    pull = may_pull(spec.container.image, registries)
    return {**spec.container.model_dump(), "allowed": allowed, "pull": pull}
