"""Pathweave as a Model Context Protocol server (the official ``mcp`` SDK's
:class:`~mcp.server.mcpserver.MCPServer`): assistants and agents search the tenant's documents
with the caller's API key and get passages with citations, the reasoning paths and the
budgeted context, without glue code.

Two transports serve the same tools:
- **streamable HTTP**, on the API at ``/mcp`` (:func:`install`), stateless so that any API
  replica answers any call. Every request carries ``Authorization: Bearer <API key>``
  (and may carry the delegate headers of :mod:`pathweave_api.callers`); it is
  authenticated, throttled and rate-limited as a REST request is, before the SDK sees it.
- **stdio** (``pathweave mcp``, :func:`serve_stdio`), for a client on the same machine: the
  key is ``PATHWEAVE_API_KEY`` in the server's environment, authenticated at start and at
  each call (``ingest_text`` needs a broker there: a queue in the process would end with it).

Tools (each checks its key's scope as the REST route does, validates its input with the
API's request model and runs the route's own function, so the result is the REST body):
- ``search`` (query scope): ``POST /v1/query``;
- ``answer`` (query scope): the same with ``answer: true``;
- ``get_reasoning_record`` (query scope): ``GET /v1/queries/{id}``;
- ``get_document``, ``list_documents`` (ingest scope): ``GET /v1/documents[/{id}]``;
- ``ingest_text`` (ingest scope): ``POST /v1/documents`` with one document.

Resources: ``pathweave://documents/{doc_id}`` and ``pathweave://queries/{query_id}`` (the
same bodies as JSON). An error is a tool error (or a resource error) reading
``<status> <kind>: <detail>``, the REST API's problem in one line.
"""

import json
import os
import re
from contextlib import asynccontextmanager
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from pydantic import Field, ValidationError

from pathweave.access import Access
from pathweave.telemetry.setup import configure_tracing
from pathweave_api.auth import authenticate, require_scope
from pathweave_api.callers import access_of
from pathweave_api.keys import ApiKey
from pathweave_api.models import DOC_ID_PATTERN, HEX32_PATTERN
from pathweave_api.problems import ApiProblem, problem_response, unexpected
from pathweave_api.services import Services, build_services

CALLER = "pathweave.caller"
"""The ASGI scope key under which :func:`install`'s endpoint leaves the request's
authenticated ``(ApiKey, Access)`` for the tools."""

KEY_ENV = "PATHWEAVE_API_KEY"
"""The environment variable holding the API key of a stdio server (``pathweave mcp``)."""


Question = Annotated[str, Field(description="The question, in plain text.")]
Mode = Annotated[str, Field(description="Retrieval mode: proprag (multi-hop paths), dense, hipporag2, prunerag or apr.")]
K = Annotated[int, Field(description="Passages to return.")]
Budget = Annotated[int | None, Field(description="With a token budget: the context selected under it (tokens).")]
Session = Annotated[str | None, Field(description="A conversation's id: what earlier turns were sent is not sent "
                                                  "again.")]


def _problem_text(exc: ApiProblem) -> str:
    return f"{exc.status} {exc.kind}: {exc.detail}"


def _validation_text(exc: ValidationError) -> str:
    return "422 validation-error: " + "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'input'}: {error['msg']}" for error in exc.errors())


def _body(model, value) -> dict:
    """``value`` as the REST route answers it: validated by its response ``model``, as JSON."""
    return model.model_validate(value).model_dump(mode="json", by_alias=True)


