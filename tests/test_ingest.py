"""Ingestion against the real ArcadeDB server with the real spaCy extractor and embedder."""

from pathlib import Path
import json

import numpy as np
import pytest

from pathweave_ingest.loaders import load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"


def ingest_dir(pipeline, path, settings):
    documents, errors = load_path(path, settings.ingest.max_file_bytes)
    return pipeline.ingest(documents, errors)


def test_reingesting_the_same_input_changes_nothing(pipeline, store, settings):
    first = ingest_dir(pipeline, FIXTURES / "docs", settings)
    assert first.errors == []
    assert first.documents_new == 8 and first.passages_new == 8
    counts = store.counts()
    assert counts["Passage"] == 8 and counts["Document"] == 8
    assert counts["Proposition"] >= 15 and counts["Entity"] >= 15
    assert counts["rel:STATES"] >= counts["Proposition"]
    assert counts["rel:MENTIONS"] > 0 and counts["rel:RELATES"] > 0
    version = store.graph_version()
    second = ingest_dir(pipeline, FIXTURES / "docs", settings)
    assert second.documents_new == 0 and second.passages_new == 0
    assert store.counts() == counts
    assert store.graph_version() == version  # nothing changed: caches stay valid


def test_every_node_carries_the_tenant_and_embeddings(pipeline, store, settings):
    ingest_dir(pipeline, FIXTURES / "docs" / "corpus.json", settings)
    rows = store.run("snapshot_passages")
    assert {row["title"] for row in rows} == {"Marie Curie", "Warsaw", "Vistula", "Pierre Curie", "Paris"}
    assert all(len(row["embedding"]) == 384 for row in rows)
    assert len(store.run("snapshot_propositions")) > 5


@pytest.mark.parametrize("name, content, reason", [
    ("empty.txt", b"", "empty file"),
    ("blank.md", b"   \n\n", "empty file"),
    ("binary.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file"),
    ("latin1.txt", "Caf\u00e9 cr\u00e8me".encode("latin-1"), "not valid UTF-8"),
    ("broken.json", b'[{"title": "x", "text": "y"', "invalid JSON"),
    ("wrong.json", b'{"docs": 3}', "non-empty string 'text'"),
    ("lines.jsonl", b'{"title": "a", "text": "ok"}\n{not json}\n', "invalid JSON on line 2"),
    ("table.csv", b"a,b\n1,2\n", "unsupported file type"),
])
def test_bad_input_is_rejected_with_a_clear_reason_and_nothing_written(tmp_path, pipeline, store, settings,
                                                                       name, content, reason):
    (tmp_path / name).write_bytes(content)
    (tmp_path / "good.txt").write_text("Ada Lovelace worked with Charles Babbage in London.")
    documents, errors = load_path(tmp_path / name, settings.ingest.max_file_bytes)
    assert documents == [] or name in ("wrong.json",)
    assert any(reason in e.reason and name in e.source for e in errors), errors
    report = pipeline.ingest(documents, errors)
    assert report.documents_new == 0
    assert store.counts() == {}
    # the rest of a batch proceeds
    documents, errors = load_path(tmp_path, settings.ingest.max_file_bytes)
    report = pipeline.ingest(documents, errors)
    assert report.documents_new == 1 and any(name in e.source for e in report.errors)


def test_huge_file_is_rejected_before_reading(tmp_path, settings):
    big = tmp_path / "huge.txt"
    with open(big, "wb") as handle:
        handle.truncate(50 * 1024 * 1024)  # sparse 50 MB file
    documents, errors = load_path(big, settings.ingest.max_file_bytes)
    assert documents == []
    assert "file too large" in errors[0].reason and "huge.txt" in errors[0].source


