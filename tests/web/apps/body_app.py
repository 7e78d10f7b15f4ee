"""A web app for the proxy's body tests, on $RAILYARD_APP_SOCKET: a POST or PUT to .../upload
is read piece by piece (Content-Length or chunked) and answered with its size; GET .../seen
says how many bytes of the upload in progress have come so far (so a test can tell a body
that streams through the proxy from one the proxy holds until it is whole); any other path
answers 404, as an app does."""

from __future__ import annotations

import json
import os
import socketserver
from http.server import BaseHTTPRequestHandler
from typing import Any

SEEN = {"bytes": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.endswith("/seen"):
            self._answer(200, {"seen": SEEN["bytes"]})
        else:
            self._answer(404, {"path": self.path})

    def do_POST(self) -> None:
        SEEN["bytes"] = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while size := int(self.rfile.readline().split(b";")[0], 16):
                self._take(size)
                self.rfile.readline()
            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                pass
        else:
            self._take(int(self.headers.get("Content-Length", "0")))
        self._answer(200, {"bytes": SEEN["bytes"]})

    do_PUT = do_POST

    def _take(self, size: int) -> None:
        while size > 0:
            got = self.rfile.read1(min(size, 65536))
            if not got:
                return
            size -= len(got)
            SEEN["bytes"] += len(got)

    def address_string(self) -> str:
        return "unix"

    def log_message(self, *_: Any) -> None:
        pass


class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


Server(os.environ["RAILYARD_APP_SOCKET"], Handler).serve_forever()