def build_server(svc: Services, query_body: type, stdio_key: str | None = None) -> MCPServer:
    """The MCP server of ``svc``: its tools and resources (see the module's text), queries
    validated by ``query_body`` (:func:`pathweave_api.routers.query.query_model`). A tool's
    caller is the one :class:`McpEndpoint` authenticated for its HTTP request; on stdio, the
    API key ``stdio_key``, authenticated at each call as a request is (a revoked key stops
    working, its rate limit holds). Over stdio without a broker, ``ingest_text`` is refused:
    a queue in this process would end with its client, and the document with it."""
    from pathweave_api.bodies import source_documents
    from pathweave_api.models import DocumentList, DocumentsRequest, DocumentText, ReasoningRecord, SubmitResponse
    from pathweave_api.routers.documents import document_page, document_text, submit
    from pathweave_api.routers.query import run_query
    from pathweave_api.routers.records import reasoning_record

    server = MCPServer(
        "pathweave", title="Pathweave",
        instructions=("Search the organisation's documents: `search` returns ranked passages with citations, the "
                      "proposition paths connecting them and, with a token budget, a compact context; `answer` "
                      "adds an answer written from them. Cite passages by their [n] markers."))

    def caller(request, scope: str) -> tuple[ApiKey, Access]:
        if request is not None:
            found = request.scope.get(CALLER)
        elif stdio_key is not None:
            key = authenticate(svc, stdio_key, None)
            found = (key, access_of(key, {}, svc.settings.access))
        else:
            found = None
        if found is None:
            raise ApiProblem(401, "missing API key: send 'Authorization: Bearer <key>'", "missing-api-key")
        return require_scope(found[0], scope), found[1]

    async def call(ctx: Context | None, scope: str, work: Callable[[ApiKey, Access], Any],
                   error: type[Exception] = ToolError) -> Any:
        """``work(key, access)`` in a worker thread, its caller first, its problems as MCP errors."""
        request = ctx.request_context.request if ctx is not None else None

        def run() -> Any:
            return work(*caller(request, scope))
        try:
            return await anyio.to_thread.run_sync(run)
        except ApiProblem as exc:
            raise error(_problem_text(exc)) from None
        except ValidationError as exc:
            raise error(_validation_text(exc)) from None
        except (ToolError, ResourceError):
            raise
        except Exception as exc:  # noqa: BLE001 - answered as REST answers it, never with its own text
            raise error(_problem_text(unexpected(exc, svc, f"MCP {scope} tool"))) from None

    def query(question: str, mode: str, k: int, token_budget: int | None, session_id: str | None,
              answer: bool) -> Callable[[ApiKey, Access], dict]:
        def work(key: ApiKey, access: Access) -> dict:
            body = {"question": question, "mode": mode, "k": k, "token_budget": token_budget,
                    "session_id": session_id, **({"answer": True} if answer else {})}
            req = query_body.model_validate({name: value for name, value in body.items() if value is not None})
            return run_query(svc, key.tenant, req, access).model_dump(mode="json")
        return work

    def document(doc_id: str) -> Callable[[ApiKey, Access], dict]:
        return lambda key, access: _body(DocumentText, document_text(svc, key.tenant, access, doc_id))

    def record(query_id: str) -> Callable[[ApiKey, Access], dict]:
        return lambda key, access: _body(ReasoningRecord, reasoning_record(svc, key.tenant, access, query_id))

    async def resource(ctx: Context | None, scope: str, value: str, pattern: str, what: str, work) -> str:
        """A resource's JSON: ``value`` checked against ``pattern`` first (it comes from the URI)."""
        if not re.fullmatch(pattern, value):
            raise ResourceError(f"422 validation-error: {value[:40]!r} is no {what}")
        return json.dumps(await call(ctx, scope, work(value), ResourceError))

    @server.tool(description="Ranked passages of the organisation's documents for a question, with citations, the "
                             "proposition paths connecting them and, with a token budget, the budgeted context "
                             "(the body of POST /v1/query).")
    async def search(question: Question, mode: Mode = "proprag", k: K = 5, token_budget: Budget = None,
                     session_id: Session = None, ctx: Context = None) -> dict:
        return await call(ctx, "query", query(question, mode, k, token_budget, session_id, False))

    @server.tool(description="An answer to a question written by the configured model from the retrieved passages "
                             "(or context), with its citations, beside what search returns.")
    async def answer(question: Question, mode: Mode = "proprag", k: K = 5, token_budget: Budget = None,
                     session_id: Session = None, ctx: Context = None) -> dict:
        return await call(ctx, "query", query(question, mode, k, token_budget, session_id, True))

    @server.tool(description="A query's stored reasoning record (its paths, selected nodes and the passages stating "
                             "them), by the query_id a search returned.")
    async def get_reasoning_record(query_id: Annotated[str, Field(pattern=HEX32_PATTERN)],
                                   ctx: Context = None) -> dict:
        return await call(ctx, "query", record(query_id))

    @server.tool(description="A document with its passages' text in reading order (needs an ingest-scoped key).")
    async def get_document(doc_id: Annotated[str, Field(pattern=DOC_ID_PATTERN)], ctx: Context = None) -> dict:
        return await call(ctx, "ingest", document(doc_id))

    @server.tool(description="The tenant's documents, newest first, with their status (needs an ingest-scoped key).")
    async def list_documents(limit: Annotated[int, Field(ge=1, le=svc.api.max_page)] = 50,
                             offset: Annotated[int, Field(ge=0)] = 0, ctx: Context = None) -> dict:
        return await call(ctx, "ingest", lambda key, access: _body(DocumentList, document_page(
            svc, key.tenant, access, None, limit, offset)))

    @server.tool(description="Ingest one text document (needs an ingest-scoped key): answers the job; the document "
                             "is queryable once the job reads done.")
    async def ingest_text(text: Annotated[str, Field(description="The document's text.")],
                          title: Annotated[str, Field(description="Its title.")] = "",
                          source: Annotated[str | None, Field(description="Where it comes from.")] = None,
                          acl: Annotated[list[str] | None, Field(description="Who may read it (principals such "
                                                                             "as group:finance).")] = None,
                          ctx: Context = None) -> dict:
        def work(key: ApiKey, access: Access) -> dict:
            if stdio_key is not None and not svc.ws.broker_url:
                raise ApiProblem(503, "ingest_text over stdio needs a broker (PATHWEAVE_WORKER_BROKER_URL): a queue "
                                      "in this process would end with its client; or use the API's /mcp", "no-broker")
            document = {"title": title, "text": text, **({"source": source} if source else {}),
                        **({"acl": acl} if acl is not None else {})}
            docs = source_documents(DocumentsRequest.model_validate({"documents": [document]}), svc)
            return _body(SubmitResponse, submit(svc, key.tenant, docs, access))
        return await call(ctx, "ingest", work)

    @server.resource("pathweave://documents/{doc_id}", mime_type="application/json",
                     description="A document with its passages (needs an ingest-scoped key).")
    async def document_resource(doc_id: str, ctx: Context = None) -> str:
        return await resource(ctx, "ingest", doc_id, DOC_ID_PATTERN, "document id (doc: + 24 hex)", document)

    @server.resource("pathweave://queries/{query_id}", mime_type="application/json",
                     description="A query's reasoning record.")
    async def record_resource(query_id: str, ctx: Context = None) -> str:
        return await resource(ctx, "query", query_id, HEX32_PATTERN, "query id (32 hex)", record)

    return server


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``: the request's API key and access are checked
    (:func:`pathweave_api.auth.authenticate`, :func:`pathweave_api.callers.access_of`, in a
    worker thread) and left in the scope under :data:`CALLER` before the SDK's transport
    sees the request; a refused request is answered as the REST API answers it (a problem
    document). The transport's session manager runs while the app's lifespan does
    (:meth:`running`; one per lifespan, the SDK's runs once); outside one, ``/mcp`` is a 503."""

    def __init__(self, svc: Services, server: MCPServer) -> None:
        self.svc, self.server = svc, server
        self._managers: list = []  # the running lifespans' session managers, newest last

    @asynccontextmanager
    async def running(self):
        """Run a new session manager (stateless, JSON responses, bodies up to
        ``api.max_body_bytes``) for the duration of a lifespan of the app."""
        # keys, not cookies, authenticate: a rebound DNS name gains nothing, and replicas sit behind any host name
        self.server.streamable_http_app(
            stateless_http=True, json_response=True, max_request_body_size=self.svc.api.max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
        manager = self.server.session_manager
        async with manager.run():
            self._managers.append(manager)
            try:
                yield
            finally:
                self._managers.remove(manager)

    async def __call__(self, scope, receive, send) -> None:
        request = Request(scope, receive)
        header = request.headers.get("authorization", "")
        token = header[7:] if header[:7].lower() == "bearer " else None
        address = request.client.host if request.client else None

        def caller() -> tuple[ApiKey, Access]:
            key = authenticate(self.svc, token, address)
            return key, access_of(key, request.headers, self.svc.settings.access)
        try:
            found = await anyio.to_thread.run_sync(caller)
            if not self._managers:
                raise ApiProblem(503, "the MCP transport is not running (the app's lifespan has not started)",
                                 "service-unavailable", {"Retry-After": "5"})
        except ApiProblem as exc:
            response = problem_response(exc.status, exc.detail, request.url.path, exc.kind, exc.headers, exc.errors)
            await response(scope, receive, send)
            return
        await self._managers[-1].asgi_app({**scope, CALLER: found}, receive, send)


def install(app, svc: Services, query_body: type) -> McpEndpoint:
    """Serve the MCP tools on ``app`` at ``/mcp`` (streamable HTTP). Returns the endpoint,
    whose :meth:`McpEndpoint.running` the app's lifespan enters."""
    endpoint = McpEndpoint(svc, build_server(svc, query_body))
    app.router.routes.append(Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"],
                                   include_in_schema=False))
    return endpoint


def serve_stdio(settings=None) -> None:
    """``pathweave mcp``: the tools over stdio for a local client, as the key in
    :data:`KEY_ENV` (authenticated at start and at each call: its tenant, scope and
    principals), on the process's own runtime (store, embedder; no queue, warm-up or reaper
    is started; nothing is printed to stdout but the protocol). Raises ``SystemExit`` with a
    message when the key is missing or refused."""
    from pathweave.settings import get_settings
    from pathweave_api.routers.query import query_model

    token = os.environ.get(KEY_ENV, "").strip()
    if not token:
        raise SystemExit(f"set {KEY_ENV} to an API key (create one with `pathweave keys create`)")
    settings = settings or get_settings()
    configure_tracing("pathweave-mcp")
    svc = build_services(settings)
    try:
        try:
            authenticate(svc, token, None)
        except ApiProblem as exc:
            raise SystemExit(f"{KEY_ENV}: {exc.detail}") from None
        build_server(svc, query_model(svc.api), stdio_key=token).run("stdio")
    finally:
        svc.stop()
