"""A tiny web app for the proxy tests: on $RAILYARD_APP_SOCKET (or 127.0.0.1:$RAILYARD_APP_PORT
with --tcp), GET .../info answers what it sees as JSON and sets two cookies (one with the
dashboard's name, which the proxy must drop); a WebSocket echoes each message."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from http import HTTPStatus

from websockets.asyncio.server import ServerConnection, serve, unix_serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response


def info(connection: ServerConnection, request: Request) -> Response | None:
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return None
    body = json.dumps(
        {
            "uid": os.getuid(),
            "gpus": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "path": request.path,
            "cookie": request.headers.get("Cookie", ""),
            "authorization": request.headers.get("Authorization", ""),
        }
    ).encode()
    headers = Headers(
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            ("Set-Cookie", "railyard_session=planted; Path=/ui"),
            ("Set-Cookie", "appcookie=1; Path=/ui/jobs"),
            ("Service-Worker-Allowed", "/"),
            ("Clear-Site-Data", '"cookies"'),
        ]
    )
    return Response(HTTPStatus.OK.value, "OK", headers, body)


async def echo(connection: ServerConnection) -> None:
    async for message in connection:
        await connection.send(message)


async def main() -> None:
    if "--tcp" in sys.argv:
        server = await serve(
            echo, "127.0.0.1", int(os.environ["RAILYARD_APP_PORT"]), process_request=info
        )
    else:
        server = await unix_serve(echo, os.environ["RAILYARD_APP_SOCKET"], process_request=info)
    async with server:
        await server.serve_forever()


asyncio.run(main())
