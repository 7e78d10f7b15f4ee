"""Connect to a job's web app, and make sure the job's account is who answers.

The proxy runs as root and the app's directory is the user's, so the socket there may be a
symlink the user planted towards someone else's socket; a loopback port may be taken by
another user's process once the app is gone. Either way the proxy would serve that process's
pages under the dashboard's origin. So the socket is opened ``O_PATH|O_NOFOLLOW`` and must be
a socket of the job's account, connected through that descriptor (no link is ever followed),
and after connecting, before sending a byte, the listener is checked: the peer's credentials
of a Unix socket (``SO_PEERCRED``), or for TCP the owner of the accepted socket that
``/proc/net/tcp`` lists for this very connection (the kernel gives an accepted socket its
listener's owner). Anything else is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import stat
import struct
from pathlib import Path

_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class AppUnreachable(OSError):
    """Nothing of the job's account listens where its app should."""


async def connect(sock_path: Path, port: int | None, uid: int) -> socket.socket:
    """A connected, non-blocking socket to the app, its listener checked to be ``uid``'s."""
    loop = asyncio.get_running_loop()
    why = "it does not listen yet (it may still be starting)"
    pinned = _pinned(sock_path, uid)
    if pinned is not None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            await loop.sock_connect(s, f"/proc/self/fd/{pinned}")  # that inode, no other
            cred = s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size)
            peer_uid = _CRED.unpack(cred)[1]
        except OSError as exc:
            why = f"its socket refuses ({exc.strerror or exc})"
        else:
            if peer_uid == uid:
                return s
            s.close()
            raise AppUnreachable(f"its socket is answered by uid {peer_uid}, not the job's account")
        finally:
            os.close(pinned)
        s.close()
    if port is not None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            await loop.sock_connect(s, ("127.0.0.1", port))
            owner = tcp_peer_uid(s)
            if owner == uid:
                return s
            why = f"port {port} is answered by uid {owner}, not the job's account"
        except OSError as exc:
            why = f"nothing listens on its port {port} ({exc.strerror or exc})"
        s.close()
    raise AppUnreachable(why)


def _pinned(sock_path: Path, uid: int) -> int | None:
    """An ``O_PATH`` descriptor of the app's socket itself, never of what a link there names
    (connecting through a planted link would knock on another user's socket, a terminal's
    say); None while there is none. A link, or a file of another account, is refused."""
    try:
        fd = os.open(sock_path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    found = os.fstat(fd)
    if not stat.S_ISSOCK(found.st_mode) or found.st_uid != uid:
        os.close(fd)
        what = "a symbolic link" if stat.S_ISLNK(found.st_mode) else "not a socket"
        if stat.S_ISSOCK(found.st_mode):
            what = f"a socket of uid {found.st_uid}"
        raise AppUnreachable(f"its socket is {what}, not the job account's own")
    return fd


def tcp_peer_uid(s: socket.socket) -> int | None:
    """The owner of the other end of a loopback TCP connection (``/proc/net/tcp``)."""
    mine_host, mine_port = s.getsockname()[:2]
    peer_host, peer_port = s.getpeername()[:2]
    want = (_hex(peer_host, peer_port), _hex(mine_host, mine_port))
    with contextlib.suppress(OSError), open("/proc/net/tcp", encoding="ascii") as f:
        next(f)
        for line in f:
            fields = line.split()
            if (fields[1], fields[2]) == want:
                return int(fields[7])
    return None


def _hex(host: str, port: int) -> str:
    """``127.0.0.1:8080`` as /proc/net/tcp writes it: ``0100007F:1F90``."""
    packed = socket.inet_aton(host)
    return f"{struct.unpack('<I', packed)[0]:08X}:{port:04X}"
