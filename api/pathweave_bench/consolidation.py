"""Alias consolidation on the MuSiQue sample (spec §3 "Entity consolidation";
``pathweave bench reuse`` reports these figures): entity count and PropRAG Recall@5 without
alias groups and with them, both taken in one run on the same store.

:func:`consolidation_figures` takes a retriever on a tenant that already holds the MuSiQue
corpus (:func:`pathweave_bench.musique.load_musique`), removes the tenant's alias edges
(the baseline), measures, consolidates every entity of the tenant
(:func:`pathweave_ingest.aliases.consolidate_tenant`, as the ingestion batches would) and
measures again. The query process's topology follows both changes through the graph-change
log, as a serving process would.
"""

from __future__ import annotations

import time

from rich.console import Console

from pathweave.query.retriever import Retriever
from pathweave.settings import AliasSettings
from pathweave_bench.musique import evaluate
from pathweave_ingest.aliases import canonical_count, clear_tenant, consolidate_tenant
from pathweave.terminal import progress_bar, stdout_console


def consolidation_figures(retriever: Retriever, questions: list[dict], params: AliasSettings | None = None,
                          console: Console | None = None) -> dict:
    """``{entities_before, entities_after, recall_at_5_before, recall_at_5_after, ...}`` for
    ``questions`` (MuSiQue rows with ``paragraphs``) on ``retriever``'s tenant:
    ``entities_before`` all entities, ``entities_after`` the canonical ones (entities that are
    no alias), Recall@5 of ``proprag`` over the questions before and after; also
    ``alias_edges``, ``recall_at_2_before/after`` and ``consolidation_s`` (seconds of the
    whole-tenant pass). ``params``: the consolidation settings (default: the retriever's).
    Leaves the tenant consolidated."""
    store = retriever.store
    params = params or retriever.settings.aliases
    console = console or stdout_console()
    clear_tenant(store)
    entities = canonical_count(store)
    before = evaluate(retriever, questions, "proprag", console)
    started = time.perf_counter()
    with progress_bar() as progress:
        task = progress.add_task("alias consolidation", total=entities, rate="")

        def advance(done: int) -> None:
            rate = done / max(time.perf_counter() - started, 1e-9)
            progress.update(task, completed=done, rate=f"{rate:.0f} entities/s")

        consolidate_tenant(store, params, on_progress=advance)
    seconds = time.perf_counter() - started
    after_entities = canonical_count(store)
    after = evaluate(retriever, questions, "proprag", console)
    return {"entities_before": entities, "entities_after": after_entities,
            "alias_edges": entities - after_entities,
            "recall_at_5_before": before["recall_at_5"], "recall_at_5_after": after["recall_at_5"],
            "recall_at_2_before": before["recall_at_2"], "recall_at_2_after": after["recall_at_2"],
            "consolidation_s": round(seconds, 1)}
