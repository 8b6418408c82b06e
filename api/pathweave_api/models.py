"""Request and response models of the API (pydantic), with OpenAPI examples."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints, field_validator

from pathweave.model import (RECORD_STATE, Answer, AprContext, BudgetedContext, Mode, PassageHit, PruneTree,
                             QueryResult, ReasoningPath, RecordState, SeedEntity)
from pathweave.retrieval.request import QueryRequest
from pathweave.access import PRINCIPAL_PATTERN
from pathweave.text import INVISIBLE_CLASS, has_visible_text

DOC_ID_PATTERN = r"^doc:[0-9a-f]{24}$"
HEX32_PATTERN = r"^[0-9a-f]{32}$"
EXTERNAL_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$"

DocStatus = Literal["queued", "running", "done", "failed"]
JobState = Literal["queued", "running", "done", "done_with_errors", "failed"]

# What the validators below check, as JSON Schema patterns (so generated clients and
# property-based tests see the same rules): no NUL anywhere, at least one visible character.
TEXT_PATTERN = f"^[^\\x00]*[^{INVISIBLE_CLASS}][^\\x00]*$"
NO_NUL_PATTERN = "^[^\\x00]*$"



def _json_integer(value: object) -> object:
    if isinstance(value, (bool, str)):
        raise ValueError("must be a JSON integer, not a string or a boolean")
    return value


def json_int(ge: int, le: int):
    """An integer in ``[ge, le]`` as JSON Schema means it: 5 and 5.0 are integers; "5",
    true and 2.5 are not (the constraints sit inside, so they also hold in a union)."""
    return Annotated[int, Field(strict=False, ge=ge, le=le), BeforeValidator(_json_integer)]

_DOC_EXAMPLE = {"title": "Marie Curie",
                "text": "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903.",
                "source": "wiki/marie-curie.md"}


def _no_nul(value: str, what: str) -> str:
    if "\x00" in value:
        raise ValueError(f"{what} contains NUL characters (binary data is not text)")
    return value


Principal = Annotated[str, Field(pattern=PRINCIPAL_PATTERN.pattern, max_length=233)]
"""A principal (:data:`pathweave.access.PRINCIPAL_PATTERN`), in the JSON schema too."""


def _principals(value: list[str] | None, what: str) -> list[str] | None:
    from pathweave.access import check_principals

    checked = check_principals(value, what)
    return None if checked is None else list(checked)


class DocumentContent(BaseModel):
    """What every document write carries, with its one set of rules (POST's documents and
    PUT's body alike): ``text`` plain UTF-8 text with at least one visible character and no
    NUL (it is chunked into passages), ``title`` without NUL, ``acl`` principals."""

    model_config = ConfigDict(extra="forbid")

    title: str = Field("", max_length=1000, description="Title (part of each passage's embedding).",
                       json_schema_extra={"pattern": NO_NUL_PATTERN})
    text: str = Field(..., min_length=1, max_length=20_000_000, json_schema_extra={"pattern": TEXT_PATTERN},
                      description="The document text: at least one visible character, no NUL.")
    acl: list[Principal] | None = Field(
        None, max_length=1000, examples=[["group:finance", "user:4711"]],
        description="Access list: the principals that may read the document (kind:name). Absent or null: the "
                    "tenant's default (everyone in the tenant, unless access.private_by_default); [] : only "
                    "callers without principals.")

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        _no_nul(value, "text")
        if not has_visible_text(value):
            raise ValueError("text is empty (only whitespace or invisible characters)")
        return value

    @field_validator("title")
    @classmethod
    def _title(cls, value: str) -> str:
        return _no_nul(value, "field")

    @field_validator("acl")
    @classmethod
    def _acl(cls, value: list[str] | None) -> list[str] | None:
        return _principals(value, "acl")


class DocumentIn(DocumentContent):
    """One document to ingest (POST /v1/documents), with where it comes from."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [_DOC_EXAMPLE]})

    source: str | None = Field(None, max_length=1000, description="Where it comes from (kept on the document).",
                               json_schema_extra={"pattern": NO_NUL_PATTERN})

    @field_validator("source")
    @classmethod
    def _source(cls, value: str | None) -> str | None:
        return _no_nul(value, "field") if value is not None else value


class DocumentPut(DocumentContent):
    """The content of the document with an external id (PUT /v1/documents/{external_id})."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"title": "Travel policy", "text": "Trips to Lyon need approval from Paul Martin."}]})


class AclPatch(BaseModel):
    """A document's new access list (PATCH /v1/documents/{doc_id}/acl)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"acl": ["group:finance"]}]})

    acl: list[Principal] | None = Field(
        ..., max_length=1000, examples=[["group:finance", "user:4711"]],
        description="Access list: the principals that may read the document (kind:name). null: everyone in "
                    "the tenant; [] : only "
                    "callers without principals.")

    @field_validator("acl")
    @classmethod
    def _acl(cls, value: list[str] | None) -> list[str] | None:
        return _principals(value, "acl")


WRITE_BOOKMARKS = ("Neo4j bookmarks of this write's commit: pass them as a query's `consistency` and the query "
                   "reads at least this state on whichever replica and cluster member serves it (empty on "
                   "ArcadeDB, whose single server always does).")


class AclResponse(BaseModel):
    """A document's access list after a PATCH, and the graph version that holds it."""

    doc_id: str
    acl: list[str] | None
    graph_version: int
    bookmarks: list[str] = Field(default_factory=list, description=WRITE_BOOKMARKS)


class DocumentsRequest(BaseModel):
    """A batch of documents (JSON). Files go as ``multipart/form-data`` in field ``files``."""

    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"examples": [{"documents": [_DOC_EXAMPLE]}]})

    documents: list[DocumentIn] = Field(..., min_length=1, description=(
        "At most PATHWEAVE_API_MAX_DOCUMENTS (1000) documents; the schema served by the API carries the limit."))


