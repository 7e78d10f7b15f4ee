"""GPU confinement on cgroup v2: an eBPF device program attached to a step's cgroup.

Cgroup v2 has no ``devices.deny`` file: the kernel asks a ``BPF_PROG_TYPE_CGROUP_DEVICE``
program attached to the cgroup (and its ancestors) at every open or mknod of a device file,
and the access is refused with EPERM when any of them returns 0. This is how runc and
systemd confine devices on v2 hosts (Ubuntu 22.04+, RHEL 9), where the v1 controller that
:mod:`railyard.exec.cgroups.devices` writes to does not exist. The program is a few instructions,
assembled here (no compiler, no libbpf): allow every device except NVIDIA GPUs (major 195)
whose minor is not the step's, and every device of a denied major (``nvidia-caps``).

It is attached with ``BPF_F_ALLOW_MULTI``, so it composes with the programs a service manager
may attach higher up: every one of them must allow an access. The attachment lives as long as
the cgroup; nothing of it is kept in this process.

References: https://docs.kernel.org/bpf/prog_cgroup_device.html (the context and the rule),
bpf(2) for ``BPF_PROG_LOAD`` and ``BPF_PROG_ATTACH`` and ``include/uapi/linux/bpf.h`` for
the layout of ``union bpf_attr`` and of an instruction (``struct bpf_insn``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import struct
from collections.abc import Iterable
from pathlib import Path

SYS_BPF = {"x86_64": 321, "aarch64": 280}  # the bpf(2) syscall number by machine
BPF_PROG_LOAD, BPF_PROG_ATTACH = 5, 8
BPF_PROG_TYPE_CGROUP_DEVICE = 15
BPF_CGROUP_DEVICE = 6  # attach type
BPF_F_ALLOW_MULTI = 2
ATTR_SIZE = 128  # larger than the fields used; the kernel checks the tail is zero
DEV_CHAR = 2  # BPF_DEVCG_DEV_CHAR, in the low 16 bits of the context's access_type

# Instruction classes and operations (bpf.h): load a word from the context, AND, compare
# with an immediate and jump, move an immediate, exit.
_LDX_W = 0x61  # BPF_LDX | BPF_MEM | BPF_W
_AND_K = 0x57  # BPF_ALU64 | BPF_AND | BPF_K
_MOV_K = 0xB7  # BPF_ALU64 | BPF_MOV | BPF_K
_JEQ_K, _JNE_K = 0x15, 0x55  # BPF_JMP | BPF_JEQ / BPF_JNE | BPF_K
_EXIT = 0x95  # BPF_JMP | BPF_EXIT


class DevFilterError(OSError):
    """The kernel refused to load or attach the program."""


def _insn(code: int, dst: int = 0, src: int = 0, off: int = 0, imm: int = 0) -> bytes:
    return struct.pack("<BBhi", code, (src << 4) | dst, off, imm)


def program(
    nvidia_major: int, allowed_minors: Iterable[int], denied_majors: Iterable[int]
) -> bytes:
    """The device program of one step, as the kernel's instruction array.

    r1 is the context ``{u32 access_type; u32 major; u32 minor}``; the program returns 1
    (allow) or 0 (deny)."""
    minors, denied = sorted(set(allowed_minors)), sorted(set(denied_majors))
    # Tests, each jumping to ALLOW or DENY; offsets are resolved once the count is known.
    tests: list[tuple[int, int, int, str]] = [(_JNE_K, 2, DEV_CHAR, "allow")]
    tests += [(_JEQ_K, 3, major, "deny") for major in denied]
    tests += [(_JNE_K, 3, nvidia_major, "allow")]
    tests += [(_JEQ_K, 4, minor, "allow") for minor in minors]
    head = [
        _insn(_LDX_W, dst=2, src=1, off=0),  # r2 = access_type
        _insn(_AND_K, dst=2, imm=0xFFFF),  # r2 = device type
        _insn(_LDX_W, dst=3, src=1, off=4),  # r3 = major
        _insn(_LDX_W, dst=4, src=1, off=8),  # r4 = minor
    ]
    deny_at = len(head) + len(tests)  # DENY: r0 = 0; exit.  ALLOW: r0 = 1; exit.
    body = []
    for i, (code, reg, imm, target) in enumerate(tests):
        at = len(head) + i
        dest = deny_at if target == "deny" else deny_at + 2
        body.append(_insn(code, dst=reg, off=dest - at - 1, imm=imm))
    tail = [_insn(_MOV_K, dst=0, imm=0), _insn(_EXIT), _insn(_MOV_K, dst=0, imm=1), _insn(_EXIT)]
    return b"".join(head + body + tail)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    number = SYS_BPF.get(platform.machine())
    if number is None:
        raise DevFilterError(0, f"no bpf(2) number known for {platform.machine()}")
    result = int(_libc().syscall(number, cmd, attr, ctypes.sizeof(attr)))
    if result < 0:
        err = ctypes.get_errno()
        raise DevFilterError(err, os.strerror(err))
    return result


def load(code: bytes) -> int:
    """Load a device program; its file descriptor (the caller closes it)."""
    insns = ctypes.create_string_buffer(code, len(code))
    license_ = ctypes.create_string_buffer(b"Apache-2.0")
    attr = ctypes.create_string_buffer(ATTR_SIZE)
    struct.pack_into("<IIQQ", attr, 0, BPF_PROG_TYPE_CGROUP_DEVICE, len(code) // 8,
                     ctypes.addressof(insns), ctypes.addressof(license_))  # fmt: skip
    return _bpf(BPF_PROG_LOAD, attr)


def attach(group: Path, code: bytes) -> None:
    """Load ``code`` and attach it to the cgroup ``group`` (a v2 directory)."""
    prog = load(code)
    try:
        target = os.open(group, os.O_RDONLY | os.O_DIRECTORY)
        try:
            attr = ctypes.create_string_buffer(ATTR_SIZE)
            struct.pack_into("<IIII", attr, 0, target, prog, BPF_CGROUP_DEVICE, BPF_F_ALLOW_MULTI)
            _bpf(BPF_PROG_ATTACH, attr)
        finally:
            os.close(target)
    finally:
        os.close(prog)


def available() -> str:
    """Empty when this process may load device programs, else why not (one phrase)."""
    try:
        os.close(load(program(0, (), ())))
    except DevFilterError as exc:
        return f"cannot load an eBPF device program: {exc.strerror}"
    return ""