def test_cypher_looking_text_is_stored_verbatim_and_runs_nothing(tmp_path, pipeline, store, settings):
    payload = "Robert'); MATCH (n) DETACH DELETE n; // \" } RETURN 1 UNION MATCH (m) SET m.x = 1"
    (tmp_path / "inject.json").write_text(json.dumps([{"title": "MATCH (n) DETACH DELETE n", "text": payload}]))
    report = ingest_dir(pipeline, tmp_path, settings)
    assert report.documents_new == 1 and report.errors == []
    rows = store.run("snapshot_passages")
    assert [row["text"] for row in rows] == [payload]
    assert [row["title"] for row in rows] == ["MATCH (n) DETACH DELETE n"]


def test_missing_path_raises(tmp_path, settings):
    with pytest.raises(FileNotFoundError):
        load_path(tmp_path / "nope", settings.ingest.max_file_bytes)


def test_long_document_is_chunked_with_overlap(tmp_path, pipeline, store, settings):
    sentences = " ".join(f"Sentence number {i} mentions the city of Krakow." for i in range(120))
    (tmp_path / "long.txt").write_text(sentences)
    report = ingest_dir(pipeline, tmp_path, settings)
    assert report.passages_new >= 3
    assert store.counts()["rel:NEXT"] == report.passages_new - 1


def test_markdown_markup_is_removed(tmp_path, settings):
    (tmp_path / "readme.md").write_text("# Tool\n\n<img src='x.png'>\n**Tool** is [fast](http://x).\n```\ncode\n```\n")
    (doc,), errors = load_path(tmp_path / "readme.md", settings.ingest.max_file_bytes)
    assert errors == [] and doc.title == "Tool"
    assert doc.text == "Tool\n\nTool is fast."


@pytest.mark.parametrize("synonymy", ["index", "gds"])
def test_synonyms_through_the_vector_index_equal_exact_knn(synonymy, store, embedder, extractor, settings):
    """Ingestion asks the store's Entity vector index for synonyms, batch by batch (no
    tenant-wide entity matrix), or with ``ingest.synonymy = gds`` on Neo4j + GDS ``gds.knn``
    over the tenant where the batch is a bulk load: the edges must equal an exact cosine kNN
    over all entities."""
    from pathweave.store.backends import Capability
    from pathweave.text import alnum_count
    from pathweave_ingest.aliases import entity_count
    from pathweave_ingest.pipeline import Pipeline
    from pathweave_ingest.synonyms import tenant_knn_pays

    ingest = settings.ingest.model_copy(update={"synonymy": synonymy})
    pipeline = Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant,
                                                                                "ingest": ingest}))
    gds = synonymy == "gds" and Capability.KNN in store.backend.capabilities
    documents, _ = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    methods = set()
    for document in documents:
        before = entity_count(store, 10**9)
        report = pipeline.ingest([document])
        if report.entities_new:
            methods.add(report.synonymy)
            bulk = tenant_knn_pays(report.entities_new, before + report.entities_new)
            assert report.synonymy == ("gds.knn" if gds and bulk else "vector index")
    # with gds.knn: the first document is a bulk load, later ones add a few entities
    assert methods == ({"gds.knn", "vector index"} if gds else {"vector index"})
    rows = store.run("entity_embeddings")
    ids = [row["id"] for row in rows]
    vectors = np.asarray([row["embedding"] for row in rows], dtype=np.float32)
    ok = [alnum_count(row["norm_name"]) > 2 for row in rows]
    cosine = vectors @ vectors.T
    exact = {(min(ids[a], ids[b]), max(ids[a], ids[b]))
             for a, b in zip(*np.nonzero(cosine >= settings.ingest.synonym_threshold)) if a != b and ok[a] and ok[b]}
    stored = store.run("snapshot_synonyms")
    assert exact and {(min(r["src"], r["dst"]), max(r["src"], r["dst"])) for r in stored} == exact
    # the bounded count: exact below its cap, the cap above it
    assert entity_count(store, 10**9) == len(ids) > 3 and entity_count(store, 3) == 3
    for row in stored:
        a, b = ids.index(row["src"]), ids.index(row["dst"])
        assert row["score"] == pytest.approx(float(cosine[a, b]), abs=1e-4)


