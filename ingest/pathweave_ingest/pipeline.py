"""The ingestion pipeline: load -> chunk -> extract -> embed -> write.

Used by the CLI (and the workers): ids are content hashes, writes MERGE on
them, and only texts not yet stored are embedded, so ingesting the same input
twice leaves the graph unchanged. A document with a source key (a file path, a
URL, an external id) is identified by it: when its content hash differs from the
stored version's, the new version replaces the old one in its group's write transaction
(the atomic swap: the old version's passages are cut off, the new version written, what
only the old one held removed and the graph change recorded, all or nothing;
:mod:`pathweave_ingest.documents`), so queries see the old version or the new one and
never neither, and a new version that fails leaves the old one in place. Given the
versions a worker claimed (:mod:`pathweave_ingest.lifecycle`), each group's transaction
first fences on them: a document whose newer version was accepted meanwhile is not
written (``IngestReport.superseded``). Passages keep the PDF ``page`` or heading-path
``section`` of their segment. Three groups of documents are in flight at
once: while one group is embedded, the next is chunked and extracted (spaCy) on
an extraction thread and the previous one is written in one transaction by a
writer thread, which then links that group's new entities (synonymy edges, alias
consolidation); if a write fails, its documents are retried one by one at the end so a
bad document is reported and the others land. Every report carries the busy seconds of
each stage (:mod:`pathweave_ingest.profile`).
"""

from __future__ import annotations

import contextvars
import time
from concurrent.futures import Future, ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar
from datetime import datetime, timezone

import numpy as np

from pathweave.embedding import embedder_record
from pathweave.embedding.embedders import Embedder, get_query_embedder
from pathweave.settings import Settings
from pathweave.store.graph_store import GraphStore
from pathweave.text import normalize, stable_id
from pathweave_ingest.chunking import chunk_segments
from pathweave_ingest import lifecycle
from pathweave_ingest.documents import (DocumentChange, content_hash, detach_document, document_id, record_change,
                                        remove_passages)
from pathweave.extractors.base import PassageExtraction, PassageInput
from pathweave_ingest.loaders import LoadError, SourceDocument
from pathweave.text import fact_text
from pathweave.graph.vectors import encode_vector
from pathweave_ingest.plan import plan_documents
from pathweave_ingest.profile import IngestProfile
from pathweave_ingest.linking import link_entities
from pathweave.apr.codebook import code_steps
from pathweave.apr.writes import TripleRef, fact_run_rows, triple_ref
from pathweave.errors import PathweaveError


T = TypeVar("T")


class StaleBatch(PathweaveError, RuntimeError):
    """Nodes a prepared group links to were removed by a concurrent transaction: prepare it again."""


@dataclass
class IngestReport:
    """Outcome of one ingestion: counts, errors (file/item and reason) and seconds."""

    documents: int = 0
    documents_new: int = 0
    documents_replaced: int = 0
    documents_removed: int = 0
    documents_unchanged: int = 0  # given, and already stored in this version with this access list
    documents_acl_changed: int = 0  # given, stored in this version, whose access list was set
    passages_new: int = 0
    propositions_new: int = 0
    entities_new: int = 0
    triples: int = 0
    synonym_edges: int = 0
    synonymy: str = ""  # how the new entities' synonyms were found: "gds.knn" | "vector index" ("" none)
    profile: IngestProfile = field(default_factory=IngestProfile, repr=False)  # busy seconds per stage
    alias_changes: int = 0  # entities whose ALIAS_OF edge changed (alias consolidation, spec §3)
    errors: list[LoadError] = field(default_factory=list)
    seconds: float = 0.0
    written: list[str] = field(default_factory=list, repr=False)  # ids of the documents written
    counted: dict[str, set[str]] = field(default_factory=dict, repr=False)  # label -> ids counted as new
    warnings: list[LoadError] = field(default_factory=list)  # ingested, with a remark (e.g. scanned pages)
    change: DocumentChange = field(default_factory=DocumentChange, repr=False)  # removed/added ids, last version
    superseded: list[str] = field(default_factory=list)  # ids not written: a newer version was accepted

    @property
    def documents_added(self) -> int:
        """Documents written whose source was not stored before (new, not replacements)."""
        return self.documents_new - self.documents_replaced

    def outcome(self) -> str:
        """What happened to the documents, in words: ``"2 added, 1 replaced, 1 removed, 3
        unchanged"`` (the parts that are not zero; ``"nothing to do"`` when all are)."""
        parts = [f"{n} {what}" for n, what in ((self.documents_added, "added"), (self.documents_replaced, "replaced"),
                                                (self.documents_removed, "removed"),
                                                (self.documents_unchanged, "unchanged"),
                                                (self.documents_acl_changed, "with a new access list")) if n]
        return ", ".join(parts) or "nothing to do"

    @property
    def passages_per_s(self) -> float:
        return self.passages_new / self.seconds if self.seconds else 0.0


