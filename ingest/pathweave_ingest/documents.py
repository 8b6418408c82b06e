"""Document identity and the one path by which a version leaves the graph.

Identity (spec §0): a document with a ``key`` (a file's absolute path, a URL or the
caller's external id) is identified by tenant + key, with the ``content_hash`` of
its title and segments beside it: ingesting the same source again with the same
hash changes nothing, with another hash replaces the stored version. A document
without a key keeps content identity (tenant + title + text), as before.

Removal: :func:`detach_document` and :func:`remove_passages` run inside the caller's write
transaction: the pipeline's atomic swap (cut the old version's passages off, write the new
version, remove what only the old one held, record the change: one transaction, so a query
sees the old version or the new one and never neither) and :func:`remove_documents` (a
DELETE, a folder sync's removal). :func:`record_change` writes the graph-change record in the
same transaction (the query processes' topologies apply it, :mod:`pathweave.graph.topology`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pathweave.store.graph_store import GraphStore
from pathweave.text import stable_id
from pathweave_ingest.aliases import groups_touching, repair_after_removal
from pathweave_ingest.loaders import SourceDocument


def content_hash(doc: SourceDocument) -> str:
    """SHA-256 (hex) of the document's title and segments (text, page, section): any
    change of text or structure gives another hash."""
    parts = [doc.title, [[s.text, s.page, s.section] for s in doc.parts()]]
    return hashlib.sha256(json.dumps(parts, ensure_ascii=False).encode("utf-8")).hexdigest()


def source_doc_id(tenant: str, key: str) -> str:
    """The id of the document whose source is ``key`` (``doc:`` + 24 hex)."""
    return stable_id("doc", tenant, "\x1esource", key)


def document_id(tenant: str, doc: SourceDocument) -> str:
    """``doc``'s id: tenant + source key when it has one, else tenant + title + text."""
    return source_doc_id(tenant, doc.key) if doc.key else stable_id("doc", tenant, doc.title, doc.text)


@dataclass
class DocumentChange:
    """What one change did: documents removed (``removed_doc_ids``), the ids of the
    passages and entities that left the graph, the passages written, the entities whose
    alias edge changed, the removed counts by kind (and the alias groups that lost members)
    and the graph version after its last bump (None when nothing changed)."""

    removed_doc_ids: list[str] = field(default_factory=list)
    removed_passage_ids: list[str] = field(default_factory=list)
    removed_entity_ids: list[str] = field(default_factory=list)
    added_passage_ids: list[str] = field(default_factory=list)
    alias_entity_ids: list[str] = field(default_factory=list)  # ALIAS_OF edge changed (removal or write)
    access_passage_ids: list[str] = field(default_factory=list)  # their documents' access lists changed
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("passages", "propositions", "triples", "entities", "alias_groups_repaired", "relations"), 0))
    version: int | None = None

    def merge(self, other: "DocumentChange") -> None:
        """Add ``other`` (a later transaction of the same ingestion) to this one."""
        for name in ("removed_doc_ids", "removed_passage_ids", "removed_entity_ids", "added_passage_ids",
                     "alias_entity_ids", "access_passage_ids"):
            getattr(self, name).extend(getattr(other, name))
        for key, value in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        self.version = other.version if other.version is not None else self.version


Run = Callable[..., list[dict[str, Any]]]
"""A runner of named statements inside one write transaction: ``run(name, **params) -> rows``."""


def detach_document(run: Run, doc_id: str) -> list[str]:
    """Cut the passages of ``doc_id`` off it (its PART_OF and in-document NEXT edges) inside
    the caller's transaction; returns their ids for :func:`remove_passages` (after the new
    version, if any, is written, so what both versions hold stays)."""
    run("document_unlink_next", doc_id=doc_id)
    return [r["id"] for r in run("document_detach_passages", doc_id=doc_id)]