class SubmittedDocument(BaseModel):
    doc_id: str = Field(examples=["doc:3f1c2a9d8e7b6c5a4f3e2d1c"])
    title: str
    source: str
    status: DocStatus
    version: int | None = Field(None, description="The version this write was accepted as (each accepted "
                                "write of a document takes the next one; the newest wins). None when the "
                                "content is stored already.")


class JobLinks(BaseModel):
    job: str = Field(examples=["/v1/jobs/8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60"])


class SubmitResponse(BaseModel):
    """Accepted: the job id to poll. Documents already ingested are ``done`` at once."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "job_id": "8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60", "status": "queued", "total": 1, "enqueued": 1,
        "already_ingested": 0, "batches": 1, "queue": "inprocess",
        "documents": [{"doc_id": "doc:3f1c2a9d8e7b6c5a4f3e2d1c", "title": "Marie Curie",
                       "source": "wiki/marie-curie.md", "status": "queued", "version": 1}],
        "links": {"job": "/v1/jobs/8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60"}}]})

    job_id: str
    status: JobState
    total: int
    enqueued: int
    already_ingested: int
    batches: int
    queue: Literal["celery", "inprocess"]
    documents: list[SubmittedDocument]
    links: JobLinks


class DocumentState(BaseModel):
    """A document's ingestion state, counts (when done) and timings (ISO 8601, seconds)."""

    doc_id: str
    status: DocStatus | Literal["deleted", "superseded"] = Field(description=(
        "`superseded`: a newer write of this document was accepted after this job's version, which then "
        "is not (or no longer) the visible one (`superseded_by`)."))
    version: int | None = Field(None, description="The document's version this row is about.")
    superseded_by: int | None = Field(None, description="The newer version that replaced this job's.")
    title: str | None = None
    source: str | None = None
    job_id: str | None = None
    attempts: int | None = None
    error: str | None = None
    queued_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    seconds: float | None = None
    passages: int | None = None
    propositions: int | None = None
    entities: int | None = None
    triples: int | None = None
    ingested_at: str | None = None


class JobProgress(BaseModel):
    documents_finished: int = Field(description="Documents done or failed.")
    fraction: float = Field(ge=0, le=1)
    passages: int = Field(description="Passages of the documents done so far.")


class JobCounts(BaseModel):
    queued: int
    running: int
    done: int
    failed: int
    deleted: int
    superseded: int = 0


