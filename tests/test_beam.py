"""Beam search over proposition paths on a small hand-built proposition graph."""

import numpy as np
import scipy.sparse as sp

from pathweave.retrieval.beam import beam_search
from pathweave.settings import RetrievalSettings
from pathweave.graph.subgraph import Subgraph


def unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def make_subgraph(prop_vectors, prop_entities, synonyms=None, n_entities=4):
    """Propositions with given vectors and entity incidence; one passage stating them all."""
    n_r = len(prop_vectors)
    pe = sp.csr_matrix(np.asarray(prop_entities, dtype=np.float32))
    syn = sp.csr_matrix(synonyms if synonyms is not None else np.zeros((n_entities, n_entities)))
    return Subgraph(
        version=1, passage_ids=["p0"], passage_titles=["t"], passage_texts=["x"], passage_docs=["d"],
        passage_emb=np.zeros((1, 3), dtype=np.float32), prop_ids=[f"r{i}" for i in range(n_r)],
        prop_texts=[f"prop {i}" for i in range(n_r)], prop_emb=np.stack([unit(v) for v in prop_vectors]),
        entity_ids=[f"e{i}" for i in range(n_entities)], entity_names=[f"E{i}" for i in range(n_entities)],
        entity_emb=np.eye(n_entities, 3, dtype=np.float32), states=sp.csr_matrix(np.ones((1, n_r))),
        prop_entities=pe, synonyms=syn, adjacency=sp.csr_matrix((n_entities + 1, n_entities + 1)),
    )


def no_encoder(texts):
    raise AssertionError("re-scoring must not run with rescore_top=0")


def test_beam_finds_the_known_best_two_hop_path():
    query = unit([1, 1, 0])
    # r0 ~ first half of the query, r1 ~ second half and shares entity E1 with r0,
    # r2 is close to the query on its own but shares no entity with r0 (only reachable as a jump),
    # r3 is unrelated.
    vectors = [[1, 0.05, 0], [0.05, 1, 0], [1, 0.6, 0.9], [0, 0, 1]]
    entities = [[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    subgraph = make_subgraph(vectors, entities)
    params = RetrievalSettings(beam_width=2, jump_points=1, rescore_top=0, max_depth=2, top_paths=3)
    top, initial, graph = beam_search(query, subgraph, np.ones(4, dtype=bool), params, no_encoder)
    # hand computation: path (r0, r1) has mean ~ (1.05, 1.05, 0) -> cosine ~1.0 with the query
    assert top[0].props == (0, 1)
    assert top[0].score > 0.99
    assert graph.via(0, 1) == "E1"
    assert graph.via(0, 2) is None  # a jump, no shared entity
    assert [p.props for p in initial] == [(2,), (0,)]


def test_beam_follows_synonym_edges_and_skips_repeats():
    query = unit([1, 1, 0])
    vectors = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    entities = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    synonyms = np.zeros((4, 4))
    synonyms[0, 1] = synonyms[1, 0] = 0.9  # E0 ~ E1: r0 and r1 are neighbours
    subgraph = make_subgraph(vectors, entities, synonyms)
    params = RetrievalSettings(beam_width=1, jump_points=0, rescore_top=0, max_depth=3, top_paths=5)
    top, _, graph = beam_search(query, subgraph, np.ones(3, dtype=bool), params, no_encoder)
    assert top[0].props in {(0, 1), (1, 0)}
    assert all(len(set(p.props)) == len(p.props) for p in top)
    assert graph.via(0, 1) == "E1"
    weak = make_subgraph(vectors, entities, synonyms * 0.7 / 0.9)  # below the 0.75 step threshold
    top, _, _ = beam_search(query, weak, np.ones(3, dtype=bool), params, no_encoder)
    assert all(len(p.props) == 1 for p in top)


def test_rescoring_replaces_the_mean_score():
    query = unit([1, 1, 0])
    vectors = [[1, 0, 0], [0, 1, 0], [0.7, 0.7, 0.1]]
    entities = [[1, 0, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]
    subgraph = make_subgraph(vectors, entities)
    calls = []

    def encode(texts):
        calls.append(list(texts))
        # the concatenation "prop 2 prop 0" (or reversed) is scored as a perfect match
        return np.stack([query if "prop 2" in t and "prop 0" in t else unit([0, 0, 1]) for t in texts])

    params = RetrievalSettings(beam_width=1, jump_points=0, rescore_top=40, max_depth=2, top_paths=5)
    top, _, _ = beam_search(query, subgraph, np.ones(3, dtype=bool), params, encode)
    assert calls, "candidates beyond the beam width are re-scored by their concatenated text"
    assert set(top[0].props) == {0, 2}
    assert top[0].score > 0.999


def test_rescoring_stops_after_rescore_until_depth():
    query = unit([1, 1, 0])
    vectors = [[1, 0, 0], [0, 1, 0], [0.7, 0.7, 0.1], [0.6, 0.6, 0.5]]
    entities = [[1, 0, 0, 0]] * 4  # every proposition neighbours every other one
    subgraph = make_subgraph(vectors, entities)
    depths = []

    def encode(texts):
        depths.append({len(t.split(" prop ")) for t in texts})  # propositions per re-scored text
        return np.stack([unit(v) for v in np.random.default_rng(0).random((len(texts), 3))])

    every = RetrievalSettings(beam_width=1, jump_points=0, rescore_top=40, max_depth=3, top_paths=5)
    beam_search(query, subgraph, np.ones(4, dtype=bool), every, encode)
    assert depths == [{2}, {3}]  # the spec: every level with more candidates than the beam
    depths.clear()
    first = every.model_copy(update={"rescore_until_depth": 2})
    top, _, _ = beam_search(query, subgraph, np.ones(4, dtype=bool), first, encode)
    assert depths == [{2}]  # depth 3 keeps the mean-embedding score
    three = [p for p in top if len(p.props) == 3]
    assert three and all(abs(p.score - float(unit(subgraph.prop_emb[list(p.props)].mean(axis=0)) @ query)) < 1e-5
                         for p in three)


def test_auto_rescoring_is_resolved_per_device():
    auto = RetrievalSettings()
    gpu, cpu = auto.for_device("cuda:0"), auto.for_device("cpu")
    assert (gpu.rescore_top, gpu.rescore_until_depth) == (40, None)  # the spec on a GPU
    assert (cpu.rescore_top, cpu.rescore_until_depth) == (auto.rescore_top_cpu, auto.rescore_until_depth_cpu)
    fixed = RetrievalSettings(rescore_top=5)
    assert fixed.for_device("cpu") is fixed and fixed.for_device("cuda") is fixed