def remove_passages(run: Run, passage_ids: Collection[str], change: DocumentChange, dimensions: int) -> None:
    """Remove, inside the caller's transaction, the passages of ``passage_ids`` that no
    document holds any more, the propositions and triples only they state/assert (with their
    RELATES edges), the entities nothing else mentions or relates (an alias group that loses
    members gets the medoid of the rest, :func:`pathweave_ingest.aliases.repair_after_removal`,
    ``dimensions``-d vectors), relations no triple uses any more and the APR fact runs no
    other passage has; adds the removed ids and counts to ``change``."""
    candidates = sorted(set(passage_ids))
    passage_ids = [r["id"] for r in run("passages_without_document", ids=candidates)] if candidates else []
    change.access_passage_ids.extend(sorted(set(candidates) - set(passage_ids)))  # still held by another document
    if not passage_ids:
        return
    prop_ids = [r["id"] for r in run("delete_doc_propositions", passage_ids=passage_ids)]
    triples = run("delete_doc_triples", passage_ids=passage_ids)
    triple_ids = [t["id"] for t in triples]
    source_ids = passage_ids + prop_ids
    candidates = {r["id"] for r in run("delete_doc_candidate_entities", passage_ids=passage_ids,
                                       prop_ids=prop_ids)}
    candidates.update(t[k] for t in triples for k in ("subject_id", "object_id") if t[k])
    orphans = [r["id"] for r in run("delete_doc_orphan_entities", entity_ids=sorted(candidates),
                                    source_ids=source_ids, triple_ids=triple_ids)] if candidates else []
    groups = groups_touching(run, orphans)
    if triples:
        run("delete_doc_relates", rows=[{"triple_id": t["id"], "subject_id": t["subject_id"]} for t in triples])
    removed_triples = [r["id"] for r in run("delete_triples_by_id", ids=triple_ids)] if triple_ids else []
    removed_props = [r["id"] for r in run("delete_propositions_by_id", ids=prop_ids)] if prop_ids else []
    run("apr_delete_passage_runs", passage_ids=passage_ids)  # APR fact runs only these passages have (spec §3)
    removed_passages = [r["id"] for r in run("delete_passages_by_id", ids=passage_ids)]
    removed_entities = [r["id"] for r in run("delete_entities_by_id", ids=orphans)] if orphans else []
    change.alias_entity_ids.extend(repair_after_removal(run, groups, removed_entities, dimensions))
    relation_ids = sorted({t["relation_id"] for t in triples if t["relation_id"]})
    relations = run("delete_orphan_relations", relation_ids=relation_ids) if relation_ids else []
    change.removed_passage_ids.extend(removed_passages)
    change.removed_entity_ids.extend(removed_entities)
    for key, value in (("passages", len(removed_passages)), ("propositions", len(removed_props)),
                       ("triples", len(removed_triples)), ("entities", len(removed_entities)),
                       ("alias_groups_repaired", len(groups)),
                       ("relations", int(relations[0]["n"]) if relations else 0)):
        change.counts[key] += value


def remove_documents(run: Run, doc_ids: Iterable[str], change: DocumentChange, dimensions: int) -> None:
    """Remove the documents ``doc_ids`` (unknown ids are skipped) and what only they hold
    (:func:`remove_passages`), their Document nodes included, inside the caller's transaction.
    Their status (a tombstone with the version counter) is the caller's
    (:mod:`pathweave_ingest.lifecycle`)."""
    doc_ids = list(dict.fromkeys(doc_ids))
    present = {r["id"] for r in run("existing_document_hashes", ids=doc_ids)} if doc_ids else set()
    passages: list[str] = []
    for doc_id in doc_ids:
        if doc_id in present:
            passages += detach_document(run, doc_id)
            run("delete_document_node", doc_id=doc_id)
            change.removed_doc_ids.append(doc_id)
    remove_passages(run, passages, change, dimensions)


def record_change(run: Run, store: GraphStore, change: DocumentChange, entities: Sequence[str] = ()) -> int:
    """Bump the tenant's graph version inside the caller's transaction and record ``change``
    (passages added and removed, entities removed, ``entities`` whose SYNONYM edges were
    written, alias edges changed, passages whose documents' access lists changed) for the query processes' topologies; sets and returns
    ``change.version``. The caller tells the backend after the commit
    (``store.backend.graph_changed(store)``)."""
    if change.counts.get("alias_groups_repaired"):  # repaired groups layer 2 has not refined
        run("alias_mark_unrefined", meta_id=store.meta_id)
    change.version = store.record_change_in(
        run, added=change.added_passage_ids, removed=change.removed_passage_ids,
        removed_entities=change.removed_entity_ids, entities=list(entities),
        aliases=sorted(set(change.alias_entity_ids)), access=sorted(set(change.access_passage_ids)))
    return change.version