@dataclass
class _Batch:
    """Rows of one group of documents, keyed by statement name."""

    rows: dict[str, list[dict]] = field(default_factory=dict)
    texts: dict[str, dict[str, str]] = field(default_factory=dict)  # label -> id -> text to embed
    new: dict[str, set[str]] = field(default_factory=dict)  # label -> ids of nodes created (embedded)
    triples: dict[str, list[TripleRef]] = field(default_factory=dict)  # passage id -> its triples in text order (APR runs)

    def add(self, name: str, row: dict) -> None:
        self.rows.setdefault(name, []).append(row)

    def text(self, label: str, node_id: str, text: str) -> None:
        self.texts.setdefault(label, {}).setdefault(node_id, text)


_WRITE_ORDER = (
    "upsert_documents", "upsert_passages", "link_next", "upsert_entities", "upsert_propositions",
    "upsert_relations", "link_states", "link_proposition_mentions", "link_passage_mentions",
    "upsert_triples", "apr_triple_lines", "apr_upsert_fact_runs", "apr_link_run_edges",
)
_EXISTING = {
    "passage": ("existing_passage_ids", "upsert_passages", "passage_id"),
    "proposition": ("existing_proposition_ids", "upsert_propositions", "prop_id"),
    "entity": ("existing_entity_ids", "upsert_entities", "entity_id"),
    "relation": ("existing_relation_ids", "upsert_relations", "relation_id"),
    "triple": ("existing_triple_ids", "upsert_triples", "triple_id"),
}