class JobResponse(BaseModel):
    """A job's state: ``done`` when every document is done, ``done_with_errors`` when some failed."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "job_id": "8c1f3e2d9a7b4c6e8f0a1b2c3d4e5f60", "status": "running", "created_at": "2025-01-01T12:00:00+00:00",
        "total": 2, "counts": {"queued": 0, "running": 1, "done": 1, "failed": 0, "deleted": 0, "superseded": 0},
        "progress": {"documents_finished": 1, "fraction": 0.5, "passages": 3}, "finished_at": None,
        "documents": [{"doc_id": "doc:3f1c2a9d8e7b6c5a4f3e2d1c", "status": "done", "title": "Marie Curie",
                       "attempts": 1, "passages": 3, "propositions": 7, "entities": 9, "triples": 4,
                       "seconds": 0.8}]}]})

    job_id: str
    status: JobState
    created_at: str | None
    total: int
    counts: JobCounts
    progress: JobProgress
    finished_at: str | None = None
    documents: list[DocumentState]
    bookmarks: list[str] = Field(default_factory=list, description=(
        "Neo4j bookmarks of the job's finished documents: pass them as a query's `consistency` and the query "
        "sees at least those documents on whichever replica and cluster member serves it (empty on ArcadeDB, "
        "whose single server always does)."))


class DocumentList(BaseModel):
    documents: list[DocumentState]
    total: int
    limit: int
    offset: int


class RemovedCounts(BaseModel):
    passages: int
    propositions: int
    triples: int
    entities: int
    alias_groups_repaired: int  # alias groups that lost entities (new medoid or dissolved)
    relations: int


class DeleteResponse(BaseModel):
    """What the deletion removed (shared passages, propositions, triples and entities stay)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "doc_id": "doc:3f1c2a9d8e7b6c5a4f3e2d1c", "version": 3,
        "removed": {"passages": 3, "propositions": 6, "triples": 4, "entities": 2, "alias_groups_repaired": 0,
                    "relations": 1}}]})

    doc_id: str
    version: int = Field(description="The version the deletion was accepted as: a write of this document "
                                     "accepted earlier and still queued or running is superseded by it.")
    removed: RemovedCounts
    bookmarks: list[str] = Field(default_factory=list, description=WRITE_BOOKMARKS)


