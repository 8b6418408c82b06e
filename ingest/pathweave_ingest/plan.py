"""What an ingest does to each document it is given, and what a folder sync removes.

One rule, applied by the ingest itself (:meth:`pathweave_ingest.pipeline.Pipeline.ingest`)
and previewed by ``pathweave ingest DIR --sync --dry-run``, so the preview says what the
sync then does. A document (by its id, :func:`pathweave_ingest.documents.document_id`) is

- *new* when the tenant has no document of that id;
- *changed* when it has a source key (a file path, an external id) and the stored version's
  content hash differs: it replaces the stored version (the atomic swap);
- *acl* when the content is stored already but the document brings another access list:
  the list is set, nothing is re-ingested;
- *unchanged* otherwise.

A folder sync also *removes* the stored documents of the folder (their source under it)
whose file or JSON item is gone; one whose file failed to load is kept (a load error never
removes a document).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pathweave.store.graph_store import GraphStore
from pathweave_ingest.documents import content_hash, document_id
from pathweave_ingest.loaders import LoadError, SourceDocument

Planned = list[tuple[str, SourceDocument]]
"""``(doc_id, document)`` pairs."""


@dataclass
class IngestPlan:
    """What an ingest of some documents does: the documents ``given`` (:data:`Planned`, one
    per id, the last given wins, in the order given), of them the ``new``, ``changed``,
    ``acl`` and ``unchanged`` ones (in that order too) and, for a folder sync, the stored
    documents it ``removed`` (rows ``{doc_id, source, title, content_hash}`` of statement
    ``documents_with_source_prefix``)."""

    given: Planned = field(default_factory=list)
    new: Planned = field(default_factory=list)
    changed: Planned = field(default_factory=list)
    acl: Planned = field(default_factory=list)
    unchanged: Planned = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)

    @property
    def ids(self) -> set[str]:
        """The ids of every document given."""
        return {doc_id for doc_id, _ in self.given}

    @property
    def to_write(self) -> Planned:
        """The new and changed documents, in the order given: those the ingest writes."""
        written = {doc_id for doc_id, _ in self.new + self.changed}
        return [(doc_id, doc) for doc_id, doc in self.given if doc_id in written]


def plan_documents(store: GraphStore, documents: Sequence[SourceDocument]) -> IngestPlan:
    """Classify ``documents`` against what ``store``'s tenant holds (one read,
    ``existing_document_hashes``): see the module's text. Nothing is written."""
    unique = {document_id(store.tenant, doc): doc for doc in documents}
    rows = store.run("existing_document_hashes", ids=list(unique))
    stored = {row["id"]: row["content_hash"] for row in rows}
    stored_acl = {row["id"]: None if row["acl"] is None else sorted(row["acl"]) for row in rows}
    plan = IngestPlan(given=list(unique.items()))
    for doc_id, doc in plan.given:
        if doc_id not in stored:
            plan.new.append((doc_id, doc))
        elif doc.key and stored[doc_id] != content_hash(doc):
            plan.changed.append((doc_id, doc))
        elif doc.acl is not None and sorted(doc.acl) != stored_acl[doc_id]:
            plan.acl.append((doc_id, doc))
        else:
            plan.unchanged.append((doc_id, doc))
    return plan


def sync_plan(store: GraphStore, root: Path, documents: Sequence[SourceDocument],
              errors: Sequence[LoadError]) -> IngestPlan:
    """What a sync of folder ``root`` does, given the ``documents`` loaded from it and the
    ``errors`` of the files that did not load: :func:`plan_documents`, plus the stored
    documents under ``root`` that are not among them and whose file did not fail to load
    (``removed``). Nothing is written."""
    plan = plan_documents(store, documents)
    prefix = str(root.absolute()).rstrip(os.sep) + os.sep
    failed_files = {str(Path(e.source.split("#", 1)[0]).absolute()) for e in errors}
    given = plan.ids
    plan.removed = [row for row in store.run("documents_with_source_prefix", prefix=prefix)
                    if row["doc_id"] not in given and row["source"].split("#", 1)[0] not in failed_files]
    return plan