class Pipeline:
    """Ingests :class:`SourceDocument` lists into a tenant's graph.

    ``extractor`` has ``extract(list[PassageInput]) -> list[PassageExtraction]``. Each
    ingestion's :class:`IngestReport` carries its per-stage profile
    (:class:`~pathweave_ingest.profile.IngestProfile`); ``keep_texts`` keeps the texts sent
    to the embedder in it (benchmarks: the embed-only floor). ``line_embedder``: what embeds
    APR's triple lines and fact-run texts (spec §3; default the query embedder,
    :func:`~pathweave.embedding.embedders.get_query_embedder`): float32 ONNX on CPU gives a text the
    same vector whatever batch it is in, so run segmentation (cuts at cosine ``apr.run_tau``)
    does not depend on how documents were batched, and the lines match the query side's.
    """

    def __init__(self, store: GraphStore, embedder: Embedder, extractor, settings: Settings,
                 group_size: int = 128, keep_texts: bool = False, line_embedder=None) -> None:
        self.store = store
        self.embedder = embedder
        # APR's triple lines and fact-run texts: the query embedder (float32), so that a
        # passage's runs do not depend on the batch it came in (None: loaded on first use)
        self.line_embedder = line_embedder
        self.extractor = extractor
        self.settings = settings
        self.group_size = group_size
        self.keep_texts = keep_texts
        self.tenant = store.tenant
        self._profile = IngestProfile()
        self._encode = self._profile.encoder(embedder.encode)

    def ingest(self, documents: list[SourceDocument], errors: list[LoadError] | None = None,
               on_progress: Callable[[int, int], None] | None = None,
               remove: list[str] | None = None, versions: dict[str, int] | None = None) -> IngestReport:
        """Ingest ``documents``; ``on_progress(documents_done, passages_done)`` after each group.

        A document already stored in this version is skipped; a source stored with another
        content hash is replaced by its group's transaction (the atomic swap). ``remove``:
        ids of documents to delete (folder sync: files that are gone), in one transaction
        of their own that tombstones them (:func:`pathweave_ingest.lifecycle.remove`).
        ``versions``: ``{doc_id: version}`` a worker claimed; each group's transaction
        fences on them (:func:`pathweave_ingest.lifecycle.fence`) and a document whose newer
        version was accepted meanwhile lands in ``report.superseded``, unwritten. Without
        ``versions`` (the CLI) each written document is accepted as a new version in its
        group's transaction (:func:`pathweave_ingest.lifecycle.applied_in`). Every
        transaction records its graph change; the new entities' synonymy and alias links
        are recorded once more at the end."""
        started = time.perf_counter()
        report = IngestReport(documents=len(documents), errors=list(errors or []),
                              profile=IngestProfile(keep_texts=self.keep_texts))
        self._profile = report.profile
        self._encode = report.profile.encoder(self.embedder.encode)
        if self.line_embedder is None:
            self.line_embedder = get_query_embedder(self.settings)
        self._encode_lines = report.profile.encoder(self.line_embedder.encode)
        report.warnings = [LoadError(d.source, w) for d in documents for w in d.warnings]
        plan = plan_documents(self.store, documents)
        todo, replace, given = plan.to_write, {doc_id for doc_id, _ in plan.changed}, plan.ids
        gone = [doc_id for doc_id in (remove or []) if doc_id not in given]
        if todo:  # vectors will be written: the tenant's are of one embedder (refused before any write)
            embedder_record.claim(self.store, self.embedder)
        report.documents_unchanged = len(plan.unchanged)
        if gone:
            with report.profile.stage("change"):
                report.change.merge(lifecycle.remove(self.store, gone, "sync")[1])
        for doc_id, doc in plan.acl:  # the same content under another access list: set, not re-ingested
            with report.profile.stage("change"):
                if versions is None:  # this write is the newest
                    lifecycle.set_acl(self.store, doc_id, sorted(doc.acl))
                elif doc_id in versions:  # a worker's: the head's list, the newest accepted one
                    lifecycle.apply_head_acl(self.store, doc_id)
            report.documents_acl_changed += 1
        entities, aliases = self._write_documents(todo, replace, versions, len(given) - len(todo), report,
                                                  on_progress)
        with report.profile.stage("change"):
            if entities or aliases:  # the links written after the groups' transactions
                linked = DocumentChange(alias_entity_ids=aliases)
                self.store.execute_write(lambda run: record_change(run, self.store, linked, entities))
                self.store.backend.graph_changed(self.store)
                report.change.merge(linked)
            if report.written:  # linked and recorded: no repair needed (tasks.repair_links otherwise)
                self.store.run("documents_linked", ids=list(dict.fromkeys(report.written)))
        report.documents_replaced = len(set(report.written) & replace)
        report.documents_removed = len(report.change.removed_doc_ids)
        report.seconds = time.perf_counter() - started
        return report

    def _acl(self, doc: SourceDocument) -> list[str] | None:
        """The access list ``doc`` is stored with when it is new (sorted): its own, else the
        default (none: the whole tenant; ``[]`` with setting ``access.private_by_default``).
        A stored document that a write names no list for keeps its own (``keep_acl``), and a
        write's transaction stores the head's list, the newest accepted one, when it has one."""
        if doc.acl is not None:
            return sorted(doc.acl)
        return [] if self.settings.access.private_by_default else None

    def _write_documents(self, todo: list[tuple[str, SourceDocument]], replace: set[str],
                         versions: dict[str, int] | None,
                         done: int, report: IngestReport,
                         on_progress: Callable[[int, int], None] | None) -> tuple[list[str], list[str]]:
        """Chunk, extract, embed and write ``todo`` (groups in flight); after each group's write,
        on the writer thread, the synonymy edges and alias groups of its new entities
        (:meth:`_link`), so that they overlap the next groups' extraction and embedding instead
        of stalling the end. Returns the ids of the new entities (whose synonyms were written)
        and of the entities whose alias edge changed."""
        new_entities: dict[str, tuple[str, np.ndarray]] = {}
        aliases: list[str] = []
        if on_progress:
            on_progress(done, 0)
        failed: list[list[tuple[str, SourceDocument]]] = []
        groups = [todo[start:start + self.group_size] for start in range(0, len(todo), self.group_size)]
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pathweave-writer") as writer, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="pathweave-extract") as extraction:
            pending: Future | None = None
            extracted = extraction.submit(contextvars.copy_context().run, self._extract, groups[0]) if groups else None
            for index, group in enumerate(groups):
                # the next group is chunked and extracted (spaCy, one core) while this one
                # is embedded (the other cores) and the previous one is written
                current = extracted
                extracted = extraction.submit(contextvars.copy_context().run, self._extract, groups[index + 1]) \
                    if index + 1 < len(groups) else None
                try:
                    batch = current.result()
                    prepared = (batch, self._embed(batch))
                except Exception:  # noqa: BLE001 - isolated below, document by document
                    prepared = None
                if pending is not None:
                    done += self._settle(pending, report, new_entities, aliases, failed, on_progress, done)
                pending = writer.submit(contextvars.copy_context().run, self._write, group, prepared, replace, versions,
                                        report)  # in the batch's context: its spans are the batch's
            if pending is not None:
                self._settle(pending, report, new_entities, aliases, failed, on_progress, done)
        for group in failed:  # retry one by one so a bad document does not sink its group
            for doc_id, doc in group:
                if doc_id in report.superseded:
                    continue
                try:
                    batch, embedded = self._prepare([(doc_id, doc)])
                    report.change.merge(self._write_batch(batch, [(doc_id, doc)], replace, versions))
                except lifecycle.Superseded:
                    report.superseded.append(doc_id)
                    continue
                except Exception as exc:  # noqa: BLE001
                    report.errors.append(LoadError(doc.source, f"not ingested: {exc}"))
                    continue
                self._count(report, batch, embedded, new_entities, [(doc_id, doc)])
                aliases += self._link(embedded, report)
        report.alias_changes = len(set(aliases))
        return list(new_entities), list(dict.fromkeys(aliases))

    def _write(self, group, prepared, replace: set[str], versions: dict[str, int] | None, report: IngestReport):
        """Writer thread: one transaction for the group (:meth:`_write_batch`), then (if it
        committed) the synonymy and alias links of its new entities (:meth:`_link`, whose
        errors propagate). Returns (group, prepared, write error or None, changed alias ids)."""
        if prepared is None:
            return group, None, RuntimeError("preparation failed"), []
        batch, embedded = prepared
        try:
            report.change.merge(self._write_batch(batch, group, replace, versions))
        except Exception as exc:  # noqa: BLE001
            return group, prepared, exc, []
        return group, prepared, None, self._link(embedded, report)

    def _link(self, entities: dict[str, tuple[str, np.ndarray]], report: IngestReport) -> list[str]:
        """Synonymy edges and alias consolidation (:func:`pathweave_ingest.linking.link_entities`)
        of ``entities``, new entities of a committed group (``{id: (normalized name, (d,)
        vector)}``); returns the ids whose alias edge changed."""
        if not entities:
            return []
        ids = list(entities)
        links = link_entities(self.store, self.settings, ids, np.stack([entities[i][1] for i in ids]),
                              {i: entities[i][0] for i in ids}, report.profile)
        report.synonym_edges += links.synonym_edges
        report.synonymy = ", ".join(sorted(set(filter(None, report.synonymy.split(", "))) | {links.method}))
        return links.alias_changes

    def _write_batch(self, batch: _Batch, group: list[tuple[str, SourceDocument]], replace: set[str],
                     versions: dict[str, int] | None) -> DocumentChange:
        """The group's write transaction, the atomic swap of its replaced documents: the
        fence on the claimed ``versions`` (raises :class:`~pathweave_ingest.lifecycle.Superseded`,
        nothing written) or, without ``versions``, the group's documents accepted as new
        versions (:func:`~pathweave_ingest.lifecycle.applied_in`), the old versions' passages
        cut off, the rows written, what only the old versions held removed, the graph change
        recorded. Each statement's seconds go to
        the profile (``write``, ``apr_codes`` for the codebook's and APR's statements, ``change``
        for the fence, the removal and the record). Returns the group's change."""
        steps = self._steps(batch)
        fenced = {doc_id: int(versions[doc_id]) for doc_id, _ in group if doc_id in versions} if versions else {}
        direct = [] if versions is not None else [{"doc_id": doc_id, "title": doc.title, "source": doc.source,
                                                   "acl": None if doc.acl is None else sorted(doc.acl)}
                                                  for doc_id, doc in group]
        replaced = [doc_id for doc_id, _ in group if doc_id in replace]
        owner = lifecycle.transaction_token("direct")
        added = list(dict.fromkeys(row["passage_id"] for row in batch.rows.get("upsert_passages", [])))

        def timed(stage: str, call: Callable[[], T]) -> T:
            started = time.perf_counter()
            try:
                return call()
            finally:
                self._profile.add(stage, time.perf_counter() - started)

        def work(run) -> DocumentChange:
            change = DocumentChange(added_passage_ids=list(added))
            old = timed("change", lambda: self._begin_swap(run, fenced, direct, replaced, owner))
            newest = lifecycle.head_acls(run, [doc_id for doc_id, _ in group])  # heads locked: a PATCH since wins
            for row in batch.rows.get("upsert_documents", []):
                if row["doc_id"] in newest:
                    row["acl"], row["keep_acl"] = newest[row["doc_id"]], False
            timed("lookup", lambda: self._still_stored(run, batch))
            for name, params in steps:
                timed("apr_codes" if name.startswith("apr_") else "write", lambda: run(name, **params))
            timed("change", lambda: (remove_passages(run, old, change, self.store.dimensions),
                                     run("documents_links_pending", ids=[doc_id for doc_id, _ in group])))
            # last, beside the change record (both lock the tenant's Meta node until the commit, after
            # the heads and the nodes written, in the order every writer takes them): still this
            # embedder's tenant and not being re-embedded, or the whole group rolls back
            embedder_record.guard(run, self.store, self.embedder)
            timed("change", lambda: record_change(run, self.store, change))
            return change

        with lifecycle.HEAD_WRITERS.swapping(fenced):  # no renewal of their leases meanwhile
            change = self.store.execute_write(work)
        self.store.backend.graph_changed(self.store)
        return change

    @staticmethod
    def _begin_swap(run, fenced: dict[str, int], direct: list[dict], replaced: list[str], owner: str) -> list[str]:
        """The swap's first steps: the fence on the claimed versions, or the direct writes
        accepted as versions under the transaction's token ``owner``
        (:func:`~pathweave_ingest.lifecycle.applied_in`); then the
        passages of the versions being replaced cut off (also those of a direct document
        another writer stored since the group was planned). Returns the cut passage ids."""
        lifecycle.fence(run, fenced)
        stored = lifecycle.applied_in(run, direct, owner)
        cut = list(dict.fromkeys(replaced + stored))
        return [p for doc_id in cut for p in detach_document(run, doc_id)]

    @staticmethod
    def _still_stored(run, batch: _Batch) -> None:
        """Inside the write transaction: the nodes the batch found stored when it was prepared
        (it links to them and wrote no vector for them) are still there. A concurrent swap or
        deletion may have removed one since; raises :class:`StaleBatch` (the group is then
        prepared again), so no edge is dropped and no node re-created without its vector."""
        for label, (statement, _, _) in _EXISTING.items():
            assumed = set(batch.texts.get(label, {})) - batch.new.get(label, set())
            if assumed and {row["id"] for row in run(statement, ids=sorted(assumed))} != assumed:
                raise StaleBatch(f"{label} nodes this group links to were removed meanwhile")

    def _steps(self, batch: _Batch) -> list[tuple[str, dict]]:
        """The group's write transaction: the UNWIND batches in :data:`_WRITE_ORDER`, then the
        codebook codes of its entities, relations, triples and fact runs (APR, spec §3)."""
        size = self.store.batch_size
        steps = [(name, {"rows": rows[start:start + size]}) for name in _WRITE_ORDER
                 for rows in [batch.rows.get(name, [])] for start in range(0, len(rows), size)]
        return steps + code_steps(self.tenant, {
            "entity": [r["entity_id"] for r in batch.rows.get("upsert_entities", [])],
            "relation": [r["relation_id"] for r in batch.rows.get("upsert_relations", [])],
            "triple": [r["triple_id"] for r in batch.rows.get("upsert_triples", [])],
            "run": [r["run_id"] for r in batch.rows.get("apr_upsert_fact_runs", [])]})

    def _settle(self, pending: Future, report, new_entities, aliases, failed, on_progress, done) -> int:
        """Account a finished group write (and its links); returns its document count. A group
        whose fence failed is retried without its superseded documents."""
        group, prepared, error, changed = pending.result()
        if isinstance(error, lifecycle.Superseded):
            report.superseded.extend(sorted(error.doc_ids))
        if error is not None:
            failed.append(group)
        else:
            self._count(report, prepared[0], prepared[1], new_entities, group)
            aliases += changed
        if on_progress:
            on_progress(done + len(group), report.passages_new)
        return len(group)

    def _doc_id(self, doc: SourceDocument) -> str:
        return document_id(self.tenant, doc)

    @staticmethod
    def _count(report: IngestReport, batch: _Batch, embedded: dict, new_entities: dict,
               group: list[tuple[str, SourceDocument]]) -> None:
        report.documents_new += len(group)
        report.written.extend(doc_id for doc_id, _ in group)
        # a node shared by two groups in flight at once is new to both (neither saw the
        # other's write): count it once
        for label, attribute in (("passage", "passages_new"), ("proposition", "propositions_new"),
                                 ("entity", "entities_new")):
            ids = batch.new.get(label, set()) - report.counted.setdefault(label, set())
            report.counted[label] |= ids
            setattr(report, attribute, getattr(report, attribute) + len(ids))
        report.triples += len(batch.rows.get("upsert_triples", []))
        new_entities.update(embedded)

    def _prepare(self, group: list[tuple[str, SourceDocument]]) -> tuple[_Batch, dict]:
        """Chunk, extract and embed one group; returns its rows and its new entities' vectors."""
        batch = self._extract(group)
        return batch, self._embed(batch)

    def _extract(self, group: list[tuple[str, SourceDocument]]) -> _Batch:
        """Chunk and extract one group: its rows and the texts to embed (nothing embedded yet)."""
        started = time.perf_counter()
        batch = _Batch()
        now = datetime.now(timezone.utc).isoformat()
        inputs: list[PassageInput] = []
        passage_ids: list[str] = []
        tokenizer = self.embedder.tokenizer
        for doc_id, doc in group:
            batch.add("upsert_documents", {
                "doc_id": doc_id, "tenant": self.tenant, "source": doc.key or doc.source, "title": doc.title,
                "content_hash": content_hash(doc), "identity": "source" if doc.key else "content",
                "ingested_at": now, "acl": self._acl(doc), "keep_acl": doc.acl is None,
            })
            previous = None
            chunks = chunk_segments(doc.parts(), tokenizer, self.settings.ingest.chunk_tokens, self.settings.ingest.chunk_overlap)
            for position, (text, tokens, page, section) in enumerate(chunks):
                pid = stable_id("passage", self.tenant, doc.title, text)
                batch.add("upsert_passages", {
                    "passage_id": pid, "doc_id": doc_id, "tenant": self.tenant, "title": doc.title,
                    "text": text, "position": position, "token_count": tokens, "page": page, "section": section,
                })
                batch.text("passage", pid, f"{doc.title}\n{text}" if doc.title else text)
                if previous:
                    batch.add("link_next", {"src": previous, "dst": pid})
                previous = pid
                inputs.append(PassageInput(doc.title, text, doc.text))
                passage_ids.append(pid)
        self._profile.add("chunk", time.perf_counter() - started)
        with self._profile.stage("extract"):
            extractions = self.extractor.extract(inputs)
        for pid, extraction in zip(passage_ids, extractions):
            self._add_extraction(batch, pid, extraction)
        return batch

    def _entity_id(self, name: str) -> str:
        return stable_id("entity", self.tenant, normalize(name))

    def _add_extraction(self, batch: _Batch, pid: str, extraction: PassageExtraction) -> None:
        tenant = self.tenant
        for name, kind in extraction.entities.items():
            norm = normalize(name)
            if not norm:
                continue
            eid = self._entity_id(name)
            batch.add("upsert_entities", {"entity_id": eid, "tenant": tenant, "name": name,
                                          "norm_name": norm, "type": kind})
            batch.text("entity", eid, name)
            batch.add("link_passage_mentions", {"passage_id": pid, "entity_id": eid})
        for text, names in extraction.propositions:
            prop_id = stable_id("prop", tenant, text)
            batch.add("upsert_propositions", {"prop_id": prop_id, "tenant": tenant, "text": text})
            batch.text("proposition", prop_id, text)
            batch.add("link_states", {"passage_id": pid, "prop_id": prop_id})
            for name in dict.fromkeys(names):
                norm = normalize(name)
                if not norm:
                    continue
                eid = self._entity_id(name)
                if name not in extraction.entities:
                    # named by the proposition alone (the title a decontextualized sentence
                    # names): written here, so the edge never depends on another passage
                    # having created the entity first (group order, concurrent workers)
                    batch.add("upsert_entities", {"entity_id": eid, "tenant": tenant, "name": name,
                                                  "norm_name": norm, "type": "TITLE"})
                    batch.text("entity", eid, name)
                batch.add("link_proposition_mentions", {"prop_id": prop_id, "entity_id": eid})
        refs = batch.triples.setdefault(pid, [])
        for subject, relation, obj in extraction.triples:
            ref = triple_ref(tenant, subject, relation, obj)
            if ref is None:
                continue
            refs.append(ref)
            batch.add("upsert_relations", {"relation_id": ref.relation_id, "tenant": tenant, "name": relation})
            batch.text("relation", ref.relation_id, relation)
            batch.text("triple", ref.triple_id, fact_text(subject, relation, obj))
            batch.add("upsert_triples", {
                "triple_id": ref.triple_id, "tenant": tenant, "passage_id": pid, "subject_id": ref.subject_id,
                "object_id": ref.object_id, "subject": subject, "relation": relation, "object": obj,
                "relation_id": ref.relation_id,
            })

    def _embed(self, batch: _Batch) -> dict[str, tuple[str, np.ndarray]]:
        """Embed the texts of nodes not yet stored (one encode call for all labels, so
        length-sorted batches pad little) and attach the vectors. Returns new entities."""
        new_entities: dict[str, tuple[str, np.ndarray]] = {}
        fresh_by_label: dict[str, list[dict]] = {}
        for label, (existing_stmt, upsert, key) in _EXISTING.items():
            rows = batch.rows.get(upsert, [])
            if upsert not in ("upsert_passages", "upsert_triples"):  # those rows also link: keep all
                rows = list({row[key]: row for row in reversed(rows)}.values())[::-1]
            with self._profile.stage("lookup"):
                stored = self.store.existing(existing_stmt, list({row[key] for row in rows}))
            first: dict[str, dict] = {}
            for row in rows:
                if row[key] not in stored:
                    first.setdefault(row[key], row)
            fresh_by_label[label] = list(first.values())
            batch.rows[upsert] = rows if upsert in ("upsert_passages", "upsert_triples") else fresh_by_label[label]
            batch.new[label] = set(first)
        texts = [batch.texts[label][row[_EXISTING[label][2]]]
                 for label, fresh in fresh_by_label.items() for row in fresh]
        vectors = iter(self._encode(texts))
        for row in batch.rows.get("upsert_triples", []):
            row.setdefault("embedding", None)  # stored already: ON CREATE does not touch it
        for label, fresh in fresh_by_label.items():
            key = _EXISTING[label][2]
            for row in fresh:
                vector = next(vectors)
                row["embedding"] = vector.tolist()
                if label != "triple":  # a triple's vector only feeds the fact index
                    row["vec"] = encode_vector(vector)
                if label == "entity":
                    new_entities[row[key]] = (row["norm_name"], vector)
        apr = self.settings.apr
        fresh = {pid: refs for pid, refs in batch.triples.items() if pid in batch.new.get("passage", set())}
        began, embedding = time.perf_counter(), self._profile.seconds["embed"]  # only this thread embeds
        # segmentation cuts at cosine tau between consecutive lines: with the ingestion
        # embedder (bf16 on a bf16 CPU) a pair at 0.7000 in one batch was 0.6993 in another
        batch.rows.update(fact_run_rows(self.tenant, fresh, self._encode_lines, apr.run_tau, apr.chain_bonus))
        self._profile.add("apr_runs", time.perf_counter() - began - (self._profile.seconds["embed"] - embedding))
        return new_entities
