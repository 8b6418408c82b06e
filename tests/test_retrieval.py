"""End-to-end retrieval on a small fixture corpus: PropRAG, dense and HippoRAG 2
modes, and the reasoning record persisted to the graph."""

from pathlib import Path
import pytest

from pathweave.records.reasoning import read_reasoning_record
from pathweave.query.retriever import Retriever
from pathweave_ingest.loaders import load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"

QUESTION = "On which river stands the city where Marie Curie was born?"


@pytest.fixture()
def retriever(pipeline, store, embedder, settings):
    documents, errors = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    pipeline.ingest(documents, errors)
    spec = settings.retrieval.model_copy(update={"rescore_top": 40})  # pin the spec's M = 40 on any device
    return Retriever(store, embedder, settings.model_copy(update={"retrieval": spec}))


def test_proprag_finds_both_hops_and_connecting_paths(retriever):
    result = retriever.query(QUESTION, mode="proprag", k=3)
    titles = [hit.title for hit in result.passages]
    assert {"Marie Curie", "Warsaw"} <= set(titles)
    assert [hit.rank for hit in result.passages] == [1, 2, 3]
    assert result.paths and result.paths[0].rank == 1
    assert all(len(path.steps) >= 1 for path in result.paths)
    assert result.paths[0].score >= result.paths[-1].score
    assert any(len(path.steps) > 1 for path in result.paths)
    assert result.seeds and all(0 <= seed.weight <= 1 for seed in result.seeds)
    assert {"topology", "embed", "seeds", "stage1", "fetch", "beam", "stage2", "passages", "record", "total"} <= set(result.timings_ms)


@pytest.mark.parametrize("mode", ["dense", "hipporag2"])
def test_baseline_modes_rank_passages(retriever, mode):
    result = retriever.query(QUESTION, mode=mode, k=5)
    assert len(result.passages) == 5
    assert "Marie Curie" in [hit.title for hit in result.passages]
    assert result.paths == []


def test_reasoning_record_is_written_with_ids_and_links(retriever, store):
    result = retriever.query(QUESTION, mode="proprag", k=3)
    record = retriever.read_record(result.query_id)
    assert record["text"] == QUESTION
    assert [p["path_id"] for p in record["paths"]] == [p.path_id for p in result.paths]
    for stored, path in zip(record["paths"], result.paths):
        assert [s["prop_id"] for s in stored["steps"]] == [s.prop_id for s in path.steps]
        assert [s["order"] for s in stored["steps"]] == list(range(len(path.steps)))
    selected = {(row["label"], row["id"]): row["rank"] for row in record["selected"]}
    for hit in result.passages:
        assert selected[("Passage", hit.passage_id)] == hit.rank
    assert any(label == "Entity" for label, _ in selected)
    assert any(label == "Proposition" for label, _ in selected)


def test_unknown_record_and_bad_queries_raise(retriever, store):
    with pytest.raises(KeyError):
        read_reasoning_record(store, "no-such-query")
    with pytest.raises(ValueError, match="empty"):
        retriever.query("   ")
    with pytest.raises(ValueError, match="unknown mode"):
        retriever.query(QUESTION, mode="magic")


def test_a_new_document_is_found_by_the_very_next_query(retriever, pipeline, settings, tmp_path):
    before = retriever.resources.topology(whole=True).view()
    (tmp_path / "new.txt").write_text("Zakopane is a mountain town famous for its wooden Goral architecture.")
    documents, errors = load_path(tmp_path, settings.ingest.max_file_bytes)
    pipeline.ingest(documents, errors)
    result = retriever.query("Which town is famous for wooden Goral architecture?", k=3, write_record=False)
    after = retriever.resources.topology(whole=True).view()
    assert after.version > before.version  # the write and its links, each recorded
    assert int(after.alive.sum()) == int(before.alive.sum()) + 1
    assert result.passages[0].title == "new" and "Goral" in result.passages[0].text
    assert retriever.resources.topology(whole=True).view() is after  # kept while the version stays
    held = retriever.resources.topology()  # the frontier the query read: the new passage among what it holds
    assert held.view().version == after.version and held.passage_index[result.passages[0].passage_id] in held.passage_props


