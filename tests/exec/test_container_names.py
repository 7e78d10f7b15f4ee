"""What a container job may name, without a runtime: the registries a node may pull from (issue
53 item 3), the paths a volume can carry and where they may land (items 1 and 7), and a user's
archive renamed on its way to ``podman load`` (issue 52 item 6)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from railyard.exec.containers.archives import ArchiveError, rename_archive
from railyard.exec.containers.container import (
    Mount,
    image_problem,
    may_pull,
    nested_problem,
    path_separator_problem,
    pull_reference,
    registry_problem,
)


@pytest.mark.parametrize(
    "image",
    ["127.0.0.1:5000/x", "127.1:5000/x", "0x7f.1/x", "docker://[::1]:5000/x", "localhost:5000/x",
     "10.1.2.3/x", "192.168.0.9:443/x", "169.254.169.254/latest", "[fe80::1]:80/x",
     "bobs.localhost:8080/x"],
)  # fmt: skip
def test_an_internal_registry_is_refused_unless_listed(image: str) -> None:
    problem = registry_problem(image, ("nvcr.io",))
    assert problem is not None
    assert "nvcr.io" in problem
    host = image.removeprefix("docker://").split("/")[0]
    assert registry_problem(image, (host,)) is None
    assert may_pull(image, (host,))


@pytest.mark.parametrize(
    "image", ["ubuntu:22.04", "localhost/built:1", "nvcr.io/nvidia/pytorch:24.01", "a.b/x"]
)
def test_names_that_dial_nothing_unlisted_are_accepted_and_never_pulled(image: str) -> None:
    assert registry_problem(image, ()) is None
    assert not may_pull(image, ())


def test_a_listed_registry_pulls_and_a_short_name_is_qualified() -> None:
    assert may_pull("nvcr.io/nvidia/pytorch:24.01", ("nvcr.io",))
    assert may_pull("registry.site:5000/x", ("registry.site",))
    assert not may_pull("docker-archive:/a.tar", ("docker.io",))
    assert may_pull("ubuntu", ("docker.io",))
    assert pull_reference("ubuntu:22.04") == "docker.io/library/ubuntu:22.04"
    assert pull_reference("me/tool") == "docker.io/me/tool"
    assert pull_reference("docker://nvcr.io/x:1") == "nvcr.io/x:1"


@pytest.mark.parametrize(
    "image", ["abc", "sha256:0123abcd", "localhost/railyard-archive/k:0", "railyard-archive/k",
              "docker-archive:/a:b.tar", "oci-archive:/a,b"],
)  # fmt: skip
def test_another_users_archive_is_not_named_by_id_or_private_name(image: str) -> None:
    assert image_problem(image) is not None


def test_paths_below_a_mount_and_volume_separators_are_named() -> None:
    mounts = [Mount("/etc", "/etc"), Mount("/home/bob", "/home/bob")]
    assert nested_problem("/etc/x/sub", mounts, "the workdir") is not None
    assert nested_problem("/etc", mounts, "the workdir") is None  # the mount itself exists
    assert nested_problem("/opt/x", mounts, "the workdir") is None  # the image's own tree
    assert nested_problem("/etcx", mounts, "the workdir") is None
    assert path_separator_problem("/home/bob/x:U") is not None
    assert path_separator_problem("/a,/etc") is not None
    assert path_separator_problem("/home/bob/x") is None


def _tar(members: dict[str, bytes], link: str | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link is not None:
            info = tarfile.TarInfo(link)
            info.type = tarfile.SYMTYPE
            info.linkname = "layer.tar"
            tar.addfile(info)
    return buffer.getvalue()


def _members(raw: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(raw)) as tar:
        return {m.name: (tar.extractfile(m) or io.BytesIO()).read() for m in tar}


def test_an_archives_names_are_replaced_and_its_layers_kept() -> None:
    manifest = [{"Config": "c.json", "RepoTags": ["localhost/victim:1"], "Layers": ["l.tar"]}]
    index = {"schemaVersion": 2, "manifests": [{"digest": "sha256:1", "annotations": {
        "org.opencontainers.image.ref.name": "victim:1", "io.containerd.image.name": "v:1",
        "other": "kept"}}]}  # fmt: skip
    source = _tar({"./manifest.json": json.dumps(manifest).encode(), "l.tar": b"layer bytes",
                   "index.json": json.dumps(index).encode(), "repositories": b"{}"})  # fmt: skip
    sink = io.BytesIO()
    rename_archive(io.BytesIO(source), sink, "localhost/railyard-archive/k")
    out = _members(sink.getvalue())
    assert "repositories" not in out
    assert out["l.tar"] == b"layer bytes"
    assert json.loads(out["./manifest.json"])[0]["RepoTags"] == ["localhost/railyard-archive/k:0"]
    annotations = json.loads(out["index.json"])["manifests"][0]["annotations"]
    private = "localhost/railyard-archive/k:0"
    assert annotations == {"other": "kept", "org.opencontainers.image.ref.name": private,
                           "io.containerd.image.name": private}  # fmt: skip


@pytest.mark.parametrize(
    ("members", "link"),
    [({"layer.tar": b"x"}, "manifest.json"), ({"manifest.json": b"{not json"}, None),
     ({"index.json": b"[]"}, None), ({"x": b"not a tar"}, None)],
)  # fmt: skip
def test_an_archive_that_hides_its_names_is_refused(members: dict[str, bytes],
                                                     link: str | None) -> None:  # fmt: skip
    source = b"not a tar at all" if "x" in members else _tar(members, link)
    with pytest.raises(ArchiveError):
        rename_archive(io.BytesIO(source), io.BytesIO(), "localhost/railyard-archive/k")
