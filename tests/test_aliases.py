"""Two-layer alias consolidation (spec §3 "Entity consolidation", §0 ALIAS_OF) on the real
ArcadeDB server with the real default embedder and spaCy extractor: union-find groups and
their reversal, groups written by an ingest, retrieval through a merged alias, groups kept
consistent by a document delete, layer-2 k-means, and the incremental topology."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from pathweave.query.retriever import Retriever
from pathweave.settings import AliasSettings
from pathweave.text import normalize, stable_id
from pathweave.graph.topology import Topology
from pathweave.graph.vectors import decode_vectors, encode_vector
from pathweave_cli.main import app
from pathweave_ingest.aliases import (canonical_count, clear_tenant, consolidate, consolidate_tenant, describe_groups,
                                      merge_pairs, neighbour_count, numbers_agree, split, union_find)
from pathweave_ingest.jobs import delete_document
from pathweave_ingest.loaders import SourceDocument

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

DIM = 384

# Cosines (measured) with bge-small, the default (its alias threshold 0.928), and MiniLM (0.93):
# "Paris University" / "University of Paris" 0.954 / 0.979, "Barack Obama" / "Obama" 0.958 / 0.941,
# "New York City" / "New York" 0.964 / 0.948 (merged); "Marie Curie" / "Curie" 0.847 / 0.730,
# "Warsaw" / "Warszawa" 0.751 / 0.542 (not merged).
DOCS = {
    "award": ("Holm award", "Paris University awarded a doctorate to Lena Holm in 1903."),
    "quarter": ("Latin Quarter", "The University of Paris stands in the Latin Quarter beside the Pantheon."),
    "obama": ("Obama birth", "Barack Obama was born in Honolulu in Hawaii."),
    "columbia": ("Obama study", "Obama studied political science at Columbia University in New York."),
    "curie": ("Curie", "Marie Curie was born in Warsaw. Curie moved to Paris."),
}


def documents(*keys: str) -> list[SourceDocument]:
    return [SourceDocument(f"aliases#{k}", DOCS[k][0], DOCS[k][1]) for k in keys]


def unit(*pairs) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    for i, x in pairs:
        v[i] = x
    return v / np.linalg.norm(v)


def entity_id(store, name: str) -> str:
    return stable_id("entity", store.tenant, normalize(name))


def write_entities(store, vectors: dict[str, np.ndarray], types: dict[str, str] | None = None) -> dict[str, str]:
    """Entities named by the keys of ``vectors`` (hand-made embeddings; type ORG unless
    ``types`` says otherwise); returns name -> id."""
    ids = {name: entity_id(store, name) for name in vectors}
    store.write("upsert_entities", [{"entity_id": ids[n], "tenant": store.tenant, "name": n, "norm_name": normalize(n),
                                     "type": (types or {}).get(n, "ORG"), "embedding": v.tolist(),
                                     "vec": encode_vector(v)} for n, v in vectors.items()])
    return ids


def write_synonyms(store, ids: list[str], vectors: np.ndarray, threshold: float = 0.9) -> tuple[float, int]:
    """The SYNONYM edges ingestion's synonymy step writes for the entities ``ids`` (cosine >=
    ``threshold`` between them; exact, where the shared vector index is approximate and holds
    other tests' copies of these hand-made vectors); returns the ``synonyms`` argument of
    :func:`consolidate` that makes layer 1 read them."""
    cos = vectors @ vectors.T
    store.write("upsert_synonyms", [{"src": min(ids[i], ids[j]), "dst": max(ids[i], ids[j]), "score": float(cos[i, j])}
                                    for i in range(len(ids)) for j in range(i + 1, len(ids)) if cos[i, j] >= threshold])
    return threshold, 100


def edges(store) -> dict[str, tuple[str, float, str]]:
    """alias id -> (canonical id, score, method) as stored."""
    return {row["alias"]: (row["canonical"], row["score"], row["method"]) for row in store.run("alias_groups")}


def test_k_and_number_rule():
    assert [neighbour_count(n) for n in (0, 24, 25, 100, 2499, 2500, 10**6)] == [5, 5, 5, 10, 49, 50, 50]
    assert not numbers_agree("march 1 2001", "march 2 2001") and not numbers_agree("interstate 95", "interstate 93")
    assert numbers_agree("university of paris", "paris university") and numbers_agree("1903 prize", "prize 1903")


def test_union_find_groups_from_a_hand_made_pair_list_and_their_reversal_by_split(store):
    # pure union-find: chains join, singletons never form a group
    assert union_find([("b", "c"), ("d", "e"), ("a", "b"), ("x", "x")]) == [["a", "b", "c"], ["d", "e"]]
    # on the store: three points on an arc (b in the middle), and a separate pair d-e
    vec = {"Alpha": unit((0, 1.0), (1, 0.3)), "Beta": unit((0, 1.0)), "Gamma": unit((0, 1.0), (1, -0.3)),
           "Delta": unit((5, 1.0), (6, 0.1)), "Epsilon": unit((5, 1.0), (6, -0.1))}
    ids = write_entities(store, vec)
    a, b, c, d, e = (ids[n] for n in ("Alpha", "Beta", "Gamma", "Delta", "Epsilon"))
    pairs = [(a, b, 0.958), (b, c, 0.958), (d, e, 0.98)]
    changed = store.execute_write(lambda run: merge_pairs(run, pairs, DIM))
    assert set(changed) == {a, b, c, d, e}
    stored = edges(store)
    # medoid by hand: Beta has the largest mean cosine to Alpha, Beta, Gamma
    assert {m: stored[m][0] for m in (a, c)} == {a: b, c: b} and b not in stored
    assert stored[a][1] == pytest.approx(float(vec["Alpha"] @ vec["Beta"]), abs=1e-5) and stored[a][2] == "knn"
    assert stored[d][0] == e  # a pair is a tie: the longer name is canonical
    # the same pairs again change nothing
    assert store.execute_write(lambda run: merge_pairs(run, pairs, DIM)) == []

    # undo: split an alias off, then dissolve the other group through its canonical
    assert split(store, "Alpha") == [a]
    stored = edges(store)
    assert a not in stored and stored[b][0] == c and set(stored) == {b, d}  # the rest's medoid: a tie, longer name
    assert split(store, "Epsilon") == sorted([d, e])
    assert set(edges(store)) == {b}
    flagged = {row["id"] for row in store.run("alias_entities", ids=list(ids.values())) if row["split"]}
    assert flagged == {a, d, e}
    # later batches do not merge them again (layer 1 through the vector index)
    consolidate(store, [a, d, e], np.stack([vec["Alpha"], vec["Delta"], vec["Epsilon"]]),
                {a: "alpha", d: "delta", e: "epsilon"}, AliasSettings(threshold=0.93))
    assert set(edges(store)) == {b}
    # bad input: a clear error and nothing changed
    version = store.graph_version()
    with pytest.raises(ValueError, match="no alias group"):
        split(store, "Alpha")
    with pytest.raises(LookupError, match="no entity"):
        split(store, "Omega")
    assert store.graph_version() == version and set(edges(store)) == {b}


def test_layer1_reads_the_synonym_edges_written_for_the_batch(store):
    # ingestion's synonymy step wrote SYNONYM edges for the batch (vector index or gds.knn):
    # layer 1 takes its neighbours from them instead of asking the index again (here
    # deliberately unlike the vectors, which are orthogonal, to see which was read)
    vec = {"Kappa One": unit((0, 1.0)), "Kappa Uno": unit((1, 1.0)), "Lambda": unit((2, 1.0))}
    ids = write_entities(store, vec)
    store.write("upsert_synonyms", [{"src": min(ids["Kappa One"], ids["Kappa Uno"]),
                                     "dst": max(ids["Kappa One"], ids["Kappa Uno"]), "score": 0.95},
                                    {"src": min(ids["Kappa One"], ids["Lambda"]),
                                     "dst": max(ids["Kappa One"], ids["Lambda"]), "score": 0.85}])
    names = {i: normalize(n) for n, i in ids.items()}
    order = list(ids.values())
    assert consolidate(store, order, np.stack(list(vec.values())), names, AliasSettings()) == []  # the index
    changed = consolidate(store, order, np.stack(list(vec.values())), names, AliasSettings(), (0.8, 100))
    assert set(changed) == {ids["Kappa One"], ids["Kappa Uno"]} and len(edges(store)) == 1
    # SYNONYM edges that cannot hold the pairs (threshold above 0.93): the vector index is asked
    clear_tenant(store)
    assert consolidate(store, order, np.stack(list(vec.values())), names, AliasSettings(), (0.95, 100)) == []


def test_dates_and_names_with_other_numbers_are_never_merged(store):
    near = lambda i: unit((0, 1.0), (1, 0.05 * i))  # noqa: E731 - cosines >= 0.99 between all
    vec = {"February 1999": near(0), "June 1999": near(1), "Route 95": near(2), "Route 93": near(3),
           "Acme Corp": near(4), "Acme Corporation": near(5)}
    ids = write_entities(store, vec, {"February 1999": "DATE", "June 1999": "DATE"})
    synonyms = write_synonyms(store, list(ids.values()), np.stack(list(vec.values())))
    consolidate(store, list(ids.values()), np.stack(list(vec.values())), {i: normalize(n) for n, i in ids.items()},
                AliasSettings(), synonyms)
    groups = {frozenset((alias, canonical)) for alias, (canonical, _, _) in edges(store).items()}
    # Acme Corp(oration) joins no date and no route: the routes' numbers differ, dates are skipped
    assert groups == {frozenset((ids["Acme Corp"], ids["Acme Corporation"]))}


def test_layer2_kmeans_splits_a_chained_group(store):
    # four points about 18 degrees apart: neighbours at cos 0.950 / 0.941 / 0.950, the ends at cos
    # 0.556. The middle gap is the widest, so no k-means start leaves C halfway between two
    # centres (equal gaps let float rounding pick the tight but uneven split ABC | D)
    angles = np.radians([0, 18.2, 38.0, 56.2])
    vec = {f"Point {name}": unit((0, np.cos(t)), (1, np.sin(t))) for name, t in zip("ABCD", angles)}
    ids = write_entities(store, vec)
    names = {ids[n]: normalize(n) for n in vec}
    order = [ids[n] for n in vec]
    layer1 = AliasSettings(threshold=0.93, same_numbers=False)
    synonyms = write_synonyms(store, order, np.stack(list(vec.values())))
    consolidate(store, order, np.stack(list(vec.values())), names, layer1, synonyms)
    stored = edges(store)
    assert len(stored) == 3 and {v[2] for v in stored.values()} == {"knn"}  # one chained group
    assert min(v[1] for v in stored.values()) < 0.93
    consolidate(store, order, np.stack(list(vec.values())), names, layer1.model_copy(update={"kmeans_budget": 3}),
                synonyms)
    stored = edges(store)
    a, b, c, d = order
    assert len(stored) == 2 and {v[2] for v in stored.values()} == {"kmeans"}
    groups = {frozenset((alias, canonical)) for alias, (canonical, _, _) in stored.items()}
    assert groups == {frozenset((a, b)), frozenset((c, d))}
    assert all(v[1] >= 0.93 for v in stored.values())


def test_layer2_sweeps_the_tenant_once_then_only_the_groups_a_batch_touches(store, monkeypatch):
    """Two chained groups formed within the k-means budget are refined by the first batch
    past it (a tenant-wide sweep); a later batch that chains onto one group refines that
    group alone, without reading the tenant's loose groups; a split marks the tenant for
    one sweep again."""
    angles = np.radians([0, 18.2, 36.4, 54.6, 72.8, 91.0])
    first = {f"Point {n}": unit((0, np.cos(t)), (1, np.sin(t))) for n, t in zip("ABCD", angles)}
    second = {f"Place {n}": unit((2, np.cos(t)), (3, np.sin(t))) for n, t in zip("EFGH", angles)}
    ids = write_entities(store, {**first, **second})
    layer1 = AliasSettings(threshold=0.93, same_numbers=False)
    vectors = {**first, **second}
    synonyms = write_synonyms(store, [ids[n] for n in vectors], np.stack(list(vectors.values())))
    for chain in (first, second):
        order = [ids[n] for n in chain]
        consolidate(store, order, np.stack(list(chain.values())), {ids[n]: normalize(n) for n in chain}, layer1,
                    synonyms)
    assert {v[2] for v in edges(store).values()} == {"knn"} and len(edges(store)) == 6  # two loose chains
    names: list[str] = []
    real_run = store.run
    monkeypatch.setattr(store, "run", lambda name, **params: names.append(name) or real_run(name, **params))
    past_budget = layer1.model_copy(update={"kmeans_budget": 5})

    def add(name: str, angle: float) -> list[str]:
        vector = unit((2, np.cos(angle)), (3, np.sin(angle)))
        ids.update(write_entities(store, {name: vector}))
        vectors[name] = vector
        write_synonyms(store, [ids[n] for n in vectors], np.stack(list(vectors.values())))
        names.clear()
        return consolidate(store, [ids[name]], vector[None, :], {ids[name]: normalize(name)}, past_budget, synonyms)

    add("Place I", angles[4])  # the first batch past the budget: every loose group
    assert "alias_loose_groups" in names
    assert {v[2] for v in edges(store).values()} == {"kmeans"} and all(v[1] >= 0.93 for v in edges(store).values())
    before = {a: v for a, v in edges(store).items() if a in {ids[n] for n in first}}
    changed = add("Place J", angles[5])  # chains onto the second chain's last group only
    assert "alias_loose_groups" not in names  # no tenant-wide read
    assert not {ids[n] for n in first} & set(changed)
    assert {a: v for a, v in edges(store).items() if a in {ids[n] for n in first}} == before
    assert all(v[1] >= 0.93 for v in edges(store).values())
    split(store, ids["Point B"])
    add("Place K", angles[5] + 0.01)
    assert "alias_loose_groups" in names  # the split's regrouping is looked at once


@pytest.fixture()
def ingested(pipeline, store):
    report = pipeline.ingest(documents(*DOCS))
    assert report.documents_new == len(DOCS) and report.alias_changes >= 4
    return report


def test_ingest_writes_alias_groups_of_near_identical_names(ingested, store):
    stored = edges(store)
    pairs = {frozenset((alias, canonical)) for alias, (canonical, _, _) in stored.items()}
    university = frozenset((entity_id(store, "Paris University"), entity_id(store, "University of Paris")))
    obama = frozenset((entity_id(store, "Barack Obama"), entity_id(store, "Obama")))
    assert university in pairs and obama in pairs
    assert all(score >= 0.93 and method == "knn" for _, score, method in stored.values())
    for far in ("Curie", "Warsaw", "Latin Quarter"):  # below the threshold to anything
        assert entity_id(store, far) not in stored
    # the groups for people: CLI show, one group by name, split by name
    groups = describe_groups(store, "obama")
    assert len(groups) == 1 and (groups[0].name, groups[0].aliases[0][1]) == ("Barack Obama", "Obama")
    runner = CliRunner()
    shown = runner.invoke(app, ["aliases", "show", "--tenant", store.tenant])
    assert shown.exit_code == 0 and "Paris University" in shown.output and "University of Paris" in shown.output
    missing = runner.invoke(app, ["aliases", "split", "Nobody Here", "--tenant", store.tenant])
    assert missing.exit_code == 2 and "no entity" in missing.output
    done = runner.invoke(app, ["aliases", "split", "Obama", "--tenant", store.tenant])
    assert done.exit_code == 0 and "split off" in done.output
    assert not describe_groups(store, "obama")


def test_a_whole_tenant_pass_rebuilds_the_groups_of_the_batches(ingested, store):
    stored = edges(store)
    counts = store.counts()
    assert canonical_count(store) == counts["Entity"] - len(stored)
    topology = Topology(store.tenant)
    topology.refresh(store)
    assert sorted(clear_tenant(store)) == sorted(stored) and edges(store) == {}
    topology.refresh(store)
    assert not (topology.view().canonical != np.arange(topology.view().n_entities)).any()
    consolidate_tenant(store, AliasSettings(), page=4)  # pages of 4 entities, as small batches
    assert {a: c for a, (c, _, _) in edges(store).items()} == {a: c for a, (c, _, _) in stored.items()}
    topology.refresh(store)
    fresh = Topology(store.tenant)
    fresh.refresh(store)
    assert (topology.view().canonical != np.arange(topology.view().n_entities)).sum() == len(stored)
    assert topology.edges() == fresh.edges()


def test_retrieval_sees_the_canonical_entity_of_a_merged_alias(ingested, store, embedder, settings):
    university = entity_id(store, "University of Paris"), entity_id(store, "Paris University")
    canonical = edges(store).get(university[0], (university[0],))[0]
    alias = university[1] if canonical == university[0] else university[0]
    names = {university[0]: "University of Paris", university[1]: "Paris University"}
    topology = Topology(store.tenant)
    topology.refresh(store)
    view = topology.view()
    e_alias, e_canonical = view.entity_index[alias], view.entity_index[canonical]
    assert view.canonical[e_alias] == e_canonical
    assert view.prop_entities[:, e_alias].nnz == 0 and view.adjacency[e_alias].nnz == 0
    # one node joins the passages of both documents
    linked = {view.passage_ids[p] for p in (view.states @ view.prop_entities)[:, e_canonical].nonzero()[0]}
    assert len(linked) == 2
    retriever = Retriever(store, embedder, settings.model_copy(update={"tenant": store.tenant}))
    result = retriever.query("Where stands the university that awarded Lena Holm a doctorate?", mode="proprag", k=3)
    assert {"Holm award", "Latin Quarter"} <= {hit.title for hit in result.passages[:2]}
    seen = {seed.entity_id for seed in result.seeds} | {seed.name for seed in result.seeds} | \
        {step.via for path in result.paths for step in path.steps}
    assert alias not in seen and names[alias] not in seen
    assert any(step.via == names[canonical] for path in result.paths for step in path.steps)


def test_consolidation_survives_a_document_delete_and_the_topology_follows(pipeline, ingested, store):
    incremental = Topology(store.tenant)
    incremental.refresh(store)
    # a group of three over entities of three documents (hand-made pairs, real vectors)
    three = [entity_id(store, n) for n in ("Paris University", "University of Paris", "Columbia University")]
    store.execute_write(lambda run: merge_pairs(run, [(three[0], three[1], 0.98), (three[1], three[2], 0.9)], DIM))
    store.record_change(aliases=three)
    rows = {row["id"]: row for row in store.run("alias_entities", ids=three)}
    canonical = next(i for i in three if rows[i]["canonical"] is None)
    vectors = decode_vectors([rows[i]["vec"] for i in three], DIM)
    assert canonical == three[int(np.argmax((vectors @ vectors.T).mean(axis=1)))]  # the medoid, by hand
    incremental.refresh(store)
    # delete the document of the canonical entity: the other two get their own medoid
    owner = {three[0]: "award", three[1]: "quarter", three[2]: "columbia"}[canonical]
    removed = delete_document(store, pipeline._doc_id(documents(owner)[0]))
    assert removed["removed"]["alias_groups_repaired"] == 1
    rest = [i for i in three if i != canonical]
    stored = edges(store)
    assert canonical not in {v[0] for v in stored.values()} and canonical not in stored
    pair = {i: stored.get(i) for i in rest}
    new_canonical = next(i for i in rest if pair[i] is None)
    other = next(i for i in rest if i != new_canonical)
    expected = float(vectors[three.index(other)] @ vectors[three.index(new_canonical)])
    assert pair[other][0] == new_canonical and pair[other][1] == pytest.approx(expected, abs=1e-5)
    assert pair[other][2] == "knn"
    # the incremental topology (change log) equals a fresh build, canonical map included
    incremental.refresh(store)
    fresh = Topology(store.tenant)
    fresh.refresh(store)
    assert incremental.edges() == fresh.edges()

    def mapping(topology):
        view = topology.view()
        return {view.entity_ids[i]: view.entity_ids[c] for i, c in enumerate(view.canonical) if i != c}

    assert mapping(incremental) == mapping(fresh) and mapping(fresh)[other] == new_canonical
    # then a split and another ingest, still equal
    split(store, other)
    pipeline.ingest([SourceDocument("aliases#more", "More", "New York City hosts Columbia University.")])
    incremental.refresh(store)
    fresh = Topology(store.tenant)
    fresh.refresh(store)
    assert incremental.edges() == fresh.edges() and mapping(incremental) == mapping(fresh)
    assert other not in mapping(fresh)


@pytest.mark.neo4j_only
def test_gds_knn_and_kmeans_give_the_in_process_alias_groups(store):
    # Neo4j + GDS: layer 1's pairs come from the SYNONYM edges gds.knn wrote, layer 2's clusters
    # from gds.kmeans; both must equal the in-process reference (numpy cosines + union-find,
    # scikit-learn k-means) on these hand-made embeddings, and GDS must have answered itself
    from sklearn.cluster import KMeans

    from pathweave_ingest.aliases import _clusters, candidate_pairs

    near = lambda axis, i: unit((axis, 1.0), (5, 0.08 * i))  # noqa: E731 - cos >= 0.97 within an axis
    vec = {"Acme Corp": near(0, 0), "Acme Corporation": near(0, 1), "Acme Company": near(0, 2),
           "Zenith Labs": near(1, 0), "Zenith Laboratories": near(1, 1), "Orion Works": near(2, 0)}
    ids = write_entities(store, vec)
    order = [ids[n] for n in vec]
    vectors = np.stack(list(vec.values()))
    names = {ids[n]: normalize(n) for n in vec}
    params = AliasSettings(threshold=0.93, same_numbers=False)

    cosines = vectors @ vectors.T
    reference = union_find([(order[i], order[j]) for i in range(len(order)) for j in range(i + 1, len(order))
                            if cosines[i, j] >= params.threshold])
    assert store.backend.write_synonyms(store, params.threshold, 100) is not None  # gds.knn answered
    pairs = candidate_pairs(store, order, vectors, names, params, (params.threshold, 100))
    assert sorted(map(sorted, union_find([(a, b) for a, b, _ in pairs]))) == sorted(map(sorted, reference))
    assert len(reference) == 2  # the Acme and Zenith groups (Orion stands alone)

    chain = np.radians([0, 18.2, 38.0, 56.2])  # neighbours at cos 0.950 / 0.941 / 0.950 (no equal gaps)
    points = {f"Point {c}": unit((3, np.cos(t)), (4, np.sin(t))) for c, t in zip("ABCD", chain)}
    point_ids = write_entities(store, points)
    members = sorted(point_ids.values())
    matrix = np.stack([points[n] for n in sorted(points, key=point_ids.get)])
    found = store.backend.kmeans_entities(store, 2, members, 42)
    assert found is not None and set(found) == set(members)  # gds.kmeans answered for every member
    labels = [found[m] for m in members]

    def inertia(labels) -> float:
        return sum(float(((matrix[np.asarray(labels) == x] - matrix[np.asarray(labels) == x].mean(0)) ** 2).sum())
                   for x in set(labels))

    in_process = KMeans(n_clusters=2, n_init=10, random_state=42).fit(matrix).labels_.tolist()
    assert inertia(labels) <= inertia(in_process) + 1e-9  # at least as tight as scikit-learn's
    a, b, c, d = (point_ids[f"Point {x}"] for x in "ABCD")
    best = sorted([sorted([a, b]), sorted([c, d])])  # the chain's optimum: the two halves
    assert sorted(sorted(m for m, x in zip(members, labels) if x == y) for y in set(labels)) == best
    assert sorted(map(sorted, _clusters(store, members, matrix, 2, 42))) == best
