"""Document identity and the one path by which documents leave the graph.

Identity (spec §0): a document with a ``key`` (a file's absolute path, a URL or the
caller's external id) is identified by tenant + key, with the ``content_hash`` of
its title and segments beside it: ingesting the same source again with the same
hash changes nothing, with another hash replaces the stored version. A document
without a key keeps content identity (tenant + title + text), as before.

Removal: :func:`commit_document_change` is the ONLY function that removes
documents (``DELETE /v1/documents/{id}``, a changed source's replacement, folder
sync) and the only place the ingestion bumps the graph version. It removes the
documents in one write transaction, runs the optional ``write`` step (the
pipeline writing new versions), then bumps the version exactly once and returns
a :class:`DocumentChange` with the passage ids added and the passage and entity
ids removed (the change record for incremental in-process topologies).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from pathweave.store import GraphStore
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
    passages and entities that left the graph, the passages the write step added, the
    entities whose alias edge changed, the removed counts by kind (and the alias groups
    that lost members) and the graph version after the single bump (None when
    nothing changed and the version was not bumped)."""

    removed_doc_ids: list[str] = field(default_factory=list)
    removed_passage_ids: list[str] = field(default_factory=list)
    removed_entity_ids: list[str] = field(default_factory=list)
    added_passage_ids: list[str] = field(default_factory=list)
    alias_entity_ids: list[str] = field(default_factory=list)  # ALIAS_OF edge changed (removal or write)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("passages", "propositions", "triples", "entities", "alias_groups_repaired", "relations"), 0))
    version: int | None = None


def _remove_one(run: Callable[..., list[dict[str, Any]]], doc_id: str, keep_status: Collection[str],
                change: DocumentChange, dimensions: int) -> None:
    """Remove one document inside the caller's transaction (``run(name, **params)``); the
    alias groups that lose entities get the medoid of their remaining members
    (:func:`pathweave_ingest.aliases.repair_after_removal`, ``dimensions``-d vectors)."""
    passage_ids = [r["id"] for r in run("delete_doc_passages", doc_id=doc_id)]
    prop_ids = [r["id"] for r in run("delete_doc_propositions", passage_ids=passage_ids)] if passage_ids else []
    triples = run("delete_doc_triples", passage_ids=passage_ids) if passage_ids else []
    triple_ids = [t["id"] for t in triples]
    source_ids = passage_ids + prop_ids
    candidates = {r["id"] for r in run("delete_doc_candidate_entities", passage_ids=passage_ids,
                                       prop_ids=prop_ids)} if source_ids else set()
    candidates.update(t[k] for t in triples for k in ("subject_id", "object_id") if t[k])
    orphans = [r["id"] for r in run("delete_doc_orphan_entities", entity_ids=sorted(candidates),
                                    source_ids=source_ids, triple_ids=triple_ids)] if candidates else []
    groups = groups_touching(run, orphans)
    if triples:
        run("delete_doc_relates", rows=[{"triple_id": t["id"], "subject_id": t["subject_id"]} for t in triples])
    removed_triples = [r["id"] for r in run("delete_triples_by_id", ids=triple_ids)] if triple_ids else []
    removed_props = [r["id"] for r in run("delete_propositions_by_id", ids=prop_ids)] if prop_ids else []
    if passage_ids:  # APR fact runs only these passages have (spec §3)
        run("apr_delete_passage_runs", passage_ids=passage_ids)
    removed_passages = [r["id"] for r in run("delete_passages_by_id", ids=passage_ids)] if passage_ids else []
    removed_entities = [r["id"] for r in run("delete_entities_by_id", ids=orphans)] if orphans else []
    change.alias_entity_ids.extend(repair_after_removal(run, groups, removed_entities, dimensions))
    relation_ids = sorted({t["relation_id"] for t in triples if t["relation_id"]})
    relations = run("delete_orphan_relations", relation_ids=relation_ids) if relation_ids else []
    run("delete_document_node", doc_id=doc_id)
    if doc_id not in keep_status:
        run("delete_document_status", doc_id=doc_id)
    change.removed_doc_ids.append(doc_id)
    change.removed_passage_ids.extend(removed_passages)
    change.removed_entity_ids.extend(removed_entities)
    for key, value in (("passages", len(removed_passages)), ("propositions", len(removed_props)),
                       ("triples", len(removed_triples)), ("entities", len(removed_entities)),
                       ("alias_groups_repaired", len(groups)),
                       ("relations", int(relations[0]["n"]) if relations else 0)):
        change.counts[key] += value


def commit_document_change(store: GraphStore, remove: Iterable[str] = (),
                           write: Callable[[], tuple[list[str], list[str], list[str]] | None] | None = None,
                           keep_status: Collection[str] = ()) -> DocumentChange:
    """Remove the documents ``remove`` (ids of the store's tenant; unknown ids are
    skipped), then run ``write`` (returns the ids of the passages it wrote, of the
    entities whose synonyms it wrote and of those whose alias edge it changed, when it
    changed the graph; None when it wrote nothing), then bump the tenant's graph version ONCE if anything was removed or
    written, recording the change (:meth:`~pathweave.store.GraphStore.record_change`:
    passages added, passages and entities removed) for the query processes' topologies.

    Removal of a document: its passages (unless another document shares them), the
    propositions and triples only they state/assert (with their RELATES edges), the
    entities nothing else mentions or relates (an alias group that loses its canonical gets
    the medoid of the remaining members; one left alone leaves the group), relations no triple
    uses any more, the APR fact runs no other passage has, the document node
    and, unless its id is in ``keep_status`` (a replacement in flight), its status node. All
    removals run in ONE write transaction (all or nothing); ``write`` runs after it
    commits (its own transactions). An exception from ``write`` propagates after the
    version has been bumped for what was removed.

    Returns the :class:`DocumentChange` (removed ids, added passage ids, counts, version).
    """
    change = DocumentChange()
    doc_ids = list(dict.fromkeys(remove))
    if doc_ids:
        def work(run):
            change.__init__()  # a retried transaction starts over
            present = {r["id"] for r in run("existing_document_hashes", ids=doc_ids)}
            for doc_id in doc_ids:
                if doc_id in present:
                    _remove_one(run, doc_id, keep_status, change, store.dimensions)
                elif doc_id not in keep_status:
                    run("delete_document_status", doc_id=doc_id)

        store.execute_write(work)
    written = None
    try:
        if write is not None:
            written = write()
            change.added_passage_ids = list(written[0]) if written else []
    finally:
        if change.removed_doc_ids or written is not None:
            change.alias_entity_ids += list(written[2]) if written else []
            change.version = store.record_change(
                added=change.added_passage_ids, removed=change.removed_passage_ids,
                removed_entities=change.removed_entity_ids, entities=list(written[1]) if written else [],
                aliases=sorted(set(change.alias_entity_ids)))
    return change
