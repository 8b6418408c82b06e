"""Route ``POST /v1/query``: ranked passages with citations, the proposition paths, the id
of the stored reasoning record and, when asked (or with mode ``prunerag``), the LLM's answer; the body model's limits come from the settings."""

import asyncio
import contextvars
import functools
import json
import threading
import time

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import Field, create_model

from pathweave.access import UNRESTRICTED, Access
from pathweave.settings import ApiSettings
from pathweave_api import metrics
from pathweave_api.auth import QueryKey
from pathweave_api.bodies import json_body
from pathweave_api.callers import Caller
from pathweave_api.models import TEXT_PATTERN, QueryBody, QueryResponse, json_int
from pathweave_api.problems import ApiProblem, errors, unexpected
from pathweave_api.services import Services, ServicesDep, guard



SSE_EVENT = {"type": "object", "required": ["event", "data"], "description": "One Server-Sent Event.", "properties": {
    "event": {"type": "string", "enum": ["retrieval", "step", "token", "answer", "error"]},
    "data": {"type": "string", "description": "JSON: a QueryResponse (retrieval, answer), {text} (token), a tree "
                                              "node (step) or a problem document (error)."}}}
"""The OpenAPI schema of each event of a streamed query (OpenAPI before 3.2: ``schema``
describes one event)."""

TRACE_HEADER = "X-Pathweave-Trace-Id"
"""The response header naming the query's OpenTelemetry trace, when the service traces."""


def query_model(api: ApiSettings) -> type[QueryBody]:
    """The ``POST /v1/query`` body model under ``api``'s limits (question length, ``k``,
    token budget); it is also the OpenAPI ``QueryRequest``."""
    return create_model(
        "QueryRequest", __base__=QueryBody,
        question=(str, Field(..., min_length=1, max_length=api.max_question_chars,
                             json_schema_extra={"pattern": TEXT_PATTERN},
                             description="The question (plain text): at least one visible character, no NUL.")),
        k=(json_int(1, api.max_k), Field(5, description="Passages to return.")),
        token_budget=(json_int(api.min_token_budget, api.max_token_budget) | None,
                      Field(None, description="Context token budget (optional).")),
    )


def _unless_reembedding(guard, call, *args):
    """``guard(call, *args)``, with a tenant being re-embedded answered 503 ``reembed-in-progress``
    and Retry-After (not a lost store: ``guard`` must not drop the connection for it)."""
    from pathweave.embedding.embedder_record import ReembedInProgress

    def unguarded(*inner):
        try:
            return call(*inner), None
        except ReembedInProgress as exc:
            return None, exc

    result, busy = guard(unguarded, *args)
    if busy is not None:
        raise ApiProblem(503, str(busy), "reembed-in-progress", {"Retry-After": "30"})
    return result


def read_after(store, bookmarks: list[str]) -> None:
    """Make this process read at least the state ``bookmarks`` name (a job's, written by a
    worker elsewhere): one read of the tenant's graph version after them, which puts them in
    the process's bookmark manager, so every later read carries them. A bookmark the store
    does not know is a 422; one it has not reached in time, a 503 with Retry-After (the
    connection is kept: nothing is wrong with it)."""
    from neo4j.exceptions import ClientError, DatabaseError

    try:
        guard(store.run, "graph_version", read_after=bookmarks, meta_id=store.meta_id)
    except (ClientError, DatabaseError) as exc:  # the store cannot read what the strings say: not its bookmarks
        raise ApiProblem(422, f"consistency: not a bookmark of this store ({exc.code})", "validation-error") from None


def _retrieve(svc: Services, tenant: str, req: QueryBody, access: Access, how: str, **options):
    """``retriever.<how>(req, access=access, **options)`` (``query`` or ``stream``) for ``tenant``, after
    the bookmarks of ``req.consistency`` (a restricted ``access``: also after the leader's
    state, one read of the graph version there, whatever bookmarks it gave), with the core's errors as problems: its
    :class:`~pathweave.errors.BadRequest` a 422 (``not-applicable`` for an option the mode
    does not use; the CLI exits 2 with the same message), another embedder's tenant a 409,
    one being re-embedded a 503, no LLM to be had a 503 ``llm-unavailable``."""
    from pathweave.embedding.embedder_record import EmbedderMismatch
    from pathweave.errors import BadRequest, LLMUnavailable, NotApplicable

    retriever = svc.guard(svc.runtime.retriever, tenant)
    if req.consistency:
        read_after(retriever.store, req.consistency)
    svc.reader_store(tenant, access)  # a restricted caller: after the leader's state too
    try:
        return _unless_reembedding(svc.guard, functools.partial(getattr(retriever, how), access=access, **options), req)
    except BadRequest as exc:
        raise ApiProblem(422, str(exc), "not-applicable" if isinstance(exc, NotApplicable)
                         else "validation-error") from None
    except EmbedderMismatch as exc:  # the tenant's vectors are of another embedder
        raise ApiProblem(409, str(exc), "embedder-mismatch") from None
    except LLMUnavailable as exc:  # no model (the extra missing, the server not starting or exited)
        raise ApiProblem(503, str(exc), "llm-unavailable", {"Retry-After": str(exc.retry_after_s)}) from None


