"""Route ``POST /v1/query``: ranked passages with citations, the proposition paths, the id
of the stored reasoning record and, when asked (or with mode ``prunerag``), the LLM's answer; the body model's limits come from the settings."""

import functools
import json
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
from pathweave_api.problems import ApiProblem, errors
from pathweave_api.services import Services, ServicesDep, guard
from pathweave_api.streaming import TRACE_HEADER, event_stream



SSE_EVENT = {"type": "object", "required": ["event", "data"], "description": "One Server-Sent Event.", "properties": {
    "event": {"type": "string", "enum": ["retrieval", "step", "token", "answer", "error"]},
    "data": {"type": "string", "description": "JSON: a QueryResponse (retrieval, answer), {text} (token), a tree "
                                              "node (step) or a problem document (error)."}}}
"""The OpenAPI schema of each event of a streamed query (OpenAPI before 3.2: ``schema``
describes one event)."""



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


def _retrieve(svc: Services, tenant: str, req: QueryBody, access: Access, on_event=None):
    """``retriever.run(req, access, on_event)`` (:meth:`pathweave.query.retriever.Retriever.run`)
    for ``tenant``, after the bookmarks of ``req.consistency`` (a restricted ``access``: also
    after the leader's state, one read of the graph version there, whatever bookmarks it
    gave), with the core's errors as problems: its :class:`~pathweave.errors.BadRequest` a
    422 (``not-applicable`` for an option the mode does not use; the CLI exits 2 with the same
    message), another embedder's tenant a 409, one being re-embedded a 503, no LLM to be had a
    503 ``llm-unavailable``. Returns the result."""
    from pathweave.embedding.embedder_record import EmbedderMismatch
    from pathweave.errors import BadRequest, LLMUnavailable, NotApplicable

    retriever = svc.guard(svc.runtime.retriever, tenant)
    if req.consistency:
        read_after(retriever.store, req.consistency)
    svc.reader_store(tenant, access)  # a restricted caller: after the leader's state too
    try:
        return _unless_reembedding(svc.guard, functools.partial(retriever.query, access=access, on_event=on_event),
                                   req)
    except BadRequest as exc:
        raise ApiProblem(422, str(exc), "not-applicable" if isinstance(exc, NotApplicable)
                         else "validation-error") from None
    except EmbedderMismatch as exc:  # the tenant's vectors are of another embedder
        raise ApiProblem(409, str(exc), "embedder-mismatch") from None
    except LLMUnavailable as exc:  # no model (the extra missing, the server not starting or exited)
        raise ApiProblem(503, str(exc), "llm-unavailable", {"Retry-After": str(exc.retry_after_s)}) from None


def run_query(svc: Services, tenant: str, req: QueryBody, access: Access = UNRESTRICTED) -> QueryResponse:
    """Run the query (:meth:`pathweave.query.retriever.Retriever.run`: with ``answer`` or
    mode ``prunerag``, also the LLM's answer) and build the ``QueryResponse`` from the cited
    result alone (:meth:`QueryResponse.from_result`), from what ``access`` may read
    (:mod:`pathweave_api.callers`); errors as :func:`_retrieve` says."""
    started = time.perf_counter()
    return answered(req, _retrieve(svc, tenant, req, access), started)


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


def step_event(node, parent_id: str | None) -> dict:
    """The ``step`` event of a settled PruneRAG tree node: its id, its parent's, kind, text,
    depth, decision, answer and confidence, error, and the ids of the passages it retrieved."""
    return {"event": "step", "data": json.dumps({
        "node_id": node.node_id, "parent_id": parent_id, "kind": node.kind, "text": node.text, "depth": node.depth,
        "decision": node.decision, "answer": node.answer, "confidence": node.confidence, "error": node.error,
        "passage_ids": [hit.passage_id for hit in node.passages]})}


def sse_event(event, req: QueryBody, started: float) -> dict:
    """The Server-Sent Event of a query event (:class:`pathweave.query.events.QueryEvent`):
    ``step`` (:func:`step_event`), ``retrieval`` (the response without its answer),
    ``token`` (``{"text": piece}``) and ``answer`` (the whole response, its query counted)."""
    if event.kind == "step":
        return step_event(event.node, event.parent_id)
    if event.kind == "token":
        return {"event": "token", "data": json.dumps({"text": event.text})}
    if event.kind == "retrieval":
        return {"event": "retrieval", "data": QueryResponse.from_result(event.result).model_dump_json()}
    return {"event": "answer", "data": answered(req, event.result, started).model_dump_json()}


async def stream_query(svc: Services, tenant: str, req: QueryBody, access: Access):
    """``POST /v1/query`` answered as Server-Sent Events, one per event of the query
    (:func:`sse_event`), for every mode in the order the core tells them
    (:func:`pathweave_api.streaming.event_stream`: the query in a thread of its own, a client
    that leaves stopping it at its next event). Errors before the first event are problem
    documents; one after it is an ``error`` event."""
    started = time.perf_counter()
    return await event_stream(svc, lambda on_event: _retrieve(svc, tenant, req, access, on_event),
                              lambda event: sse_event(event, req, started), f"streamed {req.mode} query")


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