def test_groups_in_flight_give_the_same_graph_as_one_group(store, embedder, extractor, settings):
    """With groups of 2 documents, extraction, embedding and writing of different groups
    overlap (three threads); the graph must equal the one a single group writes."""
    import uuid

    from pathweave.store.graph_store import GraphStore
    from pathweave_ingest.pipeline import Pipeline

    documents, _ = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    other = GraphStore(store.driver, store.database, store.backend, f"t{uuid.uuid4().hex[:10]}",
                       store.batch_size, store.dimensions)
    small = Pipeline(store, embedder, extractor, settings, group_size=2).ingest(documents)
    whole = Pipeline(other, embedder, extractor, settings.model_copy(update={"tenant": other.tenant}),
                     group_size=1000).ingest(documents)
    assert small.errors == whole.errors == []
    assert small.documents_new == whole.documents_new == 8
    assert (small.passages_new, small.propositions_new, small.entities_new, small.triples) == \
        (whole.passages_new, whole.propositions_new, whole.entities_new, whole.triples)
    assert store.counts() == other.counts()



def test_the_graph_does_not_depend_on_the_order_documents_are_written_in(store, embedder, extractor, settings):
    """A proposition names its passage's title even where the text does not (the sentence is
    made self-contained with it): that entity is written with the proposition, so its
    MENTIONS edge exists whether or not another document created the entity first (groups
    in a different order, or two workers)."""
    import uuid

    from pathweave.store.graph_store import GraphStore
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.pipeline import Pipeline

    lighthouse = SourceDocument("a.txt", "Brass Lighthouse", "Construction began in 1820 under Admiral Verenne. "
                                                             "Its lamp burned whale oil until 1870.")
    harbour = SourceDocument("b.txt", "Quillon", "Quillon is a harbour town famous for the Brass Lighthouse.")
    other = GraphStore(store.driver, store.database, store.backend, f"t{uuid.uuid4().hex[:10]}",
                       store.batch_size, store.dimensions)
    first = Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant}))
    second = Pipeline(other, embedder, extractor, settings.model_copy(update={"tenant": other.tenant}))
    for pipeline, order in ((first, (lighthouse, harbour)), (second, (harbour, lighthouse))):
        for document in order:
            assert pipeline.ingest([document]).errors == []
    assert store.counts() == other.counts()
    assert store.counts()["rel:MENTIONS"] > 0

TWIN_DOCS = [
    ("Velmora Harbour", "Velmora Harbour was built by Anselm Trevik in 1821. The Velmora Harbor Company ran its ferries "
                        "to Kestrin Island until 1902."),
    ("Kestrin Island", "Kestrin Island lies north of Velmora. The Kestrin Island Lighthouse was designed by Anselm "
                       "Trevik, who also built the Kestrin Valley Railway."),
    ("Anselm Trevik", "Anselm Trevik was an engineer from Dalmere. Ships of the Velmora Harbor Company sailed "
                      "from Velmora Harbor to Dalmere."),
]


def test_a_twin_tenant_is_not_crowded_by_its_twin(base_store, embedder, extractor, settings):
    # bench api's in-process tenant beside the worker's: the same documents, so every entity
    # has a twin in the shared index at cosine 1. That twin must not make each kNN ask
    # again with a wider k (it did: the in-process ingestion ran at half the worker's speed)
    import collections
    import uuid

    from pathweave.store.graph_store import GraphStore
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.pipeline import Pipeline

    figures = []
    for _ in range(2):
        store = GraphStore(base_store.driver, base_store.database, base_store.backend, f"t{uuid.uuid4().hex[:10]}",
                           base_store.batch_size, base_store.dimensions)
        asks: collections.Counter = collections.Counter()
        run = store.run

        def counted(name, _run=run, _asks=asks, **params):
            if name == "vector_knn":
                _asks[params["k"]] += len(params["rows"])
            return _run(name, **params)

        store.run = counted
        pipeline = Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant}))
        report = pipeline.ingest([SourceDocument(f"twin#{i}", title, text) for i, (title, text) in enumerate(TWIN_DOCS)], [])
        assert report.errors == [] and report.passages_new == 3
        figures.append((dict(asks), store.counts().get("rel:SYNONYM", 0), store.counts().get("rel:ALIAS_OF", 0)))
    (first_asks, *first_edges), (twin_asks, *twin_edges) = figures
    assert twin_asks == first_asks and first_asks  # synonymy by the vector index (the default on both stores)
    assert twin_edges == first_edges and first_edges[0] > 0