def run_query(svc: Services, tenant: str, req: QueryBody, access: Access = UNRESTRICTED) -> QueryResponse:
    """Run the query (:meth:`pathweave.query.retriever.Retriever.query`: with ``answer``
    or mode ``prunerag``, also the LLM's answer) and build the ``QueryResponse`` from the
    cited result alone (:meth:`QueryResponse.from_result`), from what ``access`` may read
    (:mod:`pathweave_api.callers`); errors as :func:`_retrieve` says."""
    started = time.perf_counter()
    return answered(req, _retrieve(svc, tenant, req, access, "query"), started)


def answered(req: QueryBody, result, started: float) -> QueryResponse:
    """The response of ``result`` (with the note of a budget that selected nothing), its
    query counted in the metrics (its time since ``started``, perf_counter s; each stage's)."""
    metrics.QUERY_SECONDS.labels(req.mode).observe(time.perf_counter() - started)
    metrics.QUERIES.labels(req.mode).inc()
    for stage, ms in result.timings_ms.items():
        if stage != "total":
            metrics.QUERY_STAGE_SECONDS.labels(req.mode, stage).observe(ms / 1000)
    note = None
    if req.token_budget is not None and result.context is None:
        note = "no context selected: the tenant has no passages for this question"
    return QueryResponse.from_result(result, note)


class _Feed:
    """What a thread of its own produces (a model's pieces, a tree's nodes), handed to the
    event loop as it comes: the request awaits :meth:`get` with no pool thread waiting the
    seconds a token or a node may take. ``left``: set once the reader is gone (it stopped
    waiting); ``ended``: set once the producer returned."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._items: asyncio.Queue = asyncio.Queue()
        self.left = threading.Event()
        self.ended = threading.Event()

    def put(self, item) -> None:
        """Hand ``item`` to the reader (from any thread)."""
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the loop is closed: the service is stopping, nobody reads
            self.left.set()

    def start(self, produce, name: str) -> None:
        """Run ``produce()`` in a new thread, in the caller's context (its trace)."""
        def run() -> None:
            try:
                produce()
            finally:
                self.ended.set()
        threading.Thread(target=contextvars.copy_context().run, args=(run,), name=name, daemon=True).start()

    async def get(self):
        """The next item; a reader cancelled meanwhile (the client left) sets ``left``."""
        try:
            return await self._items.get()
        except BaseException:
            self.left.set()
            raise


async def stream_query(svc: Services, tenant: str, req: QueryBody, access: Access):
    """``POST /v1/query`` answered as Server-Sent Events: ``retrieval`` (the response
    without its answer), one ``token`` event (``{"text": piece}``) per piece of the answer
    as the model writes it, then ``answer`` (the whole response: the answer with its
    citations, the timings). The model's pieces come from a thread of their own; a client
    that disconnects, or stops reading for ``api.stream_send_timeout_s``, closes the model's
    request (its generation stops) and the record is written with what was answered. Errors before the first event are problem documents."""
    import anyio
    from sse_starlette.sse import EventSourceResponse

    from pathweave.query.modes import strategy

    started = time.perf_counter()
    if strategy(req.mode).has_steps:
        return await stream_steps(svc, tenant, req, access, started)
    streamed = await run_in_threadpool(_retrieve, svc, tenant, req, access, "stream")

    async def events():
        feed = None
        try:
            yield {"event": "retrieval", "data": QueryResponse.from_result(streamed.retrieval.result).model_dump_json()}
            if streamed.answer is not None:
                feed, done = _Feed(), object()

                def pump() -> None:
                    try:
                        for piece in streamed.answer:
                            feed.put(piece)
                    finally:
                        feed.put(done)
                feed.start(pump, "pathweave-answer-stream")
                while (piece := await feed.get()) is not done:  # a client leaving cancels the wait at once
                    yield {"event": "token", "data": json.dumps({"text": piece})}
            result = await run_in_threadpool(streamed.finish)
            yield {"event": "answer", "data": answered(req, result, started).model_dump_json()}
        finally:  # the client left (or the stream failed): stop the model, then keep the record of what was said
            if streamed.answer is not None:
                streamed.answer.close()
            with anyio.CancelScope(shield=True):
                if feed is not None:
                    await anyio.to_thread.run_sync(feed.ended.wait, 30.0)
                await run_in_threadpool(streamed.finish)  # once: a finished query returns at once

    headers = {TRACE_HEADER: streamed.retrieval.result.trace_id} if streamed.retrieval.result.trace_id else None
    return EventSourceResponse(events(), headers=headers, send_timeout=svc.api.stream_send_timeout_s)


class _ClientLeft(Exception):
    """Raised into a query whose streamed steps nobody reads any more: its work stops."""


