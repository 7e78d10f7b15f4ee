"""The API's container fields (Pyxis's ``--container-*`` options): a job's request, and the
prefixes a queue lets its jobs mount. Kept apart from :mod:`railyard.control.schemas` so each
file stays small; the runtime's side is :mod:`railyard.exec.containers.container`."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainSerializer, field_validator

from railyard.control.store.limits import EnvName, Workdir
from railyard.control.submitfields import Parsed
from railyard.exec.containers.container import Mount, image_problem, parse_mounts

MAX_MOUNTS = 64
MAX_IMAGE = 1024
MAX_MOUNT_PREFIXES = 64

MountText = Annotated[str, Field(min_length=1, max_length=4096)]
MountList = Annotated[
    list[Mount],
    Parsed(
        Annotated[list[MountText], Field(max_length=MAX_MOUNTS)],
        lambda written: parse_mounts(",".join(written)) if written else [],
    ),
    PlainSerializer(lambda mounts: [m.to_text() for m in mounts]),
]
"""Pyxis's ``--container-mounts``, one ``SRC[:DST[:ro|rw]]`` each, kept parsed (stored as
text, normalised)."""
Prefix = Annotated[str, Field(min_length=1, max_length=4096)]


class ContainerIn(BaseModel):
    """``--container-image`` and its companions."""

    model_config = ConfigDict(extra="forbid")

    image: str = Field(
        min_length=1,
        max_length=MAX_IMAGE,
        description="an image name the node has or can pull, or docker-archive:/oci-archive:PATH",
    )
    mounts: MountList = Field(
        default_factory=list,
        description="SRC[:DST[:ro|rw]] each; SRC under a prefix the queue allows",
    )
    workdir: Workdir = Field("", description="the working directory inside ('': the job's)")
    env: list[EnvName] = Field(
        default_factory=list,
        max_length=256,
        description="variables whose job value beats the image's (PATH, LD_LIBRARY_PATH...)",
    )
    mount_home: bool = Field(True, description="mount the user's home at the same path")

    @field_validator("image")
    @classmethod
    def _image(cls, v: str) -> str:
        problem = image_problem(v)
        if problem is not None:
            raise ValueError(f"{v!r}: {problem}")
        return v

    @field_validator("workdir")
    @classmethod
    def _workdir(cls, v: str) -> str:
        if v and not os.path.isabs(v):
            raise ValueError(f"{v!r} is not an absolute path")
        return v


def check_prefixes(prefixes: list[str]) -> list[str]:
    """A queue's mount prefixes: absolute, normalised, at most :data:`MAX_MOUNT_PREFIXES`."""
    if len(prefixes) > MAX_MOUNT_PREFIXES:
        raise ValueError(f"{len(prefixes)} prefixes, at most {MAX_MOUNT_PREFIXES}")
    out = []
    for prefix in prefixes:
        if not prefix.startswith("/") or "/../" in prefix + "/" or "\0" in prefix:
            raise ValueError(f"{prefix!r}: a prefix is an absolute path without '..'")
        out.append(os.path.normpath(prefix))
    return out


MountPrefixes = Annotated[
    list[Prefix], Field(max_length=MAX_MOUNT_PREFIXES), AfterValidator(check_prefixes)
]
"""What a queue's jobs may mount in their containers, beyond home and their working directory."""
