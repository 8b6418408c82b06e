"""Routes of ``/v1/documents``: submit (JSON or files), list, read, delete, create or
replace by external id (PUT), and change an access list (PATCH ``.../acl``); :func:`submit`
creates the ingestion job and enqueues it. A caller with principals lists, reads, deletes and
changes only the documents it may read (:mod:`pathweave_api.callers`)."""

import dataclasses
import math
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from pathweave.access import PRINCIPAL_PATTERN, UNRESTRICTED, Access
from pathweave.settings import ApiSettings
from pathweave_api import metrics
from pathweave_api.auth import IngestKey
from pathweave_api.callers import Caller
from pathweave_api.bodies import json_body, media_type, read_documents, read_files, require_json, source_document
from pathweave_api.models import (
    DOC_ID_PATTERN,
    EXTERNAL_ID_PATTERN,
    AclPatch,
    AclResponse,
    DeleteResponse,
    DocStatus,
    DocumentList,
    DocumentPut,
    DocumentText,
    SubmitResponse,
)
from pathweave_api.problems import ApiProblem, errors
from pathweave_api.services import Services, ServicesDep
from pathweave_api.submissions import check_queue, dispatch
from pathweave_ingest import jobs, lifecycle
from pathweave_ingest.loaders import SourceDocument


def submit(svc: Services, tenant: str, docs: list[SourceDocument], access: Access = UNRESTRICTED) -> dict[str, Any]:
    """Create the job of ``docs`` and enqueue its batches: the ``SubmitResponse`` body; 429 when
    the queue is full, 503 when the broker or the store is unavailable (nothing enqueued); 403
    when a restricted ``access`` would write a document it may not read, stored or accepted
    (checked in the accepting transaction: nothing written)."""
    payloads = jobs.payloads(tenant, docs)
    batch_size = svc.ws.batch_size(svc.runtime.device)
    check_queue(svc, math.ceil(len(payloads) / batch_size))
    store = svc.store(tenant)
    try:
        sub = svc.guard(jobs.create_job, store, jobs.new_job_id(), payloads, batch_size, svc.dispatcher.mode, access)
    except lifecycle.NotPermitted:
        raise ApiProblem(403, "a document of this submission has an access list this key's principals are not on "
                              "(stored, or of a version accepted and not yet ingested); it cannot be replaced by "
                              "this key", "not-permitted") from None
    metrics.DOCUMENTS_SUBMITTED.inc(len(payloads))
    return dispatch(svc, tenant, store, sub, payloads)


def document_text(svc: Services, tenant: str, access: Access, doc_id: str) -> dict[str, Any]:
    """The ``DocumentText`` body of ``GET /v1/documents/{doc_id}``: the document with its
    passages in reading order; 404 when the tenant has none or ``access`` may not read it."""
    rows = svc.guard(svc.reader_store(tenant, access).run, "api_document_get", doc_id=doc_id)
    if not rows or not access.reads(rows[0]["acl"]):
        raise ApiProblem(404, f"no document {doc_id} for this tenant", "not-found")
    passages = sorted((r for r in rows if r["passage_id"] is not None),
                      key=lambda r: (r["position"] is None, r["position"] or 0, r["passage_id"]))
    first = rows[0]
    return {"doc_id": doc_id, "title": first["title"], "source": first["source"], "ingested_at": first["ingested_at"],
            "passages": [{"passage_id": r["passage_id"], "position": r["position"], "text": r["text"]}
                         for r in passages]}


def document_page(svc: Services, tenant: str, access: Access, status: str | None, limit: int,
                  offset: int) -> dict[str, Any]:
    """The ``DocumentList`` body of ``GET /v1/documents``: the documents ``access`` may read
    (in state ``status``, when given), newest first, ``limit`` from ``offset``."""
    page, total = svc.guard(jobs.list_documents, svc.reader_store(tenant, access), status, limit, offset, access)
    return {"documents": page, "total": total, "limit": limit, "offset": offset}


def _readable(svc: Services, store, access: Access, doc_id: str) -> bool:
    """Whether ``access`` may read the stored document ``doc_id`` (False when there is none)."""
    rows = svc.guard(store.run, "api_document_get", doc_id=doc_id)
    return bool(rows) and access.reads(rows[0]["acl"])


