"""Request bodies of ``/v1``: JSON parsed and validated with clear 400/415/422 problems,
documents as JSON or multipart file uploads (checked, loaded and rejected as a whole)."""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path as FilePath
from typing import Any

from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from pathweave.access import check_principals
from pathweave.errors import BadRequest
from pathweave_api import problems
from pathweave_api.models import DocumentContent, DocumentsRequest
from pathweave_api.problems import ApiProblem
from pathweave_api.services import Services
from pathweave_ingest.loaders import SUPPORTED, SourceDocument, load_file

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def media_type(request: Request) -> str:
    """The request's media type, lower case, without parameters ('' when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def multipart_terminated(content_type: str, body: bytes) -> bool:
    """Does a multipart ``body`` end with its close delimiter (``--boundary--``)? A body cut
    off mid-part parses without error but is a truncated upload."""
    match = re.search(r'boundary="?([^";]+)"?', content_type, re.IGNORECASE)
    if not match:
        return True  # no boundary: the parser reports it
    close = b"--" + match.group(1).encode("latin-1") + b"--"
    return body.startswith(close) or (b"\r\n" + close) in body or (b"\n" + close) in body



def require_json(media: str, what: str) -> None:
    """415 unless ``media`` is JSON; ``what`` says what to send instead."""
    if media != "application/json" and not media.endswith("+json"):
        raise ApiProblem(415, f"unsupported content type {media or '(none)'!r}: send {what}",
                         "unsupported-media-type")

async def json_body(request: Request, model, example: str) -> Any:
    """Parse and validate a JSON body: 415/400/422 problems with a clear message."""
    require_json(media_type(request), f"application/json ({example})")
    raw = await request.body()
    if not raw.strip():
        raise ApiProblem(400, f"empty body: send {example}", "empty-body")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiProblem(400, f"body is not valid UTF-8 (invalid byte at offset {exc.start})",
                         "not-utf8") from None
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
        raise ApiProblem(400, f"malformed JSON body: {message}{where}", "malformed-json") from None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = problems._clean_errors([{**e, "loc": ("body", *e["loc"])} for e in exc.errors()])
        summary = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5])
        raise ApiProblem(422, f"invalid request: {summary}", "validation-error", errors=errors) from None

async def read_documents(request: Request, svc: Services) -> list[SourceDocument]:
    """The documents of a ``POST /v1/documents`` body (JSON or multipart files)."""
    media = media_type(request)
    if media == "multipart/form-data":
        return await read_files(request, svc)
    require_json(media, "application/json ({\"documents\": [...]}) or multipart/form-data (field 'files')")
    parsed = await json_body(request, DocumentsRequest, '{"documents": [{"title": ..., "text": ...}]}')
    return source_documents(parsed, svc)


def source_documents(parsed: DocumentsRequest, svc: Services) -> list[SourceDocument]:
    """The documents of a validated ``DocumentsRequest`` (a JSON body, or the MCP tool
    ``ingest_text``): 422 ``too-many-documents`` over ``api.max_documents``, 413
    ``document-too-large`` for a text over ``ingest.max_file_bytes`` (UTF-8 bytes)."""
    api, settings = svc.api, svc.settings
    if len(parsed.documents) > api.max_documents:
        raise ApiProblem(422, f"too many documents ({len(parsed.documents)} > {api.max_documents} "
                              "per request); split the submission", "too-many-documents")
    return [source_document(doc, doc.source or f"api:{doc.title.strip() or 'untitled'}#{index}",
                            f"documents[{index}] text", settings.ingest.max_file_bytes)
            for index, doc in enumerate(parsed.documents)]


def source_document(doc: DocumentContent, source: str, what: str, max_bytes: int) -> SourceDocument:
    """The document a validated ``doc`` (POST's or PUT's) describes, from ``source``, its
    title and text stripped: 413 ``document-too-large`` (naming ``what``) when its text is
    over ``max_bytes`` UTF-8 bytes."""
    size = len(doc.text.encode("utf-8"))
    if size > max_bytes:
        raise ApiProblem(413, f"{what} is {size} bytes > limit {max_bytes}", "document-too-large")
    return SourceDocument(source, doc.title.strip(), doc.text.strip(), acl=None if doc.acl is None else tuple(doc.acl))

async def read_files(request: Request, svc: Services) -> list[SourceDocument]:
    """The documents of a multipart body's files (field ``files``), each with the access list
    of text field ``acl`` when one is sent (principals, repeated or comma-separated; an
    empty value: only callers without principals): 422 listing every rejected file or item,
    or naming a malformed principal, nothing ingested then."""
    api, settings = svc.api, svc.settings
    await request.body()  # the whole body (within the limit), so it can be checked after parsing
    try:
        form = await request.form(max_files=api.max_documents, max_fields=api.max_documents + 10,
                                  max_part_size=min(settings.ingest.max_file_bytes, api.max_body_bytes))
    except StarletteHTTPException as exc:  # the multipart parser's errors (Starlette answers 400)
        message = str(exc.detail)
        if message.startswith(("Too many files", "Too many fields")):
            raise ApiProblem(422, f"too many files or form fields (more than {api.max_documents} "
                                  "per request); split the submission", "too-many-documents") from None
        raise ApiProblem(400, f"malformed multipart body: {message[:200]}", "malformed-multipart") from None
    if not multipart_terminated(request.headers.get("content-type", ""), await request.body()):
        await form.close()
        raise ApiProblem(400, "malformed multipart body: the closing boundary is missing (truncated upload?)",
                         "malformed-multipart")
    try:
        uploads: list[UploadFile] = []
        acl: list[str] | None = None
        for name, value in form.multi_items():
            if name == "acl" and isinstance(value, str):  # the files' access list: repeated or comma-separated
                acl = (acl or []) + [v for v in (part.strip() for part in value.split(",")) if v]
                continue
            if name not in ("files", "file"):
                raise ApiProblem(422, f"unknown form field {name[:100]!r}: send documents as files in "
                                      "field 'files' (and their access list in field 'acl')", "validation-error")
            if not isinstance(value, UploadFile):
                raise ApiProblem(422, f"form field {name!r} must be a file upload, not a text value",
                                 "validation-error")
            uploads.append(value)
        if not uploads:
            raise ApiProblem(422, f"no files: send one or more files ({', '.join(SUPPORTED)}) in form field "
                                  "'files'", "no-files")
        docs: list[SourceDocument] = []
        rejected: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="pathweave-upload-") as tmp:
            for index, upload in enumerate(uploads):
                original = FilePath(upload.filename or "").name or f"upload-{index}"
                safe = _SAFE_NAME.sub("_", original)[:120] or f"upload-{index}"
                suffix = FilePath(safe).suffix.lower()
                if suffix not in SUPPORTED:
                    rejected.append({"loc": ["files", index], "type": "unsupported_file",
                                     "msg": f"{original[:200]}: unsupported file type {suffix or '(none)'}; "
                                            f"use {', '.join(SUPPORTED)}"})
                    continue
                data = await upload.read(settings.ingest.max_file_bytes + 1)
                path = FilePath(tmp) / str(index) / safe  # the loader titles .txt files by name
                path.parent.mkdir()
                path.write_bytes(data)
                found, errors = await run_in_threadpool(load_file, path, settings.ingest.max_file_bytes)
                prefix = str(path)
                for error in errors:
                    rejected.append({"loc": ["files", index], "type": "invalid_file",
                                     "msg": f"{original[:200]}{error.source[len(prefix):]}: {error.reason}"})
                # uploads keep content identity (no stable source); PUT gives one
                docs.extend(dataclasses.replace(d, source=f"upload:{original[:200]}{d.source[len(prefix):]}",
                                                key=None) for d in found)
        if rejected:
            summary = "; ".join(e["msg"] for e in rejected[:5])
            raise ApiProblem(422, f"{len(rejected)} file(s) or item(s) rejected, nothing was ingested: {summary}",
                             "invalid-files", errors=rejected)
        if len(docs) > api.max_documents:
            raise ApiProblem(422, f"too many documents ({len(docs)} > {api.max_documents} per request)",
                             "too-many-documents")
        if acl is not None:
            try:
                checked = check_principals(acl, "acl")
            except BadRequest as exc:
                raise ApiProblem(422, str(exc), "validation-error") from None
            docs = [dataclasses.replace(d, acl=checked) for d in docs]
        return docs
    finally:
        await form.close()
