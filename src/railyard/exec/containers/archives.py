"""A user's image archive, renamed on its way to root's ``podman load``.

``podman load`` gives a loaded image the names its archive carries (a docker-archive's
``RepoTags``, an OCI archive's ``org.opencontainers.image.ref.name`` or containerd's
``io.containerd.image.name``), and a name belongs to one image on the node: loading a
user's archive tagged with another job's image's name would move that name, and untagging
afterwards takes every name off an image the node already had when the archive holds the
same image. So the archive is streamed through here (read from the descriptor the user
opened, written to the loader's stdin) with every name replaced by one private to the
archive (``REPO:0``, ``REPO:1``... for its images in order) and Docker's legacy
``repositories`` file dropped. The layers pass through unchanged, so digests hold.

The archive is the user's: a manifest that is not a regular member, or larger than
:data:`MAX_MANIFEST_BYTES`, or not the JSON the format says, is refused.
"""

from __future__ import annotations

import io
import json
import posixpath
import tarfile
from typing import IO, Any

DOCKER_MANIFEST = "manifest.json"
OCI_INDEX = "index.json"
DOCKER_LEGACY = "repositories"
OCI_NAMES = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
MAX_MANIFEST_BYTES = 4 << 20


class ArchiveError(Exception):
    """The archive cannot be renamed; the message says why in one line."""


def _renamed_manifest(data: Any, repo: str) -> Any:
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise ArchiveError(f"{DOCKER_MANIFEST} is not a list of images")
    return [{**entry, "RepoTags": [f"{repo}:{i}"]} for i, entry in enumerate(data)]


def _renamed_index(data: Any, repo: str) -> Any:
    manifests = data.get("manifests") if isinstance(data, dict) else None
    if not isinstance(manifests, list) or not all(isinstance(m, dict) for m in manifests):
        raise ArchiveError(f"{OCI_INDEX} has no list of manifests")
    renamed = []
    for i, manifest in enumerate(manifests):
        annotations = manifest.get("annotations") or {}
        if not isinstance(annotations, dict):
            raise ArchiveError(f"{OCI_INDEX}: annotations are not a mapping")
        kept = {k: v for k, v in annotations.items() if k not in OCI_NAMES}
        renamed.append({**manifest, "annotations": kept | dict.fromkeys(OCI_NAMES, f"{repo}:{i}")})
    return {**data, "manifests": renamed}


RENAMERS = {DOCKER_MANIFEST: _renamed_manifest, OCI_INDEX: _renamed_index}


def rename_archive(source: IO[bytes], sink: IO[bytes], repo: str) -> None:
    """Copy the tar ``source`` (possibly compressed) to ``sink``, uncompressed, with every
    image name replaced by ``repo:N``; ArchiveError for an archive that hides its names."""
    try:
        with (
            tarfile.open(fileobj=source, mode="r|*") as tar_in,
            tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar_out,
        ):
            for member in tar_in:
                name = posixpath.normpath(member.name.lstrip("/"))
                if name == DOCKER_LEGACY:
                    continue
                renamer = RENAMERS.get(name)
                if renamer is None:
                    tar_out.addfile(member, tar_in.extractfile(member) if member.isfile() else None)
                    continue
                if not member.isfile():
                    raise ArchiveError(f"{name} is not a regular file in the archive")
                if member.size > MAX_MANIFEST_BYTES:
                    raise ArchiveError(f"{name} is over {MAX_MANIFEST_BYTES} bytes")
                raw = tar_in.extractfile(member)
                assert raw is not None  # a regular member
                try:
                    data = renamer(json.loads(raw.read()), repo)
                except (ValueError, UnicodeDecodeError) as exc:
                    raise ArchiveError(f"{name} is not JSON: {exc}") from None
                text = json.dumps(data).encode()
                member.size = len(text)
                tar_out.addfile(member, io.BytesIO(text))
    except tarfile.TarError as exc:
        raise ArchiveError(f"not a tar archive: {exc}") from None