def test_empty_tenant_returns_no_passages(store, embedder, settings):
    result = Retriever(store, embedder, settings).query(QUESTION, k=3, write_record=False)
    assert result.passages == []


@pytest.mark.parametrize("method", ["ilp", "greedy", "auto"])
def test_budgeted_context_fits_and_is_persisted(retriever, store, method):
    result = retriever.query(QUESTION, mode="proprag", k=3, token_budget=60, selection_method=method)
    context = result.context
    assert context is not None and context.budget == 60
    assert 0 < context.token_count <= 60
    assert context.token_count == retriever.resources.token_counter().count(context.text)
    assert context.lines and context.text.count("\n") == len(context.lines) - 1
    assert any("[" in line.line for line in context.lines)  # passage citations
    record = retriever.read_record(result.query_id)
    selected = {(row["label"], row["id"]): row["rank"] for row in record["selected"]}
    label = {"passage": "Passage", "proposition": "Proposition", "entity": "Entity"}
    assert selected == {(label[line.kind], line.id): line.rank for line in context.lines}


def test_budget_zero_selects_nothing_and_dense_mode_selects_passages(retriever):
    empty = retriever.query(QUESTION, mode="proprag", k=3, token_budget=0)
    assert empty.context.lines == [] and empty.context.token_count == 0
    dense = retriever.query(QUESTION, mode="dense", k=3, token_budget=200)
    assert dense.context.lines and {line.kind for line in dense.context.lines} == {"passage"}
    assert dense.context.token_count <= 200


def test_proprag_candidate_graph_covers_passages_through_their_statements(retriever):
    from pathweave.retrieval.context import (LEAD_WEIGHT, PROPOSITION_SCALE, SEED_PASSAGES,
                                             STATEMENTS_PER_PASSAGE, candidate_graph)

    found = retriever.search(QUESTION, mode="proprag", k=3, write_record=False)
    result, snapshot = found.result, found.subgraph
    graph = candidate_graph(result, snapshot, found.query)
    node, adj = graph.node_map(), graph.adjacency()
    passages = [n for n in graph.nodes if n.kind == "passage"]
    assert {n.id for n in passages} == {hit.passage_id for hit in result.passages}
    p_index = {pid: i for i, pid in enumerate(snapshot.passage_ids)}
    seeded = set()
    for rank, passage in enumerate(passages):  # coverage nodes: no text, reached only through their statements
        assert not passage.rendered and passage.weight > 0
        rows = snapshot.states[p_index[passage.id]].indices
        stated = {snapshot.prop_ids[r] for r in rows}
        shortest = min(len(snapshot.prop_texts[r]) for r in rows)
        linked = set(adj[passage.id])
        assert linked <= stated  # a shortest statement is always a candidate
        assert any(snapshot.prop_ids[r] in linked for r in rows if len(snapshot.prop_texts[r]) == shortest)
        assert len(linked - {s.prop_id for p in result.paths for s in p.steps}) <= STATEMENTS_PER_PASSAGE + 2
        # the lead statement (the passage's first sentence) is a candidate and earns LEAD_WEIGHT
        text = snapshot.passage_texts[p_index[passage.id]]
        leads = [r for r in rows if text.startswith(snapshot.prop_texts[r].removeprefix(f"{passage.citation}: "))]
        assert len(leads) == 1 and snapshot.prop_ids[leads[0]] in linked
        assert node[snapshot.prop_ids[leads[0]]].weight >= LEAD_WEIGHT
        assert all(node[r].kind == "proposition" and node[r].citation == passage.citation for r in linked)
        assert all(not node[r].text.startswith(f"{passage.citation}: ") for r in linked)
        if rank < SEED_PASSAGES:
            seeded |= linked
    assert set(adj["Q"]) == {seed.entity_id for seed in result.seeds} | seeded
    entities = [n for n in graph.nodes if n.kind == "entity"]
    assert entities and not any(n.rendered for n in entities)
    # every proposition on a top path is a candidate with at least PROPOSITION_SCALE x its path's score
    for path in result.paths:
        for step in path.steps:
            assert node[step.prop_id].weight >= PROPOSITION_SCALE * path.score - 1e-9
    # path_weight: a path's final statement earns path_weight x the best score of a path ending there
    chained = candidate_graph(result, snapshot, found.query, path_weight=2.0).node_map()
    ends: dict[str, float] = {}
    for path in result.paths:
        ends[path.steps[-1].prop_id] = max(ends.get(path.steps[-1].prop_id, 0.0), path.score)
    assert ends and any(len(path.steps) > 1 for path in result.paths)  # inner steps earn nothing extra
    for n in graph.nodes:
        assert chained[n.id].weight == pytest.approx(n.weight + 2.0 * ends.get(n.id, 0.0))


