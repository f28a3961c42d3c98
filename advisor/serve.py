"""advisor serve: the JSON API (api.py) and the dashboard (dashboard.py) over one results
database, read-only. Every route is a GET; none measures, builds or imports anything."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from advisor import __version__, api, dashboard
from advisor.errors import ConfigError, StoreError
from advisor.store.store import Store


def create_app(store: Store) -> FastAPI:
    app = FastAPI(
        title="advisor",
        version=__version__,
        summary="Stored GPU memory and throughput measurements of training steps, read-only.",
    )
    app.include_router(api.router(store))
    app.include_router(dashboard.router(store))

    def answer(request: Request, status: int, message: str) -> Response:
        """JSON under /api and for the docs, a page elsewhere."""
        if request.url.path.startswith(("/api/", "/openapi", "/docs")):
            return JSONResponse({"detail": message}, status_code=status)
        return dashboard.error_page(request, status, message)

    @app.exception_handler(ConfigError)
    def _bad_parameter(request: Request, error: ConfigError) -> Response:
        return answer(request, 400, str(error))

    @app.exception_handler(api.NotStored)
    def _not_stored(request: Request, error: api.NotStored) -> Response:
        return answer(request, 404, str(error))

    @app.exception_handler(StoreError)
    def _unreadable(request: Request, error: StoreError) -> Response:
        return answer(request, 503, str(error))

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, error: RequestValidationError) -> Response:
        first = error.errors()[0]
        loc = [str(part) for part in first.get("loc", ()) if part not in ("path", "query")]
        where = ".".join(loc)
        return answer(request, 422, f"{where}: {first.get('msg', 'invalid')}")

    @app.exception_handler(HTTPException)
    def _http(request: Request, error: HTTPException) -> Response:
        return answer(request, error.status_code, str(error.detail))

    return app