def test_the_report_profiles_every_stage_and_keeps_what_was_embedded(store, embedder, extractor, settings):
    """Issue 32: the report's profile has busy seconds for each stage the ingestion ran, counts
    every text sent to the embedder, and (keep_texts) keeps those texts so that a benchmark can
    time the embedder alone on exactly them; ingesting the same input again embeds nothing."""
    from pathweave_ingest.pipeline import Pipeline
    from pathweave_ingest.profile import STAGES, embed_only_seconds, tokens_of

    pipeline = Pipeline(store, embedder, extractor, settings.model_copy(update={"tenant": store.tenant}),
                        keep_texts=True)
    documents, _ = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    report = pipeline.ingest(documents)
    profile = report.profile
    assert set(profile.seconds) == set(STAGES)
    assert all(profile.seconds[stage] > 0 for stage in STAGES), profile.seconds
    counts = store.counts()
    nodes = sum(counts.get(label, 0) for label in ("Passage", "Proposition", "Entity", "Relation", "Triple"))
    # each new node's text, then the APR fact runs' triple lines and run texts
    assert profile.texts_embedded >= nodes
    assert sum(map(len, profile.calls)) == profile.texts_embedded
    assert embed_only_seconds(embedder.encode, profile.calls) > 0
    assert tokens_of(embedder.tokenizer, profile.calls) > profile.texts_embedded
    again = pipeline.ingest(documents).profile
    assert again.texts_embedded == 0 and again.calls == []


def test_batch_log_lines_sum_to_the_profile_of_a_tenant():
    """bench api reads the workers' batch lines (pathweave_ingest.tasks.run_batch) back into a
    profile: only the tenant's lines, stage seconds and texts summed."""
    import json

    from pathweave_bench.api import batch_profile
    from pathweave_ingest.profile import IngestProfile
    from pathweave_ingest.tasks import BatchOutcome

    outcome = BatchOutcome(passages=3, profile=IngestProfile())
    outcome.profile.add("embed", 1.5)
    outcome.profile.add("write", 0.25)
    outcome.profile.texts_embedded = 7
    def line(tenant: str) -> str:
        return f"batch of 3 for {tenant} (job j1): {json.dumps(outcome.summary())}"

    lines = ["[2026-11-26 INFO] " + line("acme"), line("acme"), line("other"), "unrelated"]
    total = batch_profile(lines, "acme")
    assert total["batches"] == 2 and total["texts_embedded"] == 14
    assert total["stages_s"]["embed"] == 3.0 and total["stages_s"]["write"] == 0.5 and total["stages_s"]["chunk"] == 0


def test_same_graph_tolerates_only_the_approximate_edges():
    from pathweave_bench.api import same_graph

    reference = {"Passage": 10, "Entity": 50, "rel:MENTIONS": 80, "rel:SYNONYM": 1000, "rel:ALIAS_OF": 100}
    assert same_graph(dict(reference), reference) == {"same": True, "differences": {}}
    assert same_graph({**reference, "Job": 2}, {**reference, "Job": 1})["same"]  # one job per submission
    assert same_graph({**reference, "rel:SYNONYM": 1008}, reference)["same"]  # within 1 %
    assert not same_graph({**reference, "rel:SYNONYM": 1020}, reference)["same"]
    lost = same_graph({**reference, "Passage": 9}, reference)
    assert not lost["same"] and lost["differences"] == {"Passage": [9, 10]}
    assert not same_graph({k: v for k, v in reference.items() if k != "rel:MENTIONS"}, reference)["same"]