def _set_acl(svc: Services, tenant: str, access: Access, doc_id: str, acl: list[str] | None) -> dict[str, Any]:
    """PATCH of an access list (:func:`pathweave_ingest.lifecycle.set_acl`): 404 when the
    tenant has no such document or ``access`` may not read it, 403 for any other restricted
    caller (a reader of a document may not widen who reads it)."""
    store = svc.store(tenant)
    if access.restricted:
        if not _readable(svc, svc.reader_store(tenant, access), access, doc_id):
            raise ApiProblem(404, f"no document {doc_id} for this tenant", "not-found")
        raise ApiProblem(403, "only a key without principals changes access lists", "not-permitted")
    try:
        done = svc.guard(lifecycle.set_acl, store, doc_id, acl)
    except lifecycle.NoSuchDocument:
        raise ApiProblem(404, f"no document {doc_id} for this tenant", "not-found") from None
    return {"doc_id": doc_id, "acl": done["acl"], "graph_version": done["version"], "bookmarks": store.last_bookmarks()}


def router(api: ApiSettings) -> APIRouter:
    """The documents routes under ``api``'s limits."""
    router = APIRouter()
    files_schema = {"type": "object", "required": ["files"], "properties": {"files": {
        "type": "array", "items": {"type": "string", "format": "binary"}, "minItems": 1,
        "maxItems": api.max_documents,
        "description": "Files: .txt, .md, .pdf (text per page), .html/.htm (main content), .docx (headings as "
                       "sections): one document each; .json (a list of {title, text}), .jsonl."},
        "acl": {"type": "array", "items": {"type": "string", "pattern": PRINCIPAL_PATTERN.pattern}, "maxItems": 1000,
                "description": "Access list of every uploaded document (repeated or comma-separated principals; "
                               "absent: the tenant's default)."}}}
    put_file_schema = {"type": "object", "required": ["files"], "properties": {"files": {
        "type": "array", "items": {"type": "string", "format": "binary"}, "minItems": 1, "maxItems": 1,
        "description": "One file: .txt, .md, .pdf, .html/.htm, .docx (or a .json/.jsonl with one item)."},
        "acl": {"type": "array", "items": {"type": "string", "pattern": PRINCIPAL_PATTERN.pattern}, "maxItems": 1000,
                "description": "Access list of the document (repeated or comma-separated principals; absent: the "
                               "stored list, or the tenant's default)."}}}

    @router.post(
        "/v1/documents", status_code=202, response_model=SubmitResponse, tags=["documents"],
        summary="Submit documents for ingestion",
        description=(
            "Validates every document first (empty, binary, not UTF-8, too large, malformed JSON: 4xx and nothing "
            "is written), then creates a job and enqueues its batches. Answers 202 with the job id "
            "(`Location: /v1/jobs/{id}`). Documents already ingested (same title and text) are `done` at once. "
            "Files: .txt, .md, .pdf, .html/.htm, .docx, .json, .jsonl; an encrypted, corrupt or image-only PDF, "
            "HTML without main content or a .docx that is not a Word file is rejected (422, nothing written)."),
        responses=errors(400, 413, 415, 422),
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsRequest"},
                                 "examples": {"one": {"summary": "One document", "value": {"documents": [{
                                     "title": "Marie Curie", "text": "Marie Curie was born in Warsaw.",
                                     "source": "wiki/marie-curie.md"}]}}}},
            "multipart/form-data": {"schema": files_schema},
        }}},
    )
    async def submit_documents(request: Request, response: Response, key: IngestKey, access: Caller,
                               svc: ServicesDep) -> dict[str, Any]:
        docs = await read_documents(request, svc)
        result = await run_in_threadpool(submit, svc, key.tenant, docs, access)
        response.headers["Location"] = result["links"]["job"]
        return result

    @router.get("/v1/documents", response_model=DocumentList, tags=["documents"], summary="The tenant's documents",
             description="Ingested and in-flight documents with status, counts and timings; newest first.",
             responses=errors(422))
    def list_documents(
        request: Request,
        key: IngestKey,
        access: Caller,
        svc: ServicesDep,
        status: Annotated[DocStatus | None, Query(description="Only documents in this state.")] = None,
        limit: Annotated[int, Query(ge=1, le=api.max_page)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    ):
        unknown = sorted(set(request.query_params) - {"status", "limit", "offset"})
        if unknown:
            raise ApiProblem(422, f"unknown query parameter(s): {', '.join(repr(u[:50]) for u in unknown[:5])}; "
                                  "use status, limit, offset", "validation-error")
        return document_page(svc, key.tenant, access, status, limit, offset)

    @router.get("/v1/documents/{doc_id}", response_model=DocumentText, tags=["documents"],
             summary="A document and its passages", description="An ingested document with its passages' text "
             "in reading order (the reasoning explorer links passages to it).", responses=errors(404, 422))
    def get_document(key: IngestKey, access: Caller, svc: ServicesDep, doc_id: Annotated[
            str, Path(pattern=DOC_ID_PATTERN, examples=["doc:3f1c2a9d8e7b6c5a4f3e2d1c"])]):
        return document_text(svc, key.tenant, access, doc_id)

    @router.delete(
        "/v1/documents/{doc_id}", response_model=DeleteResponse, tags=["documents"], summary="Delete a document",
        description=("Removes the document, its passages (unless another document shares them), the propositions "
                     "and triples only it states/asserts, and entities nothing else mentions (shared entities "
                     "stay; alias groups stay consistent), in one transaction that also accepts the deletion as "
                     "the document's newest version: a write of it still queued or running is superseded "
                     "(the newest accepted write wins)."),
        responses=errors(404, 422))
    def delete_document(key: IngestKey, access: Caller, svc: ServicesDep, doc_id: Annotated[
            str, Path(pattern=DOC_ID_PATTERN, examples=["doc:3f1c2a9d8e7b6c5a4f3e2d1c"])]):
        store = svc.store(key.tenant)
        result = svc.guard(jobs.delete_document, store, doc_id, access)  # unreadable: as absent, checked in it
        if result is None:
            raise ApiProblem(404, f"no document {doc_id} for this tenant", "not-found")
        return {**result, "bookmarks": store.last_bookmarks()}  # the process's, its commit among them

    @router.patch(
        "/v1/documents/{doc_id}/acl", response_model=AclResponse, tags=["documents"],
        summary="Change a document's access list",
        description=("Sets who may read the document (`acl`: principals such as `group:finance`, `user:4711`; null: "
                     "everyone in the tenant; []: only callers without principals) without re-ingesting it, in one "
                     "transaction: every query from the next one on sees the new list. A caller with principals "
                     "may not change access lists (403)."),
        responses=errors(404, 422))
    async def patch_acl(request: Request, key: IngestKey, access: Caller, svc: ServicesDep, doc_id: Annotated[
            str, Path(pattern=DOC_ID_PATTERN, examples=["doc:3f1c2a9d8e7b6c5a4f3e2d1c"])]) -> dict[str, Any]:
        parsed = await json_body(request, AclPatch, '{"acl": ["group:finance"]}')
        return await run_in_threadpool(_set_acl, svc, key.tenant, access, doc_id, parsed.acl)

    @router.put(
        "/v1/documents/{external_id}", status_code=202, response_model=SubmitResponse, tags=["documents"],
        summary="Create or replace the document with this external id",
        description=(
            "The document's identity is the tenant + `external_id` (its id is answered in `documents[0].doc_id`). "
            "Unchanged content (same content hash) changes nothing (`done` at once); changed content is accepted as "
            "the document's next version (the newest accepted write wins, also over one still running) and "
            "replaces the stored version in one transaction: queries see the old version until it commits and "
            "the new one after, never neither; what only the old version held is removed as "
            "`DELETE /v1/documents/{id}` removes it. "
            "Body: JSON `{title, text}` or `multipart/form-data` with one file in field `files` "
            "(.txt, .md, .pdf, .html/.htm, .docx). Answers 202 with the job (`Location: /v1/jobs/{id}`)."),
        responses=errors(400, 413, 415, 422),
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentPut"},
                                 "examples": {"one": {"summary": "A policy page", "value": {
                                     "title": "Travel policy", "text": "Trips to Lyon need approval."}}}},
            "multipart/form-data": {"schema": put_file_schema},
        }}},
    )
    async def put_document(request: Request, response: Response, key: IngestKey, access: Caller, svc: ServicesDep,
                           external_id: Annotated[
            str, Path(pattern=EXTERNAL_ID_PATTERN, description="The caller's id of the document (its source).",
                      examples=["policies:travel-2024"])]) -> dict[str, Any]:
        media = media_type(request)
        if media == "multipart/form-data":
            docs = await read_files(request, svc)
            if len(docs) != 1:
                raise ApiProblem(422, f"PUT takes exactly one document, the upload holds {len(docs)}",
                                 "validation-error")
        else:
            require_json(media, "application/json ({\"title\": ..., \"text\": ...}) or multipart/form-data "
                                "(one file in field 'files')")
            parsed = await json_body(request, DocumentPut, '{"title": ..., "text": ...}')
            docs = [source_document(parsed, external_id, "text", svc.settings.ingest.max_file_bytes)]
        doc = dataclasses.replace(docs[0], source=external_id, key=external_id)
        result = await run_in_threadpool(submit, svc, key.tenant, [doc], access)
        response.headers["Location"] = result["links"]["job"]
        return result
    return router
