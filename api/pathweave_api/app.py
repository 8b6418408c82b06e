"""The Pathweave HTTP API (FastAPI).

``create_app()`` builds the application from settings (``PATHWEAVE_*``):
ingestion jobs go to the Celery broker when ``PATHWEAVE_BROKER_URL`` is set,
else to an in-process bounded queue running the same task functions.
Every ``/v1`` route needs an API key (``Authorization: Bearer pw_...``) and
sees only the key's tenant. Errors are ``application/problem+json``.

Run: ``pathweave serve`` or ``uvicorn --factory pathweave_api.app:create_app``.
"""

import dataclasses
import json
import logging
import math
import re
import tempfile
import threading
import time
from contextlib import asynccontextmanager
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Path, Query, Request, Response, Security
from fastapi.concurrency import run_in_threadpool
from fastapi.openapi.utils import get_openapi
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import Field, ValidationError, create_model
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from pathweave.citations import cite_result
from pathweave.settings import Settings, get_settings
from pathweave_api import explorer, metrics, problems
from pathweave_api.keys import ApiKey, KeyStore
from pathweave_api.limits import AuthThrottle, BodyLimitMiddleware, KdfBusy, RateLimiter, retry_after_header
from pathweave_api.models import (
    DOC_ID_PATTERN,
    EXTERNAL_ID_PATTERN,
    HEX32_PATTERN,
    TEXT_PATTERN,
    DeleteResponse,
    DocStatus,
    DocumentList,
    DocumentPut,
    DocumentText,
    DocumentsRequest,
    Health,
    JobResponse,
    QueryRequest,
    QueryList,
    QueryResponse,
    Readiness,
    ReasoningRecord,
    SubmitResponse,
    json_int,
)
from pathweave_api.problems import ApiProblem, Problem
from pathweave_api.settings import ApiSettings, get_api_settings
from pathweave_ingest import jobs
from pathweave_ingest.loaders import SUPPORTED, SourceDocument, load_file
from pathweave_ingest.tasks import InProcessQueue, QueueFull, is_transient
from pathweave_ingest.worker_runtime import Runtime
from pathweave_ingest.worker_settings import WorkerSettings, get_worker_settings

log = logging.getLogger("pathweave_api")

API_VERSION = "1.0.0"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


# ---------------------------------------------------------------------------- dispatchers


class CeleryDispatcher:
    """Publishes batches to the broker by task name (the API does not import task code)."""

    mode = "celery"

    def __init__(self, ws: WorkerSettings) -> None:
        from pathweave_ingest.worker import TASK_NAME, make_celery

        self.ws = ws
        self.task_name = TASK_NAME
        self.app = make_celery(ws)

    def check(self, batches: int) -> None:
        """Raise when the broker is unreachable (before anything is written)."""
        with self.app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=3)

    def submit_all(self, tenant: str, job_id: str, batches: list[list[dict]]) -> None:
        for batch in batches:
            self.app.send_task(self.task_name, args=[tenant, job_id, batch], queue=self.ws.queue)

    def depth(self) -> int | None:
        try:
            with self.app.connection_for_read() as conn:
                client = conn.default_channel.client
                return int(client.llen(self.ws.queue))
        except Exception:  # noqa: BLE001 - metrics only
            return None

    def healthy(self) -> bool:
        try:
            self.check(0)
            return True
        except Exception:  # noqa: BLE001
            return False

    def close(self) -> None:
        pass


class LocalDispatcher:
    """The in-process queue (no broker configured)."""

    mode = "inprocess"

    def __init__(self, runtime: Runtime, ws: WorkerSettings) -> None:
        self.queue = InProcessQueue(runtime, ws.inprocess_queue_size, ws.inprocess_workers)

    def check(self, batches: int) -> None:
        if self.queue.free() < batches:
            raise QueueFull(f"the ingestion queue is full ({self.queue.depth} of {self.queue.maxsize} "
                            f"batches waiting); retry later")

    def submit_all(self, tenant: str, job_id: str, batches: list[list[dict]]) -> None:
        self.queue.submit_all(tenant, job_id, batches)

    def depth(self) -> int | None:
        return self.queue.depth

    def healthy(self) -> bool | None:
        return None

    def close(self) -> None:
        self.queue.close()


# ---------------------------------------------------------------------------- services


