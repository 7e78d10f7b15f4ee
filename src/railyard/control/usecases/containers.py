"""A containerised job at submit: its mounts against what its queue allows.

An admin lists, per queue, the path prefixes its jobs may mount in their containers
(``railyard admin queues update Q --container-mounts /datasets,/scratch``); a sub-queue
without a list takes its nearest ancestor's, and a queue with none allows no extra mount. The
user's home and the job's working directory are always mounted (unless declined) and need no
prefix. The check here is on the path as written; the wrapper checks again on the real path
it opened as the user (:mod:`railyard.exec.containerrun`), so a symlink cannot lead a mount
out of these prefixes. The allowed prefixes are stored with the job, so a queue changed later
does not change what an admitted job may mount.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from railyard.control.errors import Forbidden
from railyard.control.schemas import JobSubmit
from railyard.control.store.bulk import once
from railyard.control.store.tables import QueueRow
from railyard.control.usecases.queues import parent_map, path
from railyard.exec.container import parse_mounts, under


def queue_mount_prefixes(session: Session, queue: str) -> list[str]:
    """What ``queue``'s jobs may mount: its own list, else its nearest ancestor's."""
    parents = once(session, "queues", lambda: parent_map(session))
    lists = once(
        session,
        "container_mounts",
        lambda: dict(session.execute(select(QueueRow.name, QueueRow.container_mounts)).all()),
    )
    for name in reversed(path(parents, queue)):
        found = lists.get(name)
        if found is not None:
            return list(found)
    return []


def admit_container(session: Session, spec: JobSubmit) -> dict[str, Any] | None:
    """The stored form of ``spec.container`` (with the prefixes allowed), or None; Forbidden
    names the first mount outside its queue's prefixes."""
    if spec.container is None:
        return None
    allowed = queue_mount_prefixes(session, spec.queue)
    mounts = parse_mounts(",".join(spec.container.mounts))
    for i, mount in enumerate(mounts):
        if not any(under(mount.src, prefix) for prefix in allowed):
            raise Forbidden(
                f"{mount.src} is outside what queue {spec.queue!r} lets containers mount "
                f"({', '.join(allowed) or 'nothing beyond home and the working directory'})",
                field=f"container.mounts[{i}]",
                hint="mount a path under those, or ask an admin: railyard admin queues update "
                f"{spec.queue} --container-mounts PREFIX,...",
            )
    return {**spec.container.model_dump(), "allowed": allowed}