def test_lead_statement_is_the_earliest_verbatim_statement():
    from pathweave.retrieval.context import lead_statement

    text = "Kassel is a city on the Fulda river. It is known for the documenta. The city hosts a zoo."
    statements = {7: "Kassel is known for the documenta.", 3: "The city hosts a zoo.",
                  9: "Kassel: Kassel is a city on the Fulda river."}
    assert lead_statement(text, statements, "Kassel") == 9  # the title prefix is the extractor's, not the text's
    assert lead_statement(text, statements) == 3  # without the title, the prefixed statement is not verbatim
    assert lead_statement(text, {1: "Rewritten by a model.", 2: ""}) is None
    assert lead_statement(text, {}) is None


def test_budgeted_proprag_context_is_statements_citing_several_passages(retriever):
    hits = retriever.query(QUESTION, mode="proprag", k=5, write_record=False).passages
    counter = retriever.resources.token_counter()
    full = sum(counter.count(f"- {hit.text} [{hit.title}]") for hit in hits if hit.title in ("Marie Curie", "Warsaw"))

    def cited(budget):
        context = retriever.query(QUESTION, mode="proprag", k=5, token_budget=budget, selection_method="ilp").context
        assert context.optimal and context.token_count <= budget
        assert {line.kind for line in context.lines} == {"proposition"}
        return {line.line.rsplit("[", 1)[1].rstrip("]") for line in context.lines}

    # half the tokens of the two gold passages: one statement from each of two passages, not one passage
    assert len(cited(full // 2)) >= 2
    # their tokens: statements from both hops and more
    assert {"Marie Curie", "Warsaw"} <= cited(full)


def test_queries_run_with_one_blas_thread(retriever, monkeypatch):
    from threadpoolctl import threadpool_info

    def blas_threads():
        return {info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"}

    before, seen = blas_threads(), []
    encode = retriever.embedder.encode

    def spy(texts, **kwargs):
        seen.append(blas_threads())
        return encode(texts, **kwargs)

    monkeypatch.setattr(retriever.embedder, "encode", spy)
    retriever.query(QUESTION, mode="proprag", k=3, write_record=False)
    assert seen and all(threads == {1} for threads in seen)
    assert before == blas_threads() == {1}  # the CPU embedder keeps the process at one BLAS thread


def test_warm_up_runs_unrecorded_title_queries(retriever, store, monkeypatch):
    before, asked = store.counts(), []
    query = Retriever.query

    def spy(self, question, **kwargs):
        asked.append((question, kwargs.get("write_record")))
        return query(self, question, **kwargs)

    monkeypatch.setattr(Retriever, "query", spy)
    assert retriever.warm_up(queries=3) > 0
    assert len(asked) == 3 and all(q.startswith("What is known about ") and w is False for q, w in asked)
    assert store.counts() == before  # nothing recorded


def test_records_are_written_off_the_query_path_and_flush_waits_for_them(retriever, store):
    results = [retriever.query(QUESTION, mode=mode, k=2) for mode in ("proprag", "dense", "proprag")]
    retriever.flush()
    assert retriever.resources.records.failures == 0
    for result in results:  # read straight from the store, after the flush
        record = read_reasoning_record(store, result.query_id)
        assert [p["path_id"] for p in record["paths"]] == [p.path_id for p in result.paths]
        assert {row["id"] for row in record["selected"] if row["label"] == "Passage"} == \
            {hit.passage_id for hit in result.passages}


def test_selection_size_study_on_real_candidate_graphs(retriever):
    """`bench musique`'s ILP-vs-greedy study by candidate-graph size, on the fixture corpus."""
    from pathweave_bench.musique import evaluate_selection_sizes

    study = evaluate_selection_sizes(retriever, [{"question": QUESTION}], passages=(2, 5), budget=60,
                                     reference_ms=1000)
    small, large = study["sizes"]["2"], study["sizes"]["5"]
    assert small["nodes_mean"] < large["nodes_mean"]
    for row in (small, large):
        assert row["ilp_optimal_frac"] == 1.0 and row["ilp_over_best"] == 1.0  # tiny graphs: proved
        assert 0.0 < row["greedy_over_best"] <= 1.0
        assert 0.0 < row["prove_ms_p50"] <= row["prove_ms_p95"] <= 1000


@pytest.mark.neo4j_only
def test_gds_stage1_ranks_like_the_local_push_and_a_new_document_is_found_before_its_projection(
        retriever, pipeline, settings, tmp_path):
    # retrieval.stage1_ppr = gds: stage 1 by gds.pageRank on the tenant's projection, visibly
    # (timings stage1_gds); the next query after an ingest, before the new version is
    # projected, runs the local push on the updated topology (stage1_gds_fallback) and finds it
    gds = Retriever(retriever.store, retriever.embedder, retriever.settings.model_copy(
        update={"retrieval": retriever.settings.retrieval.model_copy(update={"stage1_ppr": "gds"})}),
        cache=retriever.resources.cache)
    assert retriever.store.backend.projector.project_now(retriever.store) is not None
    in_database = gds.query(QUESTION, k=5, write_record=False)
    local = retriever.query(QUESTION, k=5, write_record=False)
    assert "stage1_gds" in in_database.timings_ms and "stage1_gds_fallback" not in in_database.timings_ms
    assert "stage1_gds" not in local.timings_ms
    assert [hit.passage_id for hit in in_database.passages][:3] == [hit.passage_id for hit in local.passages][:3]
    (tmp_path / "new.txt").write_text("Zakopane is a mountain town famous for its wooden Goral architecture.")
    pipeline.ingest(*load_path(tmp_path, settings.ingest.max_file_bytes))
    fresh = gds.query("Which town is famous for wooden Goral architecture?", k=3, write_record=False)
    assert "stage1_gds_fallback" in fresh.timings_ms and fresh.passages[0].title == "new"


def test_a_listener_that_stops_the_query_keeps_its_record_and_one_that_hears_all_sees_the_order(retriever):
    """The events of a query (Retriever.run): ``retrieval`` (its result not answered) then
    ``answer``; a listener that raises at ``retrieval`` (a client that left) ends the query
    with what it raised, and the record is written all the same."""
    heard = []
    result = retriever.query(QUESTION, mode="proprag", k=3, on_event=heard.append)
    assert [event.kind for event in heard] == ["retrieval", "answer"]
    assert heard[0].result.query_id == result.query_id and heard[-1].result is result

    class Left(Exception):
        pass
    seen = []

    def leave(event) -> None:
        seen.append(event.result.query_id)
        raise Left()
    with pytest.raises(Left):
        retriever.query(QUESTION, mode="proprag", k=3, write_record=True, on_event=leave)
    assert retriever.read_record(seen[0])["query_id"] == seen[0]