class Services:
    """Everything the routes share; one per app."""

    def __init__(self, settings: Settings, api: ApiSettings, ws: WorkerSettings, runtime: Runtime,
                 keys: KeyStore, owns_runtime: bool) -> None:
        self.settings = settings
        self.api = api
        self.ws = ws
        self.runtime = runtime
        self.keys = keys
        self.owns_runtime = owns_runtime
        self.limiter = RateLimiter()
        self.auth_throttle = AuthThrottle(api.api_auth_failures_per_key, api.api_auth_failures_per_address,
                                          api.api_auth_failure_window_s, api.api_auth_max_concurrent_kdf)
        self._dispatcher = None
        self._lock = threading.Lock()
        self.warm_error: str | None = None
        self._warm_thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def dispatcher(self):
        with self._lock:
            if self._dispatcher is None:
                self._dispatcher = CeleryDispatcher(self.ws) if self.ws.broker_url else LocalDispatcher(
                    self.runtime, self.ws)
            return self._dispatcher

    def start(self) -> None:
        _ = self.dispatcher
        if self.api.api_preload:
            self._warm_thread = threading.Thread(target=self._warm, name="pathweave-warm", daemon=True)
            self._warm_thread.start()

    @property
    def needs_extractor(self) -> bool:
        """Ingestion runs in this process (no broker): the extractor must be loaded too."""
        return not self.ws.broker_url

    def _warm(self) -> None:
        """Connect and load the models; retried with backoff (e.g. while the store starts,
        or when another process creates the schema at the same moment)."""
        delay = 1.0
        while not self._stopping.is_set():
            try:
                self.runtime.warm(extractor=self.needs_extractor)
                self.warm_error = None
                return
            except Exception as exc:  # noqa: BLE001 - reported by /readyz, retried
                self.warm_error = f"{type(exc).__name__}: {str(exc)[:300]}"
                log.warning("warm-up failed (retrying in %.0f s): %s", delay, self.warm_error)
                self.runtime.reset()
                self._stopping.wait(delay)
                delay = min(30.0, delay * 2)

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            dispatcher, self._dispatcher = self._dispatcher, None
        if dispatcher is not None:
            dispatcher.close()
        if self.owns_runtime:
            self.runtime.close()

    def store(self, tenant: str):
        try:
            return self.runtime.store(tenant)
        except Exception as exc:
            raise _unavailable(exc) from exc


def _unavailable(exc: BaseException) -> ApiProblem:
    log.warning("store unavailable: %s: %s", type(exc).__name__, exc)
    return ApiProblem(503, "the store is unavailable; retry later", "store-unavailable", {"Retry-After": "5"})


def _guard(fn, *args, **kwargs):
    """Run a store call; transient store errors become 503 problems."""
    try:
        return fn(*args, **kwargs)
    except ApiProblem:
        raise
    except Exception as exc:
        if is_transient(exc):
            raise _unavailable(exc) from exc
        raise


def _media_type(request: Request) -> str:
    """The request's media type, lower case, without parameters ('' when absent)."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _multipart_terminated(content_type: str, body: bytes) -> bool:
    """Does a multipart ``body`` end with its close delimiter (``--boundary--``)? A body cut
    off mid-part parses without error but is a truncated upload."""
    match = re.search(r'boundary="?([^";]+)"?', content_type, re.IGNORECASE)
    if not match:
        return True  # no boundary: the parser reports it
    close = b"--" + match.group(1).encode("latin-1") + b"--"
    return body.startswith(close) or (b"\r\n" + close) in body or (b"\n" + close) in body


def _enrich_record(store, record: dict) -> dict:
    """Add what the explorer draws to a stored record: the text of each selected node, and
    the passages (with their documents) stating the paths' propositions or selected."""
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
        found = {r["passage_id"]: r for r in store.run("api_passages_get", ids=passage_ids)}
        for pid in passage_ids:
            if pid in found:
                passages.append({**found[pid], "states": sorted(states.get(pid, []))})
                texts[pid] = found[pid]["text"]
    return {**record, "selected": [{**row, "text": texts.get(row.get("id"))} for row in selected],
            "passages": passages}


# ---------------------------------------------------------------------------- responses

