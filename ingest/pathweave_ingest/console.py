"""Ingestion with a progress bar (:mod:`pathweave.terminal`), for the command line and the
benchmarks. No command definitions here (the CLI imports this)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pathweave.terminal import progress_bar


def run_ingest(store, settings, documents, errors, extraction: Optional[Path] = None, label: str = "ingest",
               remove: list[str] | None = None, keep_texts: bool = False):
    """Ingest ``documents`` with a progress bar (``remove``: ids of documents to delete in the
    same change; ``keep_texts``: keep the embedded texts in the report's profile, for the
    benchmarks' embed-only floor); returns the IngestReport."""
    import time

    from pathweave.embedding.embedders import get_embedder
    from pathweave_ingest.pipeline import Pipeline

    if extraction is not None:
        from pathweave.extractors.imported import ImportedExtractor

        extractor = ImportedExtractor(extraction)
    else:
        from pathweave.extractors import make_extractor

        extractor = make_extractor(settings)
    pipeline = Pipeline(store, get_embedder(settings), extractor, settings, keep_texts=keep_texts)
    started = time.perf_counter()
    with progress_bar() as bar:
        task = bar.add_task(label, total=len(documents), rate="")

        def on_progress(docs_done: int, passages: int) -> None:
            rate = passages / max(time.perf_counter() - started, 1e-9)
            bar.update(task, completed=docs_done, rate=f"{rate:.1f} passages/s")

        return pipeline.ingest(documents, errors, on_progress, remove=remove)
