"""The headers every dashboard response carries (pages, redirects, errors, static files):
a Content-Security-Policy that allows only this server's own script, style and fetches (no
inline script or style, no plugins, no framing), no framing for old browsers either, no
content sniffing, and no full URL in the Referer sent elsewhere.

`SecureRoute` adds them at the ASGI level, around FastAPI's own error handling, so a 404, a
422 or a store failure answered by the app's handlers gets them too.
"""

from __future__ import annotations

from fastapi.routing import APIRoute
from starlette.types import Message, Receive, Scope, Send

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    b"content-security-policy": CSP.encode(),
    b"x-frame-options": b"DENY",
    b"x-content-type-options": b"nosniff",
    b"referrer-policy": b"same-origin",
}


def with_headers(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with ours in place of any of the same name."""
    kept = [(k, v) for k, v in headers if k.lower() not in HEADERS]
    return kept + list(HEADERS.items())


class SecureRoute(APIRoute):
    """A route whose every response carries HEADERS."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_headers(list(message.get("headers", ())))}
            await send(message)

        await super().handle(scope, receive, send_secured)
