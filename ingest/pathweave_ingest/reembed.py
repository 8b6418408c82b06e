"""``pathweave reembed``: switch a tenant's vectors to another embedder in place.

Every vector the tenant holds is re-embedded from the texts it was made of at ingestion
(passages as "title\\ntext", propositions, entity and relation names, triples' fact texts
and APR lines, APR runs' texts), page by page in id order; after each page the label and
last id are kept on the tenant's Meta node, so an interrupted run resumes where it stopped
(run the same command again). Meanwhile the tenant is marked as being re-embedded and
refuses queries and ingestion (:class:`~pathweave.embedding.embedder_record.ReembedInProgress`, API
503 with Retry-After): its vectors are of two models.

Then what the vectors decide is found again with the new embedder's thresholds (its
calibration, :mod:`pathweave.embedding.catalog`): the SYNONYM edges (spec §1) and the alias
groups (spec §3, both layers). APR's fact runs keep their segmentation (their vectors are
re-embedded). Last, the tenant's record names the new embedder and the graph version is
bumped, so every query process refreshes its topology and checks the record again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pathweave.embedding import embedder_record
from pathweave.apr.runs import line
from pathweave.settings import Settings
from pathweave.text import fact_text
from pathweave.graph.vectors import encode_vector

#: Labels in the order they are re-embedded (the cursor is "<label>:<last id>").
LABELS = ("passages", "propositions", "entities", "relations", "triples", "runs")


@dataclass
class ReembedReport:
    """What a re-embedding did: ``vectors`` re-embedded per label, ``synonyms`` edges
    written, ``aliases`` entities whose ALIAS_OF changed, ``resumed_from`` the cursor it
    started at (None: from the beginning), ``source``/``target`` embedder names."""

    source: str
    target: str
    vectors: dict[str, int]
    synonyms: int = 0
    aliases: int = 0
    resumed_from: str | None = None


def _texts(label: str, rows: list[dict]) -> list[str]:
    if label == "passages":
        return [f"{row['title']}\n{row['text']}" if row["title"] else row["text"] for row in rows]
    if label == "triples":
        return [fact_text(row["subject"], row["relation"], row["object"]) for row in rows]
    return [row["text"] or "" for row in rows]


def _write_rows(label: str, rows: list[dict], vectors: np.ndarray, lines: np.ndarray | None) -> list[dict]:
    """The write statement's rows of one page."""
    out = []
    for i, (row, vector) in enumerate(zip(rows, vectors)):
        if label == "triples":
            out.append({"id": row["id"], "embedding": vector.tolist() if row["fact"] else None,
                        "line_vec": encode_vector(lines[i]) if row["line"] else None})
        elif label == "runs":
            out.append({"id": row["id"], "embedding": None if row["memory"] else vector.tolist(),
                        "memory_embedding": vector.tolist() if row["memory"] else None, "vec": encode_vector(vector)})
        else:
            out.append({"id": row["id"], "embedding": vector.tolist(), "vec": encode_vector(vector)})
    return out


def reembed(store, embedder, settings: Settings, page: int = 256,
            on_progress: Callable[[str, int], None] | None = None) -> ReembedReport:
    """Re-embed the tenant of ``store`` with ``embedder`` (whose name is ``settings.models.embedder``:
    its thresholds come from ``settings``). ``on_progress(label, vectors_done)`` after each page.
    A tenant already on ``embedder`` (and not half-way) is left as it is. Raises ValueError for
    a vector size the store's indexes do not have, and whatever the store raises (the run can
    be resumed)."""
    from pathweave_ingest import aliases as alias_layers
    from pathweave_ingest.synonyms import write_synonyms

    if int(embedder.dim) != int(store.dimensions):
        raise ValueError(f"embedder {embedder.name} makes {embedder.dim}-d vectors; the store's indexes are "
                         f"{store.dimensions}-d")
    record = embedder_record.read(store)
    source = record.name if record is not None else embedder.name
    if record is None or (record.name == embedder.name and record.reembed_to is None):
        if record is None or not record.recorded:
            embedder_record.claim(store, embedder)
        return ReembedReport(source, embedder.name, {label: 0 for label in LABELS})
    if record.reembed_to not in (None, embedder.name):
        raise embedder_record.EmbedderMismatch(
            f"tenant {store.tenant!r} is half-way re-embedded to {record.reembed_to}: finish that with "
            f"PATHWEAVE_MODELS_EMBEDDER={record.reembed_to} before switching to {embedder.name}")
    cursor = record.reembed_cursor if record.reembed_to == embedder.name else None
    report = ReembedReport(source, embedder.name, {label: 0 for label in LABELS}, resumed_from=cursor)
    start_label, after = (cursor.split(":", 1) if cursor else (LABELS[0], ""))
    store.run("begin_reembed", meta_id=store.meta_id, target=embedder.name, cursor=cursor)
    store.record_change()  # query processes check the record again at once (they check once per version)
    for label in LABELS[LABELS.index(start_label):]:
        while True:
            rows = store.run(f"reembed_page_{label}", after=after, limit=page)
            if not rows:
                break
            vectors = embedder.encode(_texts(label, rows))
            lines = embedder.encode([line((r["subject"], r["relation"], r["object"])) for r in rows]) \
                if label == "triples" else None
            store.run_in_transaction([(f"reembed_write_{label}", {"rows": _write_rows(label, rows, vectors, lines)}),
                                      ("begin_reembed", {"meta_id": store.meta_id, "target": embedder.name,
                                                         "cursor": f"{label}:{rows[-1]['id']}"})])
            after = rows[-1]["id"]
            report.vectors[label] += len(rows)
            if on_progress:
                on_progress(label, report.vectors[label])
        after = ""
    report.synonyms, report.aliases = _relink(store, settings, page, write_synonyms, alias_layers)
    store.run("record_embedder", meta_id=store.meta_id, embedder=embedder.name, dim=int(embedder.dim),
              identity=embedder.identity)
    store.record_change()  # every query process refreshes and checks the record again
    return report


def _relink(store, settings: Settings, page: int, write_synonyms, alias_layers) -> tuple[int, int]:
    """SYNONYM edges and alias groups found again from the new vectors: ``(synonym pairs
    written less those beyond the synonym cap, entities whose ALIAS_OF changed)``."""
    from pathweave.graph.vectors import decode_vectors
    from pathweave_ingest.synonyms import cap_synonyms

    while int(store.run("reembed_clear_synonyms", limit=10_000)[0]["n"]):
        pass
    names: dict[str, str] = {}
    after = ""
    while rows := store.run("reembed_page_entities", after=after, limit=page):
        names.update((row["id"], row["norm_name"] or "") for row in rows)
        after = rows[-1]["id"]
    entity_ids, synonyms = list(names), 0
    for start in range(0, len(entity_ids), page):
        ids = entity_ids[start:start + page]
        vecs = {row["id"]: row["vec"] for row in store.run("subgraph_entities", ids=ids)}
        vectors = decode_vectors([vecs[i] for i in ids], store.dimensions)
        synonyms += write_synonyms(store, ids, vectors, names, settings.ingest.synonym_threshold,
                                   settings.ingest.synonym_max)
        synonyms -= cap_synonyms(store, ids, settings.ingest.synonym_max)
    store.record_change(entities=entity_ids)
    alias_layers.clear_tenant(store)
    changed = alias_layers.consolidate_tenant(store, settings.aliases)
    return synonyms, len(changed)
