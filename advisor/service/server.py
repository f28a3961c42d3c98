"""advisor serve: the JSON API (http_api.py) and the dashboard (dashboard.py) over one results
database, read-only: it is opened without migrating it or storing the spool's trials, and
every route is a GET that measures, builds and imports nothing."""

from __future__ import annotations

import socket
from collections.abc import Mapping

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException

from advisor.errors import ConfigError, NotStored, StoreError
from advisor.service import dashboard, http_api
from advisor.store import schema
from advisor.store.store import Store, existing
from advisor.version import version


def open_store(url: str | None) -> Store:
    """The database to serve, as it is: a SQLite file that is not there is not created, and
    one of an older schema is not upgraded (each said in one line)."""
    return existing(url, read_only=True)


def check_listening(host: str, port: int) -> None:
    """ConfigError unless this process can listen there (before anything is opened)."""
    if not 1 <= port <= 65535:
        raise ConfigError(f"--port must be from 1 to 65535, got {port}")
    try:
        socket.create_server((host, port)).close()
    except OSError as error:
        raise ConfigError(
            f"cannot listen on {host}:{port} ({error.strerror or error}); choose another "
            "--port, or a --host of this machine"
        ) from None


def create_app(store: Store) -> FastAPI:
    app = FastAPI(
        title="advisor",
        version=version(),
        summary="Stored GPU memory and throughput measurements of training steps, read-only.",
    )
    app.include_router(http_api.router(store))
    app.include_router(dashboard.router(store))

    def answer(
        request: Request, status: int, message: str, headers: Mapping[str, str] | None = None
    ) -> Response:
        """JSON under /api and for the docs, a page elsewhere."""
        if request.url.path.startswith(("/api/", "/openapi", "/docs")):
            return JSONResponse({"detail": message}, status_code=status, headers=headers)
        return dashboard.error_page(request, status, message, headers)

    @app.exception_handler(ConfigError)
    def _bad_parameter(request: Request, error: ConfigError) -> Response:
        return answer(request, 400, str(error))

    @app.exception_handler(NotStored)
    def _not_stored(request: Request, error: NotStored) -> Response:
        return answer(request, 404, str(error))

    @app.exception_handler(StoreError)
    def _unusable(request: Request, error: StoreError) -> Response:
        return answer(request, 503, str(error))

    @app.exception_handler(SQLAlchemyError)
    def _unreadable(request: Request, error: SQLAlchemyError) -> Response:
        """The database went away, or is locked, while serving: 503, in its one line."""
        return answer(request, 503, str(schema.why_unusable(store.url, error)))

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, error: RequestValidationError) -> Response:
        first = error.errors()[0]
        loc = [str(part) for part in first.get("loc", ()) if part not in ("path", "query")]
        return answer(request, 422, f"{'.'.join(loc)}: {first.get('msg', 'invalid')}")

    @app.exception_handler(HTTPException)
    def _http(request: Request, error: HTTPException) -> Response:
        return answer(request, error.status_code, str(error.detail), error.headers)

    return app
