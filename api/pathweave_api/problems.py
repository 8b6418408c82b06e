"""Errors as RFC 9457 problem details (``application/problem+json``), never stack traces.

Body: ``{type, title, status, detail, instance}`` plus, for validation errors,
``errors: [{loc, msg, type}]``. Unexpected exceptions are logged with their
traceback server-side and answered with a generic 500 carrying the request id.
"""

from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("pathweave_api")

PROBLEM_MEDIA_TYPE = "application/problem+json"


class ValidationIssue(BaseModel):
    loc: list[str | int] = Field(description="Where: body/query/path and the field path.")
    msg: str
    type: str


class Problem(BaseModel):
    """An error (RFC 9457)."""

    type: str = Field(description="A URN naming the kind of problem.", examples=["urn:pathweave:problem:not-found"])
    title: str = Field(examples=["Not Found"])
    status: int = Field(examples=[404])
    detail: str = Field(examples=["no job 3f2a... for this tenant"])
    instance: str | None = Field(None, description="The request path.", examples=["/v1/jobs/3f2a9c..."])
    errors: list[ValidationIssue] | None = None


class ApiProblem(Exception):
    """Raise to answer with a problem document."""

    def __init__(self, status: int, detail: str, kind: str | None = None, headers: dict[str, str] | None = None,
                 errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind or _slug(status)
        self.headers = headers or {}
        self.errors = errors


def _slug(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "-")
    except ValueError:
        return "error"


def _title(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def problem_response(status: int, detail: str, instance: str | None = None, kind: str | None = None,
                     headers: dict[str, str] | None = None, errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"type": f"urn:pathweave:problem:{kind or _slug(status)}", "title": _title(status),
                            "status": status, "detail": detail, "instance": instance}
    if errors is not None:
        body["errors"] = errors
    return JSONResponse(body, status_code=status, media_type=PROBLEM_MEDIA_TYPE, headers=headers)


def _clean_errors(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Validation errors without the offending input (it may be huge or binary)."""
    out = []
    for error in errors[:50]:
        out.append({"loc": [p if isinstance(p, (str, int)) else str(p) for p in error.get("loc", ())],
                    "msg": str(error.get("msg", ""))[:500], "type": str(error.get("type", ""))})
    return out


def validation_problem(request: Request, errors: list[dict[str, Any]]) -> JSONResponse:
    cleaned = _clean_errors(errors)
    if any(e["type"] == "json_invalid" for e in cleaned):
        return problem_response(400, "malformed JSON body: " + "; ".join(e["msg"] for e in cleaned
                                                                         if e["type"] == "json_invalid"),
                                request.url.path, "malformed-json")
    if any(e["type"] == "missing" and e["loc"] == ["body"] for e in cleaned):
        return problem_response(400, "a JSON request body is required", request.url.path, "missing-body")
    summary = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in cleaned[:5])
    return problem_response(422, f"invalid request: {summary}", request.url.path, "validation-error",
                            errors=cleaned)


def flat_routes(routes):
    """The routes in ``routes``, those of included routers (FastAPI keeps an included
    router as one entry, without a prefix here) in their place."""
    for route in routes:
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from flat_routes(inner.routes)
        else:
            yield route


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on the request's path (Starlette's own 405 names only
    the first route that matched the path, e.g. POST but not GET on ``/v1/documents``)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in flat_routes(request.app.router.routes):
        match, _ = route.matches({**request.scope, "method": "GET"})
        route_methods = getattr(route, "methods", None)
        if route_methods and match is not Match.NONE:
            methods.update(route_methods)
    return sorted(methods)


def install(app: FastAPI) -> None:
    """Register the problem handlers on ``app``."""

    @app.exception_handler(ApiProblem)
    async def _api_problem(request: Request, exc: ApiProblem) -> JSONResponse:
        return problem_response(exc.status, exc.detail, request.url.path, exc.kind, exc.headers, exc.errors)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_problem(request, list(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        detail = exc.detail if isinstance(exc.detail, str) else _title(exc.status_code)
        if exc.status_code == 404 and detail == "Not Found":
            detail = f"no route {request.method} {request.url.path}"
        headers = dict(getattr(exc, "headers", None) or {})
        if exc.status_code == 405:
            allowed = allowed_methods(request)
            headers["Allow"] = ", ".join(allowed)
            detail = f"method {request.method} not allowed on {request.url.path}; allowed: {headers['Allow']}"
        return problem_response(exc.status_code, detail, request.url.path, headers=headers or None)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        problem = unexpected(exc, getattr(request.app.state, "services", None), f"{request.method} {request.url.path}")
        return problem_response(problem.status, problem.detail, request.url.path, problem.kind, problem.headers or None)


def unexpected(exc: BaseException, services, where: str) -> ApiProblem:
    """The problem an error no route answered itself stands for, the same on every interface
    (REST, a stream's ``error`` event, an MCP tool): 503 ``store-unavailable`` with
    ``Retry-After`` for a transient one (:func:`pathweave.errors.is_transient`; ``services``,
    when given, reconnect for the next request: the store may run elsewhere now), else 500
    ``internal-error``, logged with its traceback under a request id; the detail never carries
    the exception's own text. ``where``: what failed, for the log (``"POST /v1/query"``)."""
    from pathweave.errors import is_transient

    request_id = uuid.uuid4().hex[:12]
    if is_transient(exc):
        log.warning("store unavailable (request %s, %s): %s", request_id, where, exc)
        if services is not None:
            services.runtime.lost()
        return ApiProblem(503, f"the store is unavailable; retry later (request {request_id})", "store-unavailable",
                          {"Retry-After": "5"})
    log.error("unhandled error (request %s) on %s", request_id, where, exc_info=exc)
    return ApiProblem(500, f"internal error (request {request_id}); details are in the server log", "internal-error")


ERR = {"model": Problem}
_AUTHERRORS = {401: {**ERR, "description": "Missing, invalid or revoked API key."},
               403: {**ERR, "description": "The API key's scope does not include this route "
                                           "(query < ingest < admin)."},
                429: {**ERR, "description": "Rate limit of the API key exceeded (see Retry-After)."},
                503: {**ERR, "description": "Store, broker or (to answer) LLM unavailable; retry later."}}


def errors(*codes: int) -> dict[int, dict]:
    """OpenAPI ``responses`` of an authenticated route: 401/403/429/503 and ``codes``, each a Problem."""
    text = {400: "Malformed request (empty body, malformed JSON, not UTF-8).",
            404: "Unknown id for this tenant.", 409: "Conflict with the resource's state.",
            413: "Body or document over the size limit.", 415: "Unsupported content type.",
            422: "Invalid request: see `errors`."}
    return {**_AUTHERRORS, **{code: {**ERR, "description": text[code]} for code in codes}}