class QueryBody(QueryRequest):
    """The core :class:`pathweave.retrieval.request.QueryRequest` (checked by the core, the
    same errors as the CLI's) with the API's JSON rules: strict types, no NUL, the
    service's limits (:func:`pathweave_api.routers.query.query_model`)."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"question": "Where was the physicist who won the 1903 Nobel Prize born?", "mode": "proprag", "k": 5},
        {"question": "Which river flows through the capital of Poland?", "mode": "dense", "k": 3,
         "token_budget": 512},
    ]})

    question: str = Field(..., min_length=1, max_length=2000, json_schema_extra={"pattern": TEXT_PATTERN})
    k: json_int(1, 50) = Field(5, description="Passages to return.")
    token_budget: json_int(16, 100_000) | None = Field(None, description="Context token budget.")
    session_id: str | None = Field(None, min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._:-]+$",
                                   description=QueryRequest.model_fields["session_id"].description)
    stream: bool = Field(False, description=(
        "Answer as Server-Sent Events (also with `Accept: text/event-stream`): `retrieval` (this response without "
        "its answer), then `token` events (`{text}`) as the model writes the answer (prose with [n] citations), then "
        "`answer` (the whole response). A client that disconnects stops the generation."))
    consistency: list[Annotated[str, StringConstraints(min_length=1, max_length=1000, pattern=r"^[!-~]+$")]] | None = \
        Field(None, max_length=64, description=(
            "Bookmarks (a job's `bookmarks`): the query reads at least the state they name, e.g. the documents of "
            "a job that reads done, whichever replica answers (Neo4j; accepted and not needed on ArcadeDB)."))

    @field_validator("question")
    @classmethod
    def _question(cls, value: str) -> str:
        _no_nul(value, "question")
        if not has_visible_text(value):
            raise ValueError("question is empty (only whitespace or invisible characters)")
        return value


class Citation(BaseModel):
    marker: int = Field(description="The [n] marker: the passage's rank.", examples=[1])
    passage_id: str
    doc_id: str
    title: str
    source: str | None = None
    page: int | None = Field(None, description="1-based PDF page of the passage.")
    section: str | None = Field(None, description="Heading path of the passage ('A > B').")
    reference: str | None = Field(None, description="'title, p. N', 'title > section' or the title.",
                                  examples=["Annual Report, p. 3"])


class PassageOut(PassageHit):
    """A ranked passage (the core's :class:`~pathweave.model.PassageHit`) with its marker."""

    citation: int = Field(description="Marker of this passage in ``citations``.")


class QueryResponse(BaseModel):
    """Ranked passages, reasoning paths (proprag), citations and the reasoning-record id."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "query_id": "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0", "record_id": "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0",
        "question": "Where was the physicist who won the 1903 Nobel Prize born?", "mode": "proprag",
        "graph_version": 3,
        "passages": [{"passage_id": "passage:9a8b7c6d5e4f3a2b1c0d9e8f", "doc_id": "doc:3f1c2a9d8e7b6c5a4f3e2d1c",
                      "title": "Marie Curie", "text": "Marie Curie was born in Warsaw. ...", "score": 0.0412,
                      "rank": 1, "citation": 1}],
        "paths": [{"path_id": "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0:1", "rank": 1, "score": 0.71, "steps": [
            {"prop_id": "prop:1a2b3c4d5e6f7a8b9c0d1e2f", "text": "Marie Curie won the Nobel Prize in Physics in 1903.",
             "via": None, "citations": [1]},
            {"prop_id": "prop:2b3c4d5e6f7a8b9c0d1e2f3a", "text": "Marie Curie was born in Warsaw.",
             "via": "Marie Curie", "citations": [1]}]}],
        "seeds": [{"entity_id": "entity:0f1e2d3c4b5a69788796a5b4", "name": "Marie Curie", "weight": 1.0}],
        "citations": [{"marker": 1, "passage_id": "passage:9a8b7c6d5e4f3a2b1c0d9e8f",
                       "doc_id": "doc:3f1c2a9d8e7b6c5a4f3e2d1c", "title": "Marie Curie",
                       "source": "wiki/marie-curie.md"}],
        "timings_ms": {"snapshot": 0.4, "embed": 6.1, "record": 12.3, "total": 48.2},
        "context": None, "note": None,
        "links": {"record": "/v1/queries/5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0"}}]})

    query_id: str
    record_id: str = Field(description="Id of the reasoning record (GET /v1/queries/{id}).")
    question: str
    mode: Mode
    graph_version: int
    passages: list[PassageOut]
    paths: list[ReasoningPath]
    seeds: list[SeedEntity]
    citations: list[Citation]
    timings_ms: dict[str, float]
    context: BudgetedContext | None = Field(
        None, description="The best connected evidence within token_budget, linearized (with token_budget).")
    answer: Answer | None = Field(None, description="The LLM's answer (with answer: true or mode prunerag); "
                                                     "`error` says why its text is empty.")
    tree: PruneTree | None = Field(None, description="PruneRAG's decomposition tree (mode prunerag).")
    apr: AprContext | None = Field(None, description="Mode apr: the compact prompt sent, its tokens per rendering "
                                                     "and the runs selected (reused ones referenced by code).")
    note: str | None = None
    trace_id: str | None = Field(None, description="The query's OpenTelemetry trace (32 hex) when the service "
                                                   "traces; also in the X-Pathweave-Trace-Id header and the record.")
    record: RecordState | None = Field(None, description=RECORD_STATE)
    links: dict[str, str]

    @classmethod
    def from_result(cls, result: QueryResult, note: str | None = None) -> "QueryResponse":
        """The response of a cited :class:`~pathweave.model.QueryResult` (as
        :meth:`pathweave.query.retriever.Retriever.query` returns it): each ranked passage
        with its ``[n]`` marker (its rank) and the citation of that marker."""
        return cls(
            query_id=result.query_id, record_id=result.query_id, question=result.question, mode=result.mode,
            graph_version=result.graph_version,
            passages=[PassageOut(**hit.model_dump(), citation=hit.rank) for hit in result.passages],
            paths=result.paths, seeds=result.seeds,
            citations=[Citation(marker=hit.rank, **hit.model_dump(include=set(Citation.model_fields) - {"marker"}))
                       for hit in result.passages],
            timings_ms=result.timings_ms, context=result.context, answer=result.answer, tree=result.tree,
            apr=result.apr, note=note, trace_id=result.trace_id, record=result.record, links={"record": f"/v1/queries/{result.query_id}"})


class RecordStep(BaseModel):
    order: int
    prop_id: str
    text: str | None = None
    via: str | None = None


class RecordPath(BaseModel):
    path_id: str
    rank: int | None = None
    score: float | None = None
    steps: list[RecordStep]


class RecordSelected(BaseModel):
    label: str | None = None
    id: str | None = None
    rank: int | None = None
    weight: float | None = None
    text: str | None = Field(None, description="The passage's or proposition's text, the entity's name.")
    reference: str | None = Field(None, description="Citation of a selected passage or statement "
                                                    "('title, p. N' / 'title > section').")


class RecordPassage(BaseModel):
    """A passage of a reasoning record (stating a path's proposition, or selected), with its document."""

    passage_id: str
    title: str | None = None
    text: str | None = None
    doc_id: str | None = None
    doc_title: str | None = None
    source: str | None = None
    states: list[str] = Field(default_factory=list, description="The record's propositions it states.")


class ReasoningRecord(BaseModel):
    """The stored reasoning record of a query (as explored in Neo4j Browser)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "query_id": "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0", "text": "Where was Marie Curie born?",
        "mode": "proprag", "created_at": "2025-01-01T12:00:00+00:00",
        "paths": [{"path_id": "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0:1", "rank": 1, "score": 0.71, "steps": [
            {"order": 0, "prop_id": "prop:2b3c4d5e6f7a8b9c0d1e2f3a", "text": "Marie Curie was born in Warsaw.",
             "via": None}]}],
        "selected": [{"label": "Passage", "id": "passage:9a8b7c6d5e4f3a2b1c0d9e8f", "rank": 1, "weight": 0.04}]}]})

    query_id: str
    text: str | None = None
    mode: str | None = None
    created_at: str | None = None
    trace_id: str | None = Field(None, description="The query's OpenTelemetry trace (32 hex), when it was traced.")
    paths: list[RecordPath]
    selected: list[RecordSelected]
    passages: list[RecordPassage] = Field(
        default_factory=list, description="Passages stating the paths' propositions, and the selected passages.")
    answer: dict | None = Field(None, description="The stored LLM answer (ANSWERED): text, source, model, tokens, "
                                                  "latency, citations and the cited passage/statement ids (`cited`).")
    tree: dict | None = Field(None, description="The stored PruneRAG tree (TREE): totals and nodes with decision, "
                                                "answer, confidence, children and retrieved passages.")
    runs: dict | None = Field(None, description="Mode apr: the session and the runs the query asked, sent and "
                                                "reused (ASKED / SENT / REUSED), each {run_id, code, channel, rank}.")
    withheld: bool = Field(False, description=(
        "True when an access list changed since the query and this caller may no longer read some of the record's "
        "sources: those paths, statements and passages are left out, and the answer and the tree are null."))


class DocumentPassage(BaseModel):
    passage_id: str
    position: int | None = None
    text: str | None = None


class DocumentText(BaseModel):
    """An ingested document and its passages in reading order."""

    model_config = ConfigDict(json_schema_extra={"examples": [{
        "doc_id": "doc:3f1c2a9d8e7b6c5a4f3e2d1c", "title": "Warsaw", "source": "api:Warsaw#0",
        "ingested_at": "2025-01-01T12:00:00+00:00", "passages": [
            {"passage_id": "passage:9a8b7c6d5e4f3a2b1c0d9e8f", "position": 0,
             "text": "Warsaw is the capital of Poland."}]}]})

    doc_id: str
    title: str | None = None
    source: str | None = None
    ingested_at: str | None = None
    passages: list[DocumentPassage]


class QuerySummary(BaseModel):
    query_id: str
    text: str | None = None
    mode: str | None = None
    created_at: str | None = None


class QueryList(BaseModel):
    """The tenant's reasoning records, newest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"queries": [
        {"query_id": "5b0c3d2e1f4a49b8a7c6d5e4f3a2b1c0", "text": "Where was Marie Curie born?", "mode": "proprag",
         "created_at": "2025-01-01T12:00:00+00:00"}], "limit": 50}]})

    queries: list[QuerySummary]
    limit: int


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class Readiness(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [
        {"status": "ready", "store": True, "models": True, "queue": "inprocess", "broker": None}]})

    status: Literal["ready", "unavailable"]
    store: bool
    models: bool
    queue: Literal["celery", "inprocess"]
    broker: bool | None = None
    detail: str | None = None
