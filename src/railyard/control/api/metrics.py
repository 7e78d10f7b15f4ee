"""``GET /metrics``: Prometheus' text format, for an admin's bearer token by default.

Job ids, users and queues are tenants' data, so the endpoint is not open by default: a
scraper uses an admin token (Prometheus: ``authorization: {type: Bearer, credentials_file:
...}``, see ``examples/prometheus/prometheus.yml``); ``railyard up --metrics-open`` serves it
without one, for a trusted network. A missing or bad token is 401, a non-admin's 403, with the
API's usual one-line bodies.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder

from railyard.control.metrics.prometheus import MetricsConfig, metrics_registry
from railyard.control.schemas import ErrorOut
from railyard.control.store.database import Store
from railyard.control.usecases import auth

_BEARER = {"WWW-Authenticate": "Bearer"}
CredentialsDep = Annotated[
    HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))
]


def metrics_router(store: Store, config: MetricsConfig, clock: Callable[[], float]) -> APIRouter:
    """The route over a registry of this app's own."""
    registry = metrics_registry(store, config, clock)
    router = APIRouter(tags=["metrics"])

    def require_admin(credentials: CredentialsDep) -> None:
        if config.open_access:
            return
        if credentials is None:
            raise HTTPException(401, "missing bearer token", headers=_BEARER)
        with store.session() as session:
            user, why = auth.identify(session, credentials.credentials, clock())
            if user is None:
                raise HTTPException(401, why, headers=_BEARER)
            if not user.is_admin:
                raise HTTPException(
                    403,
                    f"user {user.name!r} is not an admin (hint: scrape /metrics with an admin's "
                    "token, or start the server with --metrics-open on a trusted network)",
                )

    @router.get(
        "/metrics",
        dependencies=[Depends(require_admin)],
        response_class=Response,
        responses={
            200: {"content": {CONTENT_TYPE_PLAIN_0_0_4: {}}, "description": "the metrics"},
            401: {"model": ErrorOut, "description": "no, invalid, revoked or expired token"},
            403: {"model": ErrorOut, "description": "the token's user is not an admin"},
            503: {"model": ErrorOut, "description": "the store is unreachable or read-only"},
        },
    )
    def metrics(request: Request) -> Response:
        """Jobs, queues, fair share, nodes, the scheduler loop and per-GPU (DCGM) figures in
        Prometheus' text format (0.0.4), or OpenMetrics when the scraper's Accept asks."""
        encode, content_type = choose_encoder(request.headers.get("accept", ""))
        return Response(encode(registry), headers={"Content-Type": content_type})

    return router