def step_event(node, parent_id: str | None) -> dict:
    """The ``step`` event of a settled PruneRAG tree node: its id, its parent's, kind, text,
    depth, decision, answer and confidence, error, and the ids of the passages it retrieved."""
    return {"event": "step", "data": json.dumps({
        "node_id": node.node_id, "parent_id": parent_id, "kind": node.kind, "text": node.text, "depth": node.depth,
        "decision": node.decision, "answer": node.answer, "confidence": node.confidence, "error": node.error,
        "passage_ids": [hit.passage_id for hit in node.passages]})}


async def stream_steps(svc: Services, tenant: str, req: QueryBody, access: Access, started: float):
    """A query of a mode with steps (PruneRAG) as Server-Sent Events: one ``step`` event per
    tree node as it is settled (:func:`step_event`), then ``retrieval`` and ``answer`` as
    :func:`stream_query` sends them. The query runs in a thread of its own (in the request's
    trace) and hands each step to the event loop, so no pool thread waits for the model; a
    client that leaves stops it at its next node (no record is written unless the tree was
    settled already). Errors before the first event are problem documents; one after it is an
    ``error`` event (a problem document) that ends the stream."""
    from sse_starlette.sse import EventSourceResponse

    from pathweave.telemetry import current_trace_id

    feed = _Feed()

    def on_step(node, parent_id: str | None) -> None:
        if feed.left.is_set():
            raise _ClientLeft()
        feed.put(("step", step_event(node, parent_id)))

    def run() -> None:
        try:
            feed.put(("done", _retrieve(svc, tenant, req, access, "stream", on_step=on_step)))
        except BaseException as exc:  # noqa: BLE001 - handed to the request (or dropped: the client left)
            feed.put(("failed", exc))

    def problem_event(exc: BaseException) -> dict:
        problem = exc if isinstance(exc, ApiProblem) else unexpected(exc, svc, f"streamed {req.mode} query")
        return {"event": "error", "data": json.dumps({"type": f"urn:pathweave:problem:{problem.kind}",
                                                      "status": problem.status, "detail": problem.detail})}

    feed.start(run, "pathweave-steps")
    first = await feed.get()  # a client leaving before the first step stops the tree
    if first[0] == "failed":
        raise first[1]

    async def events():
        kind, item = first
        try:
            while kind == "step":
                yield item
                kind, item = await feed.get()
            if kind == "failed":
                yield problem_event(item)
                return
            try:
                result = await run_in_threadpool(item.finish)
                retrieval = QueryResponse.from_result(result.model_copy(update={"answer": None})).model_dump_json()
                whole = answered(req, result, started).model_dump_json()
            except Exception as exc:  # noqa: BLE001 - said as the stream's last event
                yield problem_event(exc)
                return
            yield {"event": "retrieval", "data": retrieval}
            yield {"event": "answer", "data": whole}
        finally:
            feed.left.set()

    trace_id = current_trace_id()  # the request's trace (an instrumented service), which the query's joins
    return EventSourceResponse(events(), headers={TRACE_HEADER: trace_id} if trace_id else None,
                               send_timeout=svc.api.stream_send_timeout_s)


def router(body: type[QueryBody]) -> APIRouter:
    """The query route, validating requests with ``body`` (:func:`query_model`)."""
    router = APIRouter()

    @router.post("/v1/query", response_model=QueryResponse, tags=["query"], summary="Ask a question",
                 description=("Ranked passages with citations, the proposition paths connecting them (proprag), "
                              "the id of the stored reasoning record and, with `answer: true` or mode prunerag, "
                              "the LLM's answer (and PruneRAG's decomposition tree)."),
              responses={**errors(400, 413, 415, 422), 200: {
                  "description": "The response; with `stream` (or `Accept: text/event-stream`) as Server-Sent Events: "
                                 "`retrieval`, `token` ({text}) per piece of the answer, then `answer`; in mode "
                                 "prunerag a `step` per tree node first; an `error` (a problem document) ends a "
                                 "stream that failed after its first event.",
                  "content": {"text/event-stream": {"schema": SSE_EVENT}}}},
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": {"$ref": "#/components/schemas/QueryRequest"},
                  "examples": {
                      "proprag": {"summary": "Multi-hop question", "value": {
                          "question": "Where was the physicist who won the 1903 Nobel Prize born?", "mode": "proprag",
                          "k": 5}},
                      "budget": {"summary": "With a token budget", "value": {
                          "question": "Which river flows through the capital of Poland?", "mode": "dense", "k": 3,
                          "token_budget": 512}}}}}}})
    async def query(request: Request, response: Response, key: QueryKey, access: Caller, svc: ServicesDep):
        req = await json_body(request, body, '{"question": "...", "mode": "proprag", "k": 5}')
        if req.stream or "text/event-stream" in request.headers.get("accept", ""):
            return await stream_query(svc, key.tenant, req, access)
        answered = await run_in_threadpool(run_query, svc, key.tenant, req, access)
        if answered.trace_id:
            response.headers[TRACE_HEADER] = answered.trace_id
        return answered

    return router
