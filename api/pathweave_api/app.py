"""The Pathweave HTTP API (FastAPI): :func:`create_app` assembles it.

``create_app()`` builds the application from settings (``settings.api``,
``settings.worker``): ingestion jobs go to the Celery broker when
``PATHWEAVE_WORKER_BROKER_URL`` is set, else to an in-process bounded queue running the
same task functions. Every ``/v1`` route needs an API key (``Authorization: Bearer
pw_...``, :mod:`pathweave_api.auth`) and sees only the key's tenant. Errors are
``application/problem+json``. The routes live in :mod:`pathweave_api.routers`
(documents, jobs, query, records, operations), :mod:`pathweave_api.explorer`
(the ``/ui`` pages) and :mod:`pathweave_api.mcp_server` (the MCP tools at ``/mcp``); what
they share is :class:`~pathweave_api.services.Services`.

Run: ``pathweave serve`` or ``uvicorn --factory pathweave_api.app:create_app``.
"""

import json
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.utils import get_openapi

from pathweave.settings import ApiSettings, Settings, WorkerSettings
from pathweave.telemetry.setup import configure_tracing
from pathweave_api import browser, explorer, mcp_server, metrics, problems
from pathweave_api.keys import KeyStore
from pathweave_api.limits import BodyLimitMiddleware
from pathweave_api.models import DocumentPut, DocumentsRequest
from pathweave_api.problems import Problem
from pathweave_api.routers import documents, jobs, operations, query, records
from pathweave_api.services import build_services
from pathweave_ingest.worker_runtime import Runtime

API_VERSION = "1.0.0"


def create_app(settings: Settings | None = None, api_settings: ApiSettings | None = None,
               worker_settings: WorkerSettings | None = None, runtime: Runtime | None = None,
               keys: KeyStore | None = None) -> FastAPI:
    """The API application (all arguments default to the process settings)."""
    svc = build_services(settings, api_settings, worker_settings, runtime, keys)
    api = svc.api
    mcp = None  # the MCP server at /mcp, installed below: its sessions run while the app does

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        svc.start()
        try:
            async with mcp.running():
                yield
        finally:
            await run_in_threadpool(svc.stop)

    app = FastAPI(
        title="Pathweave API",
        version=API_VERSION,
        description=(
            "Ingest documents into a tenant's knowledge graph (passages, entities, propositions, triples) "
            "and query it with PropRAG, dense or HippoRAG 2 retrieval.\n\n"
            "Authentication: `Authorization: Bearer <API key>` (create keys with `pathweave keys create`). "
            "A key is bound to one tenant and sees only its data. Errors are RFC 9457 problem details "
            "(`application/problem+json`)."
        ),
        lifespan=lifespan,
        redirect_slashes=False,  # no redirects at all: a Location would echo the client's Host header
        docs_url="/docs" if api.docs else None,
        redoc_url="/redoc" if api.docs else None,
        openapi_tags=[
            {"name": "documents", "description": "Ingestion jobs and the tenant's documents."},
            {"name": "query", "description": "Retrieval and reasoning records."},
            {"name": "operations", "description": "Health, readiness and metrics (no key needed)."},
        ],
    )
    app.state.services = svc
    problems.install(app)

    def body_limit(method: str, path: str) -> int:
        if (method == "POST" and path.rstrip("/") in ("/v1/documents", "/mcp")) or \
                (method == "PUT" and path.startswith("/v1/documents/")):
            return api.max_body_bytes
        return api.max_small_body_bytes

    app.add_middleware(BodyLimitMiddleware, limit_for=body_limit)
    app.add_middleware(metrics.MetricsMiddleware)
    if api.trusted_proxy_list:  # outermost: the client address every other part sees
        from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=api.trusted_proxy_list)

    query_body = query.query_model(api)
    app.include_router(documents.router(api))
    app.include_router(jobs.router)
    app.include_router(query.router(query_body))
    app.include_router(records.router(api))
    app.include_router(operations.router)
    mcp = mcp_server.install(app, svc, query_body)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes,
                             tags=app.openapi_tags)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        doc_schema = DocumentsRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in doc_schema.pop("$defs", {}).items():
            components.setdefault(name, definition)
        doc_schema["properties"]["documents"]["maxItems"] = api.max_documents
        components["DocumentsRequest"] = doc_schema
        components["DocumentPut"] = DocumentPut.model_json_schema(ref_template="#/components/schemas/{model}")
        components["QueryRequest"] = query_body.model_json_schema(ref_template="#/components/schemas/{model}")
        components.setdefault("Problem", Problem.model_json_schema(ref_template="#/components/schemas/{model}"))
        for path in schema.get("paths", {}).values():
            for operation in path.values():
                for code, resp in operation.get("responses", {}).items():
                    content = resp.get("content", {})
                    body = content.get("application/json")
                    if code.isdigit() and int(code) >= 400 and body and "/Problem" in json.dumps(body):
                        content["application/problem+json"] = content.pop("application/json")
        app.openapi_schema = schema
        return schema

    explorer.install(app)
    browser.install(app)
    app.openapi = openapi  # type: ignore[method-assign]
    if configure_tracing("pathweave-api"):  # the standard OTEL_* variables asked for traces
        from opentelemetry.instrumentation.celery import CeleryInstrumentor
        from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

        # no span per ASGI message: a streamed answer sends one per token
        FastAPIInstrumentor.instrument_app(app, excluded_urls="healthz,readyz,metrics", exclude_spans=["receive", "send"])
        CeleryInstrumentor().instrument()  # a published batch carries the request's trace to its worker
    return app

