"""Routes of ``/v1/queries``: a query's reasoning record (with what the explorer draws:
node texts and the passages stating its propositions) and the tenant's recent queries."""

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from pathweave.access import UNRESTRICTED, Access
from pathweave.settings import ApiSettings
from pathweave_api.auth import QueryKey
from pathweave_api.callers import Caller
from pathweave_api.models import HEX32_PATTERN, QueryList, ReasoningRecord
from pathweave_api.problems import ApiProblem, errors
from pathweave_api.services import ServicesDep


def enrich_record(store, record: dict, access: Access = UNRESTRICTED) -> dict:
    """Add what the explorer draws to a stored record: the text of each selected node, and
    the passages (with their documents) stating the paths' propositions or selected, only
    those ``access`` may read (each with the first of its documents it may read)."""
    selected = record.get("selected", [])
    by_label: dict[str, list[str]] = {}
    for row in selected:
        if row.get("id"):
            by_label.setdefault(row.get("label") or "", []).append(row["id"])
    texts: dict[str, str] = {}
    for label, name in (("Proposition", "api_propositions_text"), ("Entity", "api_entities_name")):
        if by_label.get(label):
            texts.update({r["id"]: r["text"] for r in store.run(name, ids=by_label[label])})
    prop_ids = sorted({step["prop_id"] for path in record.get("paths", []) for step in path["steps"]})
    states: dict[str, list[str]] = {}
    if prop_ids:
        for row in store.run("api_propositions_stated", prop_ids=prop_ids):
            states.setdefault(row["passage_id"], []).append(row["prop_id"])
    passage_ids = list(dict.fromkeys([*by_label.get("Passage", []), *sorted(states)]))
    passages = []
    if passage_ids:
        found: dict[str, dict] = {}
        for row in store.run("api_passages_get", ids=passage_ids):
            if row["passage_id"] not in found and (not access.restricted or (row["held"] and access.reads(row["acl"]))):
                found[row["passage_id"]] = {k: v for k, v in row.items() if k not in ("acl", "held")}
        for pid in passage_ids:
            if pid in found:
                passages.append({**found[pid], "states": sorted(states.get(pid, []))})
                texts[pid] = found[pid]["text"]
    return {**record, "selected": [{**row, "text": texts.get(row.get("id"))} for row in selected],
            "passages": passages}



def _caught_up(svc, tenant: str) -> None:
    """Wait (at most ``api.record_wait_s``) until the records of earlier queries are written;
    503 with Retry-After when the writer is behind."""
    from pathweave.records.reasoning import RecordsBehind

    try:
        svc.guard(svc.runtime.retriever, tenant).flush(svc.api.record_wait_s)
    except RecordsBehind as exc:
        raise ApiProblem(503, f"{exc}; retry later", "records-behind", {"Retry-After": "5"}) from None


def reasoning_record(svc, tenant: str, access: Access, query_id: str) -> dict:
    """The ``ReasoningRecord`` body of ``GET /v1/queries/{query_id}``, once the records of
    earlier queries are written: 404 when the tenant has no such query or ``access`` may not
    read its record (:func:`readable`), 503 when the record writer is behind."""
    from pathweave.records.reasoning import read_reasoning_record

    _caught_up(svc, tenant)  # records are written off the query path
    store = svc.reader_store(tenant, access)
    rows = svc.guard(store.run, "api_query_get", query_id=query_id)
    if not rows or not readable(access, rows[0]):
        raise ApiProblem(404, f"no reasoning record {query_id} for this tenant", "not-found")
    try:
        record = svc.guard(read_reasoning_record, store, query_id, access)
    except KeyError:
        record = {"query_id": query_id, "paths": [], "selected": []}
    record = svc.guard(enrich_record, store, record, access)
    return {**record, "text": rows[0]["text"], "mode": rows[0]["mode"], "created_at": rows[0]["created_at"],
            "trace_id": rows[0]["trace_id"]}


RESTRICTED_READ_AHEAD = 10
"""A restricted caller's list of recent queries reads this many times its page, newest
first, and keeps the records it may read."""


def readable(access: Access, row: dict) -> bool:
    """Whether ``access`` may read the record of a query row (its ``principals``: the
    asking caller's; :meth:`pathweave.access.Access.covers`)."""
    asked = row.get("principals")
    return access.covers(Access(None if asked is None else frozenset(asked)))


def router(api: ApiSettings) -> APIRouter:
    """The reasoning-record routes under ``api``'s page limit."""
    router = APIRouter()

    @router.get("/v1/queries/{query_id}", response_model=ReasoningRecord, tags=["query"],
             summary="A query's reasoning record", responses=errors(404, 422))
    def get_record(key: QueryKey, access: Caller, svc: ServicesDep, query_id: Annotated[str, Path(pattern=HEX32_PATTERN, examples=[
            "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0"])]):
        return reasoning_record(svc, key.tenant, access, query_id)

    @router.get("/v1/queries", response_model=QueryList, tags=["query"], summary="The tenant's reasoning records",
             description="The tenant's queries (their reasoning records), newest first.", responses=errors(422))
    def list_queries(request: Request, key: QueryKey, access: Caller, svc: ServicesDep,
                     limit: Annotated[int, Query(ge=1, le=api.max_page)] = 50):
        unknown = sorted(set(request.query_params) - {"limit"})
        if unknown:
            raise ApiProblem(422, f"unknown query parameter(s): {', '.join(repr(u[:50]) for u in unknown[:5])}; "
                                  "use limit", "validation-error")
        _caught_up(svc, key.tenant)  # records are written off the query path
        # a restricted caller sees the records of callers it covers: read further back for them
        rows = svc.guard(svc.reader_store(key.tenant, access).run, "api_queries_recent",
                         limit=limit if not access.restricted else min(limit * RESTRICTED_READ_AHEAD, 10_000))
        return {"queries": [{k: v for k, v in row.items() if k != "principals"} for row in rows
                            if readable(access, row)][:limit], "limit": limit}

    return router