_ERR = {"model": Problem}
_AUTH_ERRORS = {401: {**_ERR, "description": "Missing, invalid or revoked API key."},
                429: {**_ERR, "description": "Rate limit of the API key exceeded (see Retry-After)."},
                503: {**_ERR, "description": "Store, broker or (to answer) LLM unavailable; retry later."}}


def _errors(*codes: int) -> dict[int, dict]:
    text = {400: "Malformed request (empty body, malformed JSON, not UTF-8).",
            404: "Unknown id for this tenant.", 409: "Conflict with the resource's state.",
            413: "Body or document over the size limit.", 415: "Unsupported content type.",
            422: "Invalid request: see `errors`."}
    return {**_AUTH_ERRORS, **{code: {**_ERR, "description": text[code]} for code in codes}}


# ---------------------------------------------------------------------------- the app


def create_app(settings: Settings | None = None, api_settings: ApiSettings | None = None,
               worker_settings: WorkerSettings | None = None, runtime: Runtime | None = None,
               keys: KeyStore | None = None) -> FastAPI:
    """The API application (all arguments default to the process settings)."""
    settings = settings or get_settings()
    api = api_settings or get_api_settings()
    ws = worker_settings or get_worker_settings()
    owns_runtime = runtime is None
    runtime = runtime or Runtime(settings, ws)
    keys = keys or api.key_store(settings.data_dir)
    svc = Services(settings, api, ws, runtime, keys, owns_runtime)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        svc.start()
        try:
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
        docs_url="/docs" if api.api_docs else None,
        redoc_url="/redoc" if api.api_docs else None,
        openapi_tags=[
            {"name": "documents", "description": "Ingestion jobs and the tenant's documents."},
            {"name": "query", "description": "Retrieval and reasoning records."},
            {"name": "operations", "description": "Health, readiness and metrics (no key needed)."},
        ],
    )
    app.state.services = svc
    problems.install(app)

    def body_limit(method: str, path: str) -> int:
        if (method == "POST" and path.rstrip("/") == "/v1/documents") or \
                (method == "PUT" and path.startswith("/v1/documents/")):
            return api.api_max_body_bytes
        return api.api_max_small_body_bytes

    app.add_middleware(BodyLimitMiddleware, limit_for=body_limit)
    app.add_middleware(metrics.MetricsMiddleware)

    bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer pw_<id>_<secret>`.")

    def too_many(detail: str, kind: str, wait: float) -> ApiProblem:
        """429 whose detail names the same whole seconds as its ``Retry-After``."""
        seconds = retry_after_header(wait)
        return ApiProblem(429, f"{detail}; retry in {seconds} s", kind, {"Retry-After": seconds})

    def principal(request: Request,
                  creds: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)]) -> ApiKey:
        if creds is None or not creds.credentials:
            metrics.AUTH_FAILURES.inc()
            raise ApiProblem(401, "missing API key: send 'Authorization: Bearer <key>'", "missing-api-key",
                             {"WWW-Authenticate": "Bearer"})
        token = creds.credentials.strip()
        key_id = KeyStore.key_id_of(token)
        address = request.client.host if request.client else None
        if not svc.keys.is_verified(token):  # a token verified lately is never throttled
            wait = svc.auth_throttle.wait(key_id, address)
            if wait > 0:
                metrics.RATE_LIMITED.inc()
                raise too_many("too many failed authentication attempts for this key or client", "auth-throttled",
                               wait)
        try:
            key = svc.keys.authenticate(token, kdf_slot=svc.auth_throttle.kdf_slot)
        except KdfBusy:
            metrics.RATE_LIMITED.inc()
            raise too_many("too many API keys being verified at once", "auth-busy", 1.0) from None
        if key is None:
            metrics.AUTH_FAILURES.inc()
            svc.auth_throttle.failed(key_id, address)
            raise ApiProblem(401, "invalid or revoked API key", "invalid-api-key",
                             {"WWW-Authenticate": 'Bearer error="invalid_token"'})
        rate = api.api_rate_limit_per_s if key.rate_limit_per_s is None else key.rate_limit_per_s
        wait = svc.limiter.acquire(key.key_id, rate, api.api_rate_limit_burst)
        if wait > 0:
            metrics.RATE_LIMITED.inc()
            raise too_many(f"rate limit exceeded ({rate:g} requests/s)", "rate-limited", wait)
        return key

    Principal = Annotated[ApiKey, Depends(principal)]

    # ------------------------------------------------------------------ documents

    def require_json(media: str, what: str) -> None:
        """415 unless ``media`` is JSON; ``what`` says what to send instead."""
        if media != "application/json" and not media.endswith("+json"):
            raise ApiProblem(415, f"unsupported content type {media or '(none)'!r}: send {what}",
                             "unsupported-media-type")

    async def json_body(request: Request, model, example: str) -> Any:
        """Parse and validate a JSON body: 415/400/422 problems with a clear message."""
        require_json(_media_type(request), f"application/json ({example})")
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

    async def read_documents(request: Request) -> list[SourceDocument]:
        media = _media_type(request)
        if media == "multipart/form-data":
            return await read_files(request)
        require_json(media, "application/json ({\"documents\": [...]}) or multipart/form-data (field 'files')")
        parsed = await json_body(request, DocumentsRequest, '{"documents": [{"title": ..., "text": ...}]}')
        if len(parsed.documents) > api.api_max_documents:
            raise ApiProblem(422, f"too many documents ({len(parsed.documents)} > {api.api_max_documents} "
                                  "per request); split the submission", "too-many-documents")
        docs = []
        for index, doc in enumerate(parsed.documents):
            size = len(doc.text.encode("utf-8"))
            if size > settings.max_file_bytes:
                raise ApiProblem(413, f"documents[{index}] text is {size} bytes > limit {settings.max_file_bytes}",
                                 "document-too-large")
            title = doc.title.strip()
            docs.append(SourceDocument(doc.source or f"api:{title or 'untitled'}#{index}", title, doc.text.strip()))
        return docs

    async def read_files(request: Request) -> list[SourceDocument]:
        await request.body()  # the whole body (within the limit), so it can be checked after parsing
        try:
            form = await request.form(max_files=api.api_max_documents, max_fields=api.api_max_documents + 10,
                                      max_part_size=min(settings.max_file_bytes, api.api_max_body_bytes))
        except StarletteHTTPException as exc:  # the multipart parser's errors (Starlette answers 400)
            message = str(exc.detail)
            if message.startswith(("Too many files", "Too many fields")):
                raise ApiProblem(422, f"too many files or form fields (more than {api.api_max_documents} "
                                      "per request); split the submission", "too-many-documents") from None
            raise ApiProblem(400, f"malformed multipart body: {message[:200]}", "malformed-multipart") from None
        if not _multipart_terminated(request.headers.get("content-type", ""), await request.body()):
            await form.close()
            raise ApiProblem(400, "malformed multipart body: the closing boundary is missing (truncated upload?)",
                             "malformed-multipart")
        try:
            uploads: list[UploadFile] = []
            for name, value in form.multi_items():
                if name not in ("files", "file"):
                    raise ApiProblem(422, f"unknown form field {name[:100]!r}: send documents as files in "
                                          "field 'files'", "validation-error")
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
                    data = await upload.read(settings.max_file_bytes + 1)
                    path = FilePath(tmp) / str(index) / safe  # the loader titles .txt files by name
                    path.parent.mkdir()
                    path.write_bytes(data)
                    found, errors = await run_in_threadpool(load_file, path, settings.max_file_bytes)
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
            if len(docs) > api.api_max_documents:
                raise ApiProblem(422, f"too many documents ({len(docs)} > {api.api_max_documents} per request)",
                                 "too-many-documents")
            return docs
        finally:
            await form.close()

    def submit(tenant: str, docs: list[SourceDocument]) -> dict[str, Any]:
        payloads = jobs.payloads(tenant, docs)
        batch_size = ws.batch_size(runtime.device)
        dispatcher = svc.dispatcher
        try:
            dispatcher.check(math.ceil(len(payloads) / batch_size))
        except QueueFull as exc:
            raise too_many(str(exc).removesuffix("; retry later"), "queue-full", 10.0) from None
        except Exception as exc:  # noqa: BLE001
            log.warning("broker unavailable: %s", exc)
            raise ApiProblem(503, "the job queue (broker) is unavailable; retry later", "broker-unavailable",
                             {"Retry-After": "10"}) from None
        store = svc.store(tenant)
        job_id = jobs.new_job_id()
        sub = _guard(jobs.create_job, store, job_id, payloads, batch_size, dispatcher.mode)
        batches = jobs.batches_of(sub.to_enqueue, batch_size)
        try:
            dispatcher.submit_all(tenant, job_id, batches)
        except Exception as exc:  # noqa: BLE001
            full = isinstance(exc, QueueFull)
            reason = str(exc) if full else "the job queue (broker) is unavailable"
            _guard(jobs.mark_failed, store, [d["doc_id"] for d in sub.to_enqueue], f"not enqueued: {reason}")
            if full:
                raise too_many(reason, "queue-full", 10.0) from None
            raise ApiProblem(503, f"{reason}; retry later", "broker-unavailable", {"Retry-After": "10"}) from None
        metrics.DOCUMENTS_SUBMITTED.inc(len(payloads))
        metrics.BATCHES_ENQUEUED.labels(dispatcher.mode).inc(len(batches))
        done, in_flight = set(sub.already_done), set(sub.in_flight)
        status = "running" if in_flight else ("queued" if sub.to_enqueue else "done")
        return {
            "job_id": job_id, "status": status, "total": len(payloads),
            "enqueued": len(sub.to_enqueue), "already_ingested": len(done), "in_flight": len(in_flight),
            "batches": len(batches), "queue": dispatcher.mode,
            "documents": [{"doc_id": p["doc_id"], "title": p["title"], "source": p["source"],
                           "status": "done" if p["doc_id"] in done else
                           ("running" if p["doc_id"] in in_flight else "queued")} for p in payloads],
            "links": {"job": f"/v1/jobs/{job_id}"},
        }

    files_schema = {"type": "object", "required": ["files"], "properties": {"files": {
        "type": "array", "items": {"type": "string", "format": "binary"}, "minItems": 1,
        "maxItems": api.api_max_documents,
        "description": "Files: .txt, .md, .pdf (text per page), .html/.htm (main content), .docx (headings as "
                       "sections): one document each; .json (a list of {title, text}), .jsonl."}}}
    put_file_schema = {"type": "object", "required": ["files"], "properties": {"files": {
        "type": "array", "items": {"type": "string", "format": "binary"}, "minItems": 1, "maxItems": 1,
        "description": "One file: .txt, .md, .pdf, .html/.htm, .docx (or a .json/.jsonl with one item)."}}}

    @app.post(
        "/v1/documents", status_code=202, response_model=SubmitResponse, tags=["documents"],
        summary="Submit documents for ingestion",
        description=(
            "Validates every document first (empty, binary, not UTF-8, too large, malformed JSON: 4xx and nothing "
            "is written), then creates a job and enqueues its batches. Answers 202 with the job id "
            "(`Location: /v1/jobs/{id}`). Documents already ingested (same title and text) are `done` at once. "
            "Files: .txt, .md, .pdf, .html/.htm, .docx, .json, .jsonl; an encrypted, corrupt or image-only PDF, "
            "HTML without main content or a .docx that is not a Word file is rejected (422, nothing written)."),
        responses=_errors(400, 413, 415, 422),
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentsRequest"},
                                 "examples": {"one": {"summary": "One document", "value": {"documents": [{
                                     "title": "Marie Curie", "text": "Marie Curie was born in Warsaw.",
                                     "source": "wiki/marie-curie.md"}]}}}},
            "multipart/form-data": {"schema": files_schema},
        }}},
    )
    async def submit_documents(request: Request, response: Response, key: Principal) -> dict[str, Any]:
        docs = await read_documents(request)
        result = await run_in_threadpool(submit, key.tenant, docs)
        response.headers["Location"] = result["links"]["job"]
        return result

    @app.get("/v1/jobs/{job_id}", response_model=JobResponse, tags=["documents"], summary="A job's progress",
             responses=_errors(404, 422))
    def get_job(key: Principal, job_id: Annotated[str, Path(pattern=HEX32_PATTERN, description="Job id.",
                                                            examples=["8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60"])]):
        job = _guard(jobs.job_status, svc.store(key.tenant), job_id)
        if job is None:
            raise ApiProblem(404, f"no job {job_id} for this tenant", "not-found")
        return job

    @app.get("/v1/documents", response_model=DocumentList, tags=["documents"], summary="The tenant's documents",
             description="Ingested and in-flight documents with status, counts and timings; newest first.",
             responses=_errors(422))
    def list_documents(
        request: Request,
        key: Principal,
        status: Annotated[DocStatus | None, Query(description="Only documents in this state.")] = None,
        limit: Annotated[int, Query(ge=1, le=api.api_max_page)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000_000)] = 0,
    ):
        unknown = sorted(set(request.query_params) - {"status", "limit", "offset"})
        if unknown:
            raise ApiProblem(422, f"unknown query parameter(s): {', '.join(repr(u[:50]) for u in unknown[:5])}; "
                                  "use status, limit, offset", "validation-error")
        page, total = _guard(jobs.list_documents, svc.store(key.tenant), status, limit, offset)
        return {"documents": page, "total": total, "limit": limit, "offset": offset}

    @app.get("/v1/documents/{doc_id}", response_model=DocumentText, tags=["documents"],
             summary="A document and its passages", description="An ingested document with its passages' text "
             "in reading order (the reasoning explorer links passages to it).", responses=_errors(404, 422))
    def get_document(key: Principal, doc_id: Annotated[str, Path(pattern=DOC_ID_PATTERN, examples=[
            "doc:3f1c2a9d8e7b6c5a4f3e2d1c"])]):
        store = svc.store(key.tenant)
        rows = _guard(store.run, "api_document_get", doc_id=doc_id)
        if not rows:
            raise ApiProblem(404, f"no document {doc_id} for this tenant", "not-found")
        passages = sorted((r for r in rows if r["passage_id"] is not None),
                          key=lambda r: (r["position"] is None, r["position"] or 0, r["passage_id"]))
        first = rows[0]
        return {"doc_id": doc_id, "title": first["title"], "source": first["source"],
                "ingested_at": first["ingested_at"],
                "passages": [{"passage_id": r["passage_id"], "position": r["position"], "text": r["text"]}
                             for r in passages]}

    @app.delete(
        "/v1/documents/{doc_id}", response_model=DeleteResponse, tags=["documents"], summary="Delete a document",
        description=("Removes the document, its passages (unless another document shares them), the propositions "
                     "and triples only it states/asserts, and entities nothing else mentions (shared entities "
                     "stay; alias groups stay consistent). 409 while the document is queued or running."),
        responses=_errors(404, 409, 422))
    def delete_document(key: Principal, doc_id: Annotated[str, Path(pattern=DOC_ID_PATTERN, examples=[
            "doc:3f1c2a9d8e7b6c5a4f3e2d1c"])]):
        try:
            result = _guard(jobs.delete_document, svc.store(key.tenant), doc_id)
        except jobs.DocumentBusy as exc:
            raise ApiProblem(409, str(exc), "document-busy") from None
        if result is None:
            raise ApiProblem(404, f"no document {doc_id} for this tenant", "not-found")
        return result

    @app.put(
        "/v1/documents/{external_id}", status_code=202, response_model=SubmitResponse, tags=["documents"],
        summary="Create or replace the document with this external id",
        description=(
            "The document's identity is the tenant + `external_id` (its id is answered in `documents[0].doc_id`). "
            "Unchanged content (same content hash) changes nothing (`done` at once); changed content replaces the "
            "stored version in one step: its passages, propositions, triples and orphaned entities are removed as "
            "`DELETE /v1/documents/{id}` removes them, the new version is written, the graph version is bumped once. "
            "Body: JSON `{title, text}` or `multipart/form-data` with one file in field `files` "
            "(.txt, .md, .pdf, .html/.htm, .docx). Answers 202 with the job (`Location: /v1/jobs/{id}`)."),
        responses=_errors(400, 413, 415, 422),
        openapi_extra={"requestBody": {"required": True, "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/DocumentPut"},
                                 "examples": {"one": {"summary": "A policy page", "value": {
                                     "title": "Travel policy", "text": "Trips to Lyon need approval."}}}},
            "multipart/form-data": {"schema": put_file_schema},
        }}},
    )
    async def put_document(request: Request, response: Response, key: Principal, external_id: Annotated[
            str, Path(pattern=EXTERNAL_ID_PATTERN, description="The caller's id of the document (its source).",
                      examples=["policies:travel-2024"])]) -> dict[str, Any]:
        media = _media_type(request)
        if media == "multipart/form-data":
            docs = await read_files(request)
            if len(docs) != 1:
                raise ApiProblem(422, f"PUT takes exactly one document, the upload holds {len(docs)}",
                                 "validation-error")
        else:
            require_json(media, "application/json ({\"title\": ..., \"text\": ...}) or multipart/form-data "
                                "(one file in field 'files')")
            parsed = await json_body(request, DocumentPut, '{"title": ..., "text": ...}')
            size = len(parsed.text.encode("utf-8"))
            if size > settings.max_file_bytes:
                raise ApiProblem(413, f"text is {size} bytes > limit {settings.max_file_bytes}", "document-too-large")
            docs = [SourceDocument(external_id, parsed.title.strip(), parsed.text.strip())]
        doc = dataclasses.replace(docs[0], source=external_id, key=external_id)
        result = await run_in_threadpool(submit, key.tenant, [doc])
        response.headers["Location"] = result["links"]["job"]
        return result

    # ------------------------------------------------------------------ query

    QueryBody = create_model(
        "QueryRequest", __base__=QueryRequest,
        question=(str, Field(..., min_length=1, max_length=api.api_max_question_chars,
                             json_schema_extra={"pattern": TEXT_PATTERN},
                             description="The question (plain text): at least one visible character, no NUL.")),
        k=(json_int(1, api.api_max_k), Field(5, description="Passages to return.")),
        token_budget=(json_int(api.api_min_token_budget, api.api_max_token_budget) | None,
                      Field(None, description="Context token budget (optional).")),
    )

    def answer(tenant: str, req: QueryRequest) -> dict[str, Any]:
        retriever = _guard(runtime.retriever, tenant)
        started = time.perf_counter()
        from pathweave.answering import answer_query
        from pathweave.llm.client import LLMError
        from pathweave.llm.server import LLMServerError

        try:
            if req.answer or req.mode == "prunerag":  # a PruneRAG tree has no budgeted context (see the note)
                result = _guard(answer_query, retriever, req.question, req.mode, req.k,
                                None if req.mode == "prunerag" else req.token_budget, req.selection_method,
                                req.context_style)
            else:
                result = _guard(retriever.query, req.question, mode=req.mode, k=req.k, token_budget=req.token_budget,
                                select=req.selection_method, style=req.context_style)
        except ValueError as exc:
            raise ApiProblem(422, str(exc), "validation-error") from None
        except (LLMError, LLMServerError) as exc:  # no model at all (the extra missing, the server not starting)
            raise ApiProblem(503, f"no LLM to answer with: {exc}", "llm-unavailable", {"Retry-After": "30"}) from None
        metrics.QUERY_SECONDS.labels(req.mode).observe(time.perf_counter() - started)
        metrics.QUERIES.labels(req.mode).inc()
        store = retriever.store
        _guard(cite_result, store, result)  # page / section citations ("title, p. N", "title > section")
        marker = {hit.passage_id: hit.rank for hit in result.passages}
        doc_ids = sorted({hit.doc_id for hit in result.passages if hit.doc_id})
        sources = {r["doc_id"]: r["source"] for r in _guard(store.run, "api_document_sources", ids=doc_ids)} \
            if doc_ids else {}
        prop_ids = sorted({step.prop_id for path in result.paths for step in path.steps})
        stating: dict[str, list[int]] = {}
        if prop_ids and marker:
            for row in _guard(store.run, "api_passages_stating", prop_ids=prop_ids, passage_ids=list(marker)):
                stating.setdefault(row["prop_id"], []).append(marker[row["passage_id"]])
        note = None
        if req.token_budget is not None and req.mode == "prunerag":
            note = "token_budget does not apply to mode prunerag (its nodes answer from their top passages)"
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
            "links": {"record": f"/v1/queries/{result.query_id}"},
        }

    @app.post("/v1/query", response_model=QueryResponse, tags=["query"], summary="Ask a question",
              description=("Ranked passages with citations, the proposition paths connecting them (proprag) and "
                           "the id of the stored reasoning record."),
              responses=_errors(400, 413, 415, 422),
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                  "schema": {"$ref": "#/components/schemas/QueryRequest"},
                  "examples": {
                      "proprag": {"summary": "Multi-hop question", "value": {
                          "question": "Where was the physicist who won the 1903 Nobel Prize born?", "mode": "proprag",
                          "k": 5}},
                      "budget": {"summary": "With a token budget", "value": {
                          "question": "Which river flows through the capital of Poland?", "mode": "dense", "k": 3,
                          "token_budget": 512}}}}}}})
    async def query(request: Request, key: Principal):
        req = await json_body(request, QueryBody, '{"question": "...", "mode": "proprag", "k": 5}')
        return await run_in_threadpool(answer, key.tenant, req)

    @app.get("/v1/queries/{query_id}", response_model=ReasoningRecord, tags=["query"],
             summary="A query's reasoning record", responses=_errors(404, 422))
    def get_record(key: Principal, query_id: Annotated[str, Path(pattern=HEX32_PATTERN, examples=[
            "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0"])]):
        from pathweave.reasoning import read_reasoning_record

        _guard(svc.runtime.retriever, key.tenant).flush()  # records are written off the query path
        store = svc.store(key.tenant)
        rows = _guard(store.run, "api_query_get", query_id=query_id)
        if not rows:
            raise ApiProblem(404, f"no reasoning record {query_id} for this tenant", "not-found")
        try:
            record = _guard(read_reasoning_record, store, query_id)
        except KeyError:
            record = {"query_id": query_id, "paths": [], "selected": []}
        record = _guard(_enrich_record, store, record)
        return {**record, "text": rows[0]["text"], "mode": rows[0]["mode"], "created_at": rows[0]["created_at"]}

    @app.get("/v1/queries", response_model=QueryList, tags=["query"], summary="The tenant's reasoning records",
             description="The tenant's queries (their reasoning records), newest first.", responses=_errors(422))
    def list_queries(request: Request, key: Principal,
                     limit: Annotated[int, Query(ge=1, le=api.api_max_page)] = 50):
        unknown = sorted(set(request.query_params) - {"limit"})
        if unknown:
            raise ApiProblem(422, f"unknown query parameter(s): {', '.join(repr(u[:50]) for u in unknown[:5])}; "
                                  "use limit", "validation-error")
        _guard(svc.runtime.retriever, key.tenant).flush()  # records are written off the query path
        rows = _guard(svc.store(key.tenant).run, "api_queries_recent", limit=limit)
        return {"queries": rows[:limit], "limit": limit}

    # ------------------------------------------------------------------ operations

    @app.get("/healthz", response_model=Health, tags=["operations"], summary="Liveness (the process answers)")
    def healthz():
        return {"status": "ok"}

    @app.get("/readyz", response_model=Readiness, tags=["operations"],
             summary="Readiness: the store answers, the models are loaded, the broker (if any) is reachable",
             responses={503: {"model": Readiness, "description": "Not ready (yet)."}})
    def readyz(response: Response):
        base = runtime.connected
        store_ok = False
        detail = svc.warm_error
        if base is not None:
            try:
                base.run("ping")
                store_ok = True
            except Exception as exc:  # noqa: BLE001
                runtime.reset()
                detail = f"store: {type(exc).__name__}"
        elif detail is None:
            detail = "starting: connecting to the store and loading the models"
        dispatcher = svc.dispatcher
        broker = dispatcher.healthy()
        models = runtime.models_loaded(extractor=svc.needs_extractor)
        ready = store_ok and models and broker is not False
        metrics.READY.set(1 if ready else 0)
        if not ready:
            response.status_code = 503
        if broker is False and detail is None:
            detail = "broker unreachable"
        return {"status": "ready" if ready else "unavailable", "store": store_ok, "models": models,
                "queue": dispatcher.mode, "broker": broker, "detail": None if ready else detail}

    @app.get("/metrics", tags=["operations"], summary="Prometheus metrics",
             response_class=Response,
             responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                              "description": "Prometheus text format."}})
    def prometheus_metrics():
        depth = svc.dispatcher.depth()
        if depth is not None:
            metrics.QUEUE_DEPTH.set(depth)
        content, media_type = metrics.render()
        return Response(content, media_type=media_type)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes,
                             tags=app.openapi_tags)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        doc_schema = DocumentsRequest.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, definition in doc_schema.pop("$defs", {}).items():
            components.setdefault(name, definition)
        doc_schema["properties"]["documents"]["maxItems"] = api.api_max_documents
        components["DocumentsRequest"] = doc_schema
        components["DocumentPut"] = DocumentPut.model_json_schema(ref_template="#/components/schemas/{model}")
        components["QueryRequest"] = QueryBody.model_json_schema(ref_template="#/components/schemas/{model}")
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
    app.openapi = openapi  # type: ignore[method-assign]
    return app
