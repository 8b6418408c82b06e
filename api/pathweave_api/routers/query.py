"""Route ``POST /v1/query``: ranked passages with citations, the proposition paths, the id
of the stored reasoning record and, when asked (or with mode ``prunerag``), the LLM's answer; the body model's limits come from the settings."""

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import Field, create_model

from pathweave.citations import cite_result
from pathweave.settings import ApiSettings
from pathweave_api import metrics
from pathweave_api.auth import Principal
from pathweave_api.bodies import json_body
from pathweave_api.models import TEXT_PATTERN, QueryRequest, QueryResponse, json_int
from pathweave_api.problems import ApiProblem, errors
from pathweave_api.services import Services, ServicesDep, guard


def query_model(api: ApiSettings) -> type[QueryRequest]:
    """The ``POST /v1/query`` body model under ``api``'s limits (question length, ``k``,
    token budget); it is also the OpenAPI ``QueryRequest``."""
    return create_model(
        "QueryRequest", __base__=QueryRequest,
        question=(str, Field(..., min_length=1, max_length=api.max_question_chars,
                             json_schema_extra={"pattern": TEXT_PATTERN},
                             description="The question (plain text): at least one visible character, no NUL.")),
        k=(json_int(1, api.max_k), Field(5, description="Passages to return.")),
        token_budget=(json_int(api.min_token_budget, api.max_token_budget) | None,
                      Field(None, description="Context token budget (optional).")),
    )


def answer(svc: Services, tenant: str, req: QueryRequest) -> dict[str, Any]:
    """Run the query (with ``answer`` or mode ``prunerag``, also the LLM's answer:
    :func:`pathweave.answering.answer_query`) and shape the ``QueryResponse`` (citations,
    sources, the passages stating each step, the answer and the PruneRAG tree). No LLM to
    be had is a 503 ``llm-unavailable``."""
    retriever = guard(svc.runtime.retriever, tenant)
    started = time.perf_counter()
    from pathweave.answering import answer_query
    from pathweave.llm.client import LLMError
    from pathweave.llm.server import LLMServerError

    budget = None if req.mode in ("prunerag", "apr") else req.token_budget  # see the note
    session_id = req.session_id if req.mode == "apr" else None  # see the note
    try:
        if req.answer or req.mode == "prunerag":  # a PruneRAG tree has no budgeted context (see the note)
            result = guard(answer_query, retriever, req.question, req.mode, req.k, budget, req.selection_method,
                           req.context_style, session_id=session_id)
        else:
            result = guard(retriever.query, req.question, mode=req.mode, k=req.k, token_budget=budget,
                           select=req.selection_method, style=req.context_style, session_id=session_id)
    except ValueError as exc:
        raise ApiProblem(422, str(exc), "validation-error") from None
    except (LLMError, LLMServerError) as exc:  # no model at all (the extra missing, the server not starting)
        raise ApiProblem(503, f"no LLM to answer with: {exc}", "llm-unavailable", {"Retry-After": "30"}) from None
    metrics.QUERY_SECONDS.labels(req.mode).observe(time.perf_counter() - started)
    metrics.QUERIES.labels(req.mode).inc()
    store = retriever.store
    guard(cite_result, store, result)  # page / section citations ("title, p. N", "title > section")
    marker = {hit.passage_id: hit.rank for hit in result.passages}
    doc_ids = sorted({hit.doc_id for hit in result.passages if hit.doc_id})
    sources = {r["doc_id"]: r["source"] for r in guard(store.run, "api_document_sources", ids=doc_ids)} \
        if doc_ids else {}
    prop_ids = sorted({step.prop_id for path in result.paths for step in path.steps})
    stating: dict[str, list[int]] = {}
    if prop_ids and marker:
        for row in guard(store.run, "api_passages_stating", prop_ids=prop_ids, passage_ids=list(marker)):
            stating.setdefault(row["prop_id"], []).append(marker[row["passage_id"]])
    note = None
    if req.token_budget is not None and req.mode == "prunerag":
        note = "token_budget does not apply to mode prunerag (its nodes answer from their top passages)"
    elif req.token_budget is not None and req.mode == "apr":
        note = "token_budget does not apply to mode apr (its compact prompt is sized by its runs)"
    elif req.session_id is not None and req.mode != "apr":
        note = "session_id applies to mode apr only; this query ignored it"
    elif req.token_budget is not None and result.context is None:
        note = "no context selected: the tenant has no passages for this question"
    return {
        "query_id": result.query_id, "record_id": result.query_id, "question": result.question,
        "mode": result.mode, "graph_version": result.graph_version,
        "passages": [{**hit.model_dump(), "citation": hit.rank} for hit in result.passages],
        "paths": [{"path_id": p.path_id, "rank": p.rank, "score": p.score,
                   "steps": [{"prop_id": s.prop_id, "text": s.text, "via": s.via,
                              "citations": sorted(stating.get(s.prop_id, []))} for s in p.steps]}
                  for p in result.paths],
        "seeds": [s.model_dump() for s in result.seeds],
        "citations": [{"marker": hit.rank, "passage_id": hit.passage_id, "doc_id": hit.doc_id, "title": hit.title,
                       "source": sources.get(hit.doc_id), "page": hit.page, "section": hit.section,
                       "reference": hit.reference} for hit in result.passages],
        "timings_ms": result.timings_ms,
        "context": result.context.model_dump() if result.context is not None else None, "note": note,
        "answer": result.answer.model_dump() if result.answer is not None else None,
        "tree": result.tree.model_dump() if result.tree is not None else None,
        "apr": result.apr.model_dump() if result.apr is not None else None,
        "links": {"record": f"/v1/queries/{result.query_id}"},
    }


def router(body: type[QueryRequest]) -> APIRouter:
    """The query route, validating requests with ``body`` (:func:`query_model`)."""
    router = APIRouter()

    @router.post("/v1/query", response_model=QueryResponse, tags=["query"], summary="Ask a question",
                 description=("Ranked passages with citations, the proposition paths connecting them (proprag), "
                              "the id of the stored reasoning record and, with `answer: true` or mode prunerag, "
                              "the LLM's answer (and PruneRAG's decomposition tree)."),
              responses=errors(400, 413, 415, 422),
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": {"$ref": "#/components/schemas/QueryRequest"},
                  "examples": {
                      "proprag": {"summary": "Multi-hop question", "value": {
                          "question": "Where was the physicist who won the 1903 Nobel Prize born?", "mode": "proprag",
                          "k": 5}},
                      "budget": {"summary": "With a token budget", "value": {
                          "question": "Which river flows through the capital of Poland?", "mode": "dense", "k": 3,
                          "token_budget": 512}}}}}}})
    async def query(request: Request, key: Principal, svc: ServicesDep):
        req = await json_body(request, body, '{"question": "...", "mode": "proprag", "k": 5}')
        return await run_in_threadpool(answer, svc, key.tenant, req)

    return router
