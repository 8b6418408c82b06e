"""Stage 1 on a query's frontier (pathweave.graph.frontier), on the real store: the push over
the rows it read equals the exact Personalized PageRank of the tenant's whole graph, with
aliases and after ingests and deletions applied from the change log; a small row budget
reads less than the tenant; a frontier over its memory cap starts again and answers the
same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pathweave.graph.frontier import Frontier
from pathweave.graph.topology import FrontierTopology, Topology
from pathweave.retrieval.proprag import Stage1Seeds, frontier_stage1, stage1
from pathweave.settings import RetrievalSettings
from pathweave_ingest.jobs import delete_document
from pathweave_ingest.loaders import SourceDocument, load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

FIXTURES = Path(__file__).parent / "fixtures"
EXACT = RetrievalSettings(ppr_epsilon=1e-10)  # the push to 1e-10 x degree: the exact scores to 1e-8
"""Power iteration stops at an L1 change of 1e-6, a coarser reference than this."""


def _seeds(whole: Topology, n: int, offset: int = 0) -> Stage1Seeds:
    """Stage-1 seeds of ``n`` propositions and ``n`` passages of ``whole``, as the indexes
    would give them (decreasing cosines)."""
    view = whole.view()
    props = [view.prop_ids[r] for r in sorted(whole.prop_entities)][offset:offset + n]
    passages = [view.passage_ids[p] for p in sorted(whole.passage_props)][offset:offset + n]
    cosines = np.linspace(0.9, 0.5, n).tolist()
    return Stage1Seeds(list(zip(props, cosines)), list(zip(passages, cosines)))


def _by_id(view, scores: np.ndarray) -> dict[str, float]:
    return {view.passage_ids[p]: float(scores[p]) for p in np.flatnonzero(view.alive)}


def _same_scores(store, topology: FrontierTopology, seeds: Stage1Seeds, budget: int = 100_000,
                 frontier: Frontier | None = None) -> Frontier:
    """The frontier's stage 1 (on ``frontier``, else a new one) against the exact one on a
    whole topology read now."""
    whole = Topology(store.tenant)
    whole.refresh(store)
    exact = _by_id(whole.view(), stage1(seeds, whole.view(), EXACT))
    frontier = frontier or Frontier(topology, store, budget=budget)
    view, scores = frontier_stage1(seeds, frontier, EXACT)
    found = _by_id(view, scores)
    assert set(found) <= set(exact)
    assert max(abs(found.get(pid, 0.0) - score) for pid, score in exact.items()) < 1e-8
    top = [pid for pid in sorted(exact, key=lambda pid: -exact[pid]) if exact[pid] > 1e-6][:5]  # above the error
    assert [pid for pid in sorted(found, key=lambda pid: -found[pid]) if found[pid] > 1e-6][:5] == top
    return frontier


@pytest.fixture()
def ingested(pipeline, settings):
    documents, errors = load_path(FIXTURES / "docs", settings.ingest.max_file_bytes)
    pipeline.ingest(documents, errors)
    whole = Topology(pipeline.store.tenant)
    whole.refresh(pipeline.store)
    return whole


def test_the_push_on_the_frontier_equals_the_exact_ppr_of_the_whole_graph(store, ingested):
    topology = FrontierTopology(store.tenant)
    topology.refresh(store)
    assert topology.view().n_passages == 0  # nothing read before a query asks
    _same_scores(store, topology, _seeds(ingested, 3))
    # read on demand: the seeds' passages, then the rows the push asked for (which the seeds'
    # reads may all have brought already in a tenant this small: the push's own count may be 0)
    assert topology.view().n_passages > 0 and topology.complete
    held = set(topology.passage_props)
    _same_scores(store, topology, _seeds(ingested, 3))  # again: what is held is reused
    assert set(topology.passage_props) == held


def test_a_small_row_budget_reads_less_than_the_tenant(store, ingested):
    topology = FrontierTopology(store.tenant)
    topology.refresh(store)
    frontier = Frontier(topology, store, budget=1)
    view, scores = frontier_stage1(_seeds(ingested, 1), frontier, EXACT)
    assert len(topology.passage_props) < len(ingested.passage_props)
    assert (frontier.declined or frontier.read >= frontier.budget) and scores.sum() > 0  # stopped short, ranked


def test_the_frontier_follows_ingests_deletions_and_aliases(pipeline, store, ingested, tmp_path):
    topology = FrontierTopology(store.tenant)
    topology.refresh(store)
    _same_scores(store, topology, _seeds(ingested, 3))
    extra = SourceDocument(str(tmp_path / "krakow.txt"), "Krakow",
                           "Krakow was the capital of Poland before Warsaw. Marie Curie visited Krakow.")
    pipeline.ingest([extra])
    assert topology.refresh(store)
    _same_scores(store, topology, _seeds(ingested, 3))
    # an alias edge between two held entities: both groups change, the push follows
    view = topology.view()
    a, c = sorted(topology.complete)[:2]
    store.run("alias_link", rows=[{"alias": view.entity_ids[a], "canonical": view.entity_ids[c], "score": 0.95,
                                   "method": "knn"}])
    store.record_change(aliases=[view.entity_ids[a]])
    assert topology.refresh(store)
    assert topology.aliases.get(a) == c and c not in topology.complete
    _same_scores(store, topology, _seeds(ingested, 3))
    assert delete_document(store, pipeline._doc_id(extra))["removed"]["passages"] >= 1
    assert topology.refresh(store)
    _same_scores(store, topology, _seeds(ingested, 3))


def test_a_frontier_over_its_cap_starts_again_and_answers_the_same(store, ingested):
    cap = ingested.bytes // 4  # a quarter of what the whole tenant takes
    topology = FrontierTopology(store.tenant, max_bytes=cap)
    topology.refresh(store)
    trims = 0
    for offset in range(6):
        generation = topology.generation
        frontier = Frontier(topology, store, budget=100_000)  # a query starts: over the cap, it starts again
        assert topology.bytes <= cap  # each query starts within the cap, and reads what it needs
        trims += topology.generation != generation
        _same_scores(store, topology, _seeds(ingested, 2, offset), frontier=frontier)
    assert trims >= 1  # the cap was reached, and held


def test_a_read_a_refresh_overtook_is_read_again_before_it_is_applied(store, ingested):
    """What a frontier read while a refresh applied a change may predate the change (a
    passage deleted, an access list changed): it is read again, not applied."""
    topology = FrontierTopology(store.tenant)
    topology.refresh(store)
    reads, applied = [], []

    def read():
        reads.append(len(reads))
        if len(reads) == 1:  # a refresh moves the version while this read is out
            with topology._lock:
                topology.version += 1
        return len(reads)
    assert topology._current(read, applied.append) and applied == [2]
    passage = next(iter(ingested.passage_index))
    topology.read_passages(store, [passage])  # and the real reads apply at the version they saw
    assert topology.passage_index[passage] in topology.passage_props


def test_a_passage_read_brings_its_entities_alias_edges_and_g_sub_reads_their_synonyms(store, ingested, monkeypatch):
    """A passage's rows carry the alias edges of the entities it mentions (``aliased`` /
    ``canonicals`` of ``topology_passage_propositions``): reading it maps them to their
    canonical entity with no alias read of its own and no SYNONYM read. G_sub's entities get
    their SYNONYM edges before stage 2 (:meth:`Frontier.with_synonyms`); the alias edges then
    read are only those of entities not held yet."""
    whole = ingested.view()
    p = next(p for p in range(whole.n_passages) if len(np.unique(
        whole.extras["raw_prop_entities"][whole.states[p].indices].indices)) >= 2)
    mentioned = np.unique(whole.extras["raw_prop_entities"][whole.states[p].indices].indices)
    a, b = (whole.entity_ids[e] for e in mentioned[:2])
    c, d = [whole.entity_ids[e] for e in range(whole.n_entities) if e not in set(mentioned.tolist())][:2]
    store.run("alias_link", rows=[{"alias": a, "canonical": c, "score": 0.95, "method": "knn"}])
    store.write("upsert_synonyms", [{"src": b, "dst": d, "score": 0.9}])
    store.record_change(aliases=[a], entities=[b, d])
    rows = store.run("topology_passage_propositions", ids=[whole.passage_ids[p]])
    assert {(x, y) for row in rows for x, y in zip(row["aliased"], row["canonicals"])} >= {(a, c)}

    topology = FrontierTopology(store.tenant)
    topology.refresh(store)
    asked: list[tuple[str, list]] = []
    real = store.run
    monkeypatch.setattr(store, "run", lambda name, **kw: asked.append((name, list(kw.get("ids") or []))) or
                        real(name, **kw))
    topology.read_passages(store, [whole.passage_ids[p]])
    index = topology.entity_index
    assert topology.aliases.get(index[a]) == index[c] and index[a] in topology.aliases_read
    assert {name for name, _ in asked}.isdisjoint({"topology_entity_aliases", "topology_entity_synonyms"})
    assert not topology.synonyms_read

    asked.clear()
    view = topology.view()
    frontier = Frontier(topology, store)
    newer = frontier.with_synonyms(view, np.asarray([view.passage_ids.index(whole.passage_ids[p])]))
    assert newer is not view and newer.version == view.version
    assert tuple(sorted((index[b], index[d]))) in {tuple(pair) for pair in topology.synonym_pairs.tolist()}
    alias_ids = {i for name, ids in asked if name == "topology_entity_aliases" for i in ids}
    assert d in alias_ids and not alias_ids & {a, b}  # d is new; a and b came with the passage's rows
    assert frontier.with_synonyms(newer, np.asarray([view.passage_ids.index(whole.passage_ids[p])])) is newer


def test_a_hub_entity_over_the_budget_is_declined_on_its_count_without_its_passages(store, ingested, monkeypatch):
    """An entity with more passages than the query's budget plus all the frontier holds
    cannot be completed: the store sends its count, not its passage ids, and the count is
    kept as the floor of its degree."""
    whole = ingested.view()
    counts = np.diff((whole.extras["passage_entities"] != 0).tocsc().indptr)  # passages per entity
    hub = whole.entity_ids[int(np.argmax(counts))]
    assert counts.max() >= 2
    topology = FrontierTopology(store.tenant)
    topology.refresh(store)
    rows: list[dict] = []
    real = store.run

    def run(name, **params):
        found = real(name, **params)
        if name == "frontier_entity_passages":
            rows.extend(found)
        return found
    monkeypatch.setattr(store, "run", run)
    completed, declined, read, moved = topology.complete_entities(store, [hub], budget=1)
    assert not completed and declined == {hub} and read == 0 and not moved
    assert rows and rows[0]["passages"] == [] and rows[0]["degree"] >= counts.max()
    assert topology.floors[topology.entity_index[hub]] == rows[0]["degree"]
    completed, declined, read, moved = topology.complete_entities(store, [hub], budget=1000)
    assert completed == {hub} and read == rows[-1]["degree"] == len(rows[-1]["passages"])
