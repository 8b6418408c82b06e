"""Two-layer, reversible alias consolidation of entities (spec §3 "Entity consolidation",
§0 ``ALIAS_OF``; APR paper §2.7).

An alias group is a canonical entity and the entities with an
``(:Entity)-[:ALIAS_OF {score, method}]->(:Entity)`` edge to it; ``score`` is the member's
cosine to the canonical, ``method`` ``knn`` (layer 1) or ``kmeans`` (layer 2). The
canonical is the group's medoid (the member with the largest mean cosine to the members,
paper Lemma 11). Alias nodes stay in the graph: undoing a merge (:func:`split`) removes
edges only. The query processes' topologies map aliases onto their canonical
(:mod:`pathweave.graph.topology`), told through the graph-change log (``aliases``).

- Layer 1 (:func:`consolidate`, after each ingestion group): the group's new entities take
  their k = min(50, max(5, floor(sqrt(n)))) nearest entities (n: the tenant's entity count)
  from the SYNONYM edges the synonymy step just wrote for them (or ask the store's Entity
  vector index when called without them); pairs with cosine >= 0.93 join their groups
  (union-find, :func:`union_find`), and every group that changed gets its medoid as
  canonical.
- Layer 2 (when the tenant has more than ``kmeans_budget`` entities): groups with a member
  below the threshold to its canonical (chains of layer 1) are split by k-means
  (``gds.kmeans`` where the backend declares
  :attr:`~pathweave.store.backends.Capability.KMEANS`, else scikit-learn) with the smallest k
  that leaves every member within the threshold of its cluster's medoid. After a batch, only
  the groups of its entities are looked at; every loose group of the tenant once, when
  groups were written that layer 2 has not refined (within the budget, by a removal's
  repair or a split: counted on the tenant's Meta node).

Entities a person split off (``alias_split``), names with <= 2 alphanumeric characters,
dates (``skip_types``) and, by default, pairs whose names hold different numbers are never
merged automatically.
Statements: ``cypher/aliases.cypher``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pathweave.store.backends import Capability, vector_knn
from pathweave.settings import AliasSettings
from pathweave.store.graph_store import GraphStore
from pathweave.text import alnum_count, normalize
from pathweave.graph.vectors import decode_vectors

Run = Callable[..., list[dict[str, Any]]]
"""A runner of named statements for the tenant: ``run(name, **params) -> rows``."""

_DIGITS = re.compile(r"\d+")
log = logging.getLogger(__name__)


def neighbour_count(n: int, k_min: int = 5, k_max: int = 50) -> int:
    """Layer 1's k for a tenant of ``n`` entities: min(k_max, max(k_min, floor(sqrt(n)))) (spec §3)."""
    return min(k_max, max(k_min, math.isqrt(max(0, int(n)))))


def entity_count(store: GraphStore, cap: int) -> int:
    """The tenant's entities counted up to ``cap``: ``min(n, cap)``, read in time that grows
    with ``cap``, not with the tenant (a caller asks only whether ``n`` reaches a bound)."""
    return int(store.run("alias_entity_count", cap=min(max(1, int(cap)), 2**31 - 1))[0]["n"])


def numbers_agree(a: str, b: str) -> bool:
    """Whether the two names hold the same numbers ("march 1 2001" vs "march 2 2001": no)."""
    return sorted(_DIGITS.findall(a)) == sorted(_DIGITS.findall(b))


def union_find(pairs: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Connected components of the ``pairs`` graph with >= 2 members, each sorted, the list
    sorted by first member (path-halving union-find; deterministic)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[str, list[str]] = {}
    for x in parent:
        groups.setdefault(find(x), []).append(x)
    return sorted((sorted(g) for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def medoid(vectors: np.ndarray, names: Sequence[str] | None = None) -> int:
    """Row of the medoid of ``(g, d)`` L2-normalized ``vectors``: the largest mean cosine to
    all rows (paper Lemma 11). Ties (within 1e-6, e.g. any pair) go to the longest of
    ``names`` (the most specific name: "Barack Obama" over "Obama"), then the first row.
    Raises ValueError on an empty matrix."""
    if len(vectors) == 0:
        raise ValueError("medoid of an empty group")
    mean = (vectors @ vectors.T).mean(axis=1)
    tied = np.flatnonzero(mean >= mean.max() - 1e-6)
    if names is None:
        return int(tied[0])
    return int(min(tied, key=lambda i: (-len(names[i]), i)))


@dataclass
class AliasGroup:
    """One alias group as written: ``canonical`` id, ``members`` (sorted, canonical
    included), each member's cosine to the canonical (``scores``) and ``method``."""

    canonical: str
    members: list[str]
    scores: dict[str, float] = field(default_factory=dict)
    method: str = "knn"

    def rows(self) -> list[dict]:
        """``alias_link`` rows of the group's aliases."""
        return [{"alias": m, "canonical": self.canonical, "score": round(self.scores[m], 6), "method": self.method}
                for m in self.members if m != self.canonical]


def plan_group(members: Sequence[str], vectors: np.ndarray, method: str,
               names: Sequence[str] | None = None) -> AliasGroup:
    """The group of ``members`` (``(g, d)`` L2-normalized ``vectors`` and ``names`` in that
    order) with its medoid as canonical."""
    order = sorted(range(len(members)), key=lambda i: members[i])
    ids = [members[i] for i in order]
    matrix = np.asarray(vectors, dtype=np.float32)[order]
    best = medoid(matrix, [names[i] for i in order] if names is not None else None)
    cosines = np.clip(matrix @ matrix[best], -1.0, 1.0)
    return AliasGroup(ids[best], ids, {m: float(c) for m, c in zip(ids, cosines)}, method)


def _entities(run: Run, ids: Sequence[str], dim: int) -> tuple[dict[str, dict], dict[str, np.ndarray]]:
    rows = {row["id"]: row for row in run("alias_entities", ids=list(ids))}
    vectors = decode_vectors([rows[i]["vec"] for i in rows], dim)
    return rows, dict(zip(rows, vectors))


def current_groups(run: Run, ids: Sequence[str]) -> dict[str, AliasGroup]:
    """The alias groups holding any of ``ids`` as stored: ``{canonical: group}``."""
    rows = run("alias_entities", ids=list(ids))
    canonicals = sorted({row["canonical"] or row["id"] for row in rows})
    groups: dict[str, AliasGroup] = {}
    for row in run("alias_members", ids=canonicals):
        group = groups.setdefault(row["canonical"], AliasGroup(row["canonical"], [row["canonical"]],
                                                               {row["canonical"]: 1.0}, row["method"] or "knn"))
        group.members.append(row["alias"])
        group.scores[row["alias"]] = float(row["score"] or 0.0)
    for group in groups.values():
        group.members.sort()
    return groups


def write_groups(run: Run, groups: Sequence[AliasGroup], released: Iterable[str] = ()) -> list[str]:
    """Rewrite the ALIAS_OF edges of ``groups`` (every member's old edge removed, then one
    edge per alias to its canonical) and remove those of ``released`` (entities that leave
    every group). Returns the ids whose edge may have changed (for the change record)."""
    touched = sorted({m for g in groups for m in g.members} | set(released))
    if touched:
        run("alias_clear", ids=touched)
    rows = [row for g in groups for row in g.rows()]
    if rows:
        run("alias_link", rows=rows)
    return touched


def regroup(run: Run, groups: Iterable[Iterable[str]], method: str, dim: int) -> list[str]:
    """Give every group of ``groups`` (ids of existing entities) its medoid as canonical and
    write it; a "group" of fewer than 2 members releases them. Returns the changed ids."""
    groups = [sorted(set(g)) for g in groups]
    rows, vectors = _entities(run, sorted({m for g in groups for m in g}), dim)
    planned, released = [], []
    for members in groups:
        alive = [m for m in members if m in rows]
        if len(alive) < 2:
            released += alive
        else:
            planned.append(plan_group(alive, np.stack([vectors[m] for m in alive]), method,
                                      [rows[m]["name"] or "" for m in alive]))
    return write_groups(run, planned, released)


def _neighbours(store: GraphStore, ids: Sequence[str], vectors: np.ndarray, k: int, threshold: float,
                synonyms: tuple[float, int] | None) -> list[dict]:
    """Rows ``{src, dst, cosine}``: up to ``k`` of the tenant's entities nearest to each of
    ``ids`` with cosine >= ``threshold``. When the SYNONYM edges of ``ids`` were just written
    (``synonyms`` = their (threshold, max per entity), which must cover ``threshold`` and
    ``k``: ingestion's synonymy step, by the vector index or ``gds.knn``) they are read from
    those edges, so the index is not asked a second time for the same neighbours (alias
    consolidation is a sizeable share of a worker's ingestion; figures in docs/benchmarks-history.md);
    otherwise the Entity vector index is asked (:func:`pathweave.store.backends.vector_knn`)."""
    if synonyms and synonyms[0] <= threshold and synonyms[1] >= k:
        by_source: dict[str, list[dict]] = {}
        for start in range(0, len(ids), 1000):
            for row in store.run("topology_entity_synonyms", ids=list(ids[start:start + 1000])):
                if float(row["score"]) >= threshold:
                    by_source.setdefault(row["src"], []).append(
                        {"src": row["src"], "dst": row["dst"], "cosine": float(row["score"])})
        return [h for hits in by_source.values() for h in sorted(hits, key=lambda h: -h["cosine"])[:k]]
    return vector_knn(store, "Entity", list(ids), vectors, k, threshold)


def candidate_pairs(store: GraphStore, ids: Sequence[str], vectors: np.ndarray, names: dict[str, str],
                    params: AliasSettings, synonyms: tuple[float, int] | None = None) -> list[tuple[str, str, float]]:
    """Layer 1's pairs ``(a, b, cosine)`` (a < b) from the entities ``ids`` (``(n, d)``
    L2-normalized ``vectors``, normalized ``names``) to the tenant's entities: the k =
    :func:`neighbour_count` (of the tenant's entity count) nearest with cosine >= the
    threshold (:func:`_neighbours`); split entities, short names, entities of ``skip_types``
    (dates) and (``same_numbers``) names with other numbers left out."""
    eligible = [i for i, e in enumerate(ids) if alnum_count(names.get(e, "")) > 2]
    if not eligible:
        return []
    n = entity_count(store, params.k_max ** 2)  # k stops growing at n = k_max²
    k = neighbour_count(n, params.k_min, params.k_max)
    hits = [h for h in _neighbours(store, [ids[i] for i in eligible], np.asarray(vectors)[eligible], k,
                                   params.threshold, synonyms)
            if h["dst"] != h["src"] and h["cosine"] >= params.threshold]
    involved = sorted({h["src"] for h in hits} | {h["dst"] for h in hits})
    info = {row["id"]: row for row in store.run("alias_entities", ids=involved)} if involved else {}
    pairs: dict[tuple[str, str], float] = {}
    for h in hits:
        src, dst = info.get(h["src"]), info.get(h["dst"])
        if src is None or dst is None or src["split"] or dst["split"] or alnum_count(dst["norm_name"] or "") <= 2 \
                or src["type"] in params.skipped_types or dst["type"] in params.skipped_types:
            continue
        if params.same_numbers and not numbers_agree(src["norm_name"] or "", dst["norm_name"] or ""):
            continue
        key = (min(h["src"], h["dst"]), max(h["src"], h["dst"]))
        pairs[key] = max(pairs.get(key, 0.0), min(1.0, h["cosine"]))
    return [(a, b, s) for (a, b), s in sorted(pairs.items())]


def merge_pairs(run: Run, pairs: Sequence[tuple[str, str, float]], dim: int) -> list[str]:
    """Join the alias groups of each pair's entities (union-find over the pairs and the
    existing groups), give every group that changed its medoid as canonical and write it
    (method ``knn``). Returns the changed ids."""
    if not pairs:
        return []
    existing = current_groups(run, sorted({x for a, b, _ in pairs for x in (a, b)}))
    links = [(a, b) for a, b, _ in pairs] + [(g.canonical, m) for g in existing.values() for m in g.members]
    stored = {frozenset(g.members) for g in existing.values()}
    changed = [c for c in union_find(links) if frozenset(c) not in stored]
    return regroup(run, changed, "knn", dim) if changed else []


def _clusters(store: GraphStore, members: list[str], vectors: np.ndarray, k: int, seed: int) -> list[list[str]]:
    """k-means clusters of ``members`` (``gds.kmeans`` where the backend can, else scikit-learn)."""
    labels = None
    if Capability.KMEANS in store.backend.capabilities:
        found = store.backend.kmeans_entities(store, k, members, seed)
        if found and set(found) == set(members):
            labels = [found[m] for m in members]
        else:
            log.error("gds.kmeans gave %s for %d entities of tenant %r (k=%d): scikit-learn k-means used",
                      "no answer" if not found else f"labels for {len(set(found) & set(members))}",
                      len(members), store.tenant, k)
    if labels is None:
        from sklearn.cluster import KMeans

        labels = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(vectors).labels_.tolist()
    clusters: dict[int, list[str]] = {}
    for member, label in zip(members, labels):
        clusters.setdefault(int(label), []).append(member)
    return list(clusters.values())


def refine(store: GraphStore, members: list[str], vectors: np.ndarray, threshold: float,
           seed: int = 42) -> list[list[str]]:
    """Layer 2 on one group: k-means clusters with the smallest k >= 2 that leaves every
    member within cosine ``threshold`` of its cluster's medoid (k = len(members) at most).
    Members are clustered in id order, so a group splits the same way however it was read."""
    order = sorted(range(len(members)), key=members.__getitem__)
    members, vectors = [members[i] for i in order], np.asarray(vectors)[order]
    index = {m: i for i, m in enumerate(members)}
    for k in range(2, len(members) + 1):
        clusters = _clusters(store, members, vectors, k, seed)
        tight = True
        for cluster in clusters:
            matrix = vectors[[index[m] for m in cluster]]
            if len(cluster) > 1 and float((matrix @ matrix[medoid(matrix)]).min()) < threshold - 1e-6:
                tight = False
                break
        if tight:
            return clusters
    return [[m] for m in members]


def refine_loose_groups(store: GraphStore, params: AliasSettings, among: Sequence[str] | None = None) -> list[str]:
    """Layer 2 over loose groups (a member's score below the threshold): each is split by
    :func:`refine` and its clusters written with their medoids (method ``kmeans``).
    ``among``: only the groups holding one of these entity ids (those an ingestion batch
    changed: a refined group is tight, so only a group layer 1 just changed can be loose);
    None: every loose group of the tenant. Returns the changed ids."""
    if among is None:
        canonicals = [row["id"] for row in store.run("alias_loose_groups", threshold=params.threshold)]
        groups = current_groups(store.run, canonicals) if canonicals else {}
    else:
        groups = {canonical: group for canonical, group in
                  (current_groups(store.run, sorted(set(among))) if among else {}).items()
                  if any(score < params.threshold for member, score in group.scores.items() if member != canonical)}
    if not groups:
        return []
    _, vectors = _entities(store.run, sorted({m for g in groups.values() for m in g.members}), store.dimensions)
    clusters = []
    for group in groups.values():
        clusters += refine(store, group.members, np.stack([vectors[m] for m in group.members]),
                           params.threshold, params.seed)
    return store.execute_write(lambda run: regroup(run, clusters, "kmeans", store.dimensions))


def consolidate(store: GraphStore, ids: Sequence[str], vectors: np.ndarray, names: dict[str, str],
                params: AliasSettings, synonyms: tuple[float, int] | None = None) -> list[str]:
    """Both layers after an ingestion batch for its new entities ``ids`` (``(n, d)``
    L2-normalized ``vectors``, normalized ``names``); call after they are committed (and
    after their SYNONYM edges, whose (threshold, max per entity) ``synonyms`` names: layer 1
    then reads its neighbours from them, :func:`_neighbours`). Layer 1's
    groups are written in one transaction; layer 2 runs when the tenant has more than
    ``params.kmeans_budget`` entities. Returns the entity ids whose ALIAS_OF edge may have
    changed (the change record's ``aliases``); nothing when ``params.enabled`` is off."""
    if not params.enabled or not len(ids):
        return []
    pairs = candidate_pairs(store, ids, vectors, names, params, synonyms)
    changed = store.execute_write(lambda run: merge_pairs(run, pairs, store.dimensions)) if pairs else []
    if entity_count(store, params.kmeans_budget + 1) <= params.kmeans_budget:
        if changed:  # groups layer 2 has not refined
            store.run("alias_mark_unrefined", meta_id=store.meta_id)
        return changed
    state = store.run("alias_refine_state", meta_id=store.meta_id)
    unrefined, refined = (int(state[0]["unrefined"]), int(state[0]["refined"])) if state else (0, 0)
    if unrefined > refined:  # groups written within the budget, by a repair or a split: every loose group
        changed = sorted(set(changed) | set(refine_loose_groups(store, params)))
        store.run("alias_mark_refined", meta_id=store.meta_id, unrefined=unrefined)
    else:  # the groups of this batch's entities (also those an interrupted attempt changed)
        changed = sorted(set(changed) | set(refine_loose_groups(store, params, set(changed) | set(ids))))
    return changed


def consolidate_tenant(store: GraphStore, params: AliasSettings, page: int = 2000,
                       on_progress: Callable[[int], None] | None = None) -> list[str]:
    """Layer 1 (and 2) over ALL the tenant's entities, ``page`` at a time in id order (as if
    each page were an ingestion batch), recording the change once at the end. For a store
    ingested with consolidation off, or after :func:`clear_tenant`. Returns the changed ids;
    ``on_progress(entities_done)`` after each page."""
    changed: set[str] = set()
    skip = 0
    while True:
        rows = store.run("alias_tenant_entities", skip=skip, limit=page)
        if not rows:
            break
        ids = [row["id"] for row in rows]
        vectors = decode_vectors([row["vec"] for row in rows], store.dimensions)
        changed |= set(consolidate(store, ids, vectors, {row["id"]: row["norm_name"] or "" for row in rows}, params))
        skip += len(rows)
        if on_progress:
            on_progress(skip)
    if changed:
        store.record_change(aliases=sorted(changed))
    return sorted(changed)


def clear_tenant(store: GraphStore) -> list[str]:
    """Remove every alias edge of the tenant (split flags stay) and record the change;
    returns the aliases released."""
    released = sorted({row["id"] for row in store.run("alias_clear_tenant")})
    if released:
        store.record_change(aliases=released)
    return released


def canonical_count(store: GraphStore) -> int:
    """The tenant's entities that are no alias (the nodes retrieval sees)."""
    return int(store.run("alias_canonical_count")[0]["n"])


def groups_touching(run: Run, ids: Sequence[str]) -> dict[str, AliasGroup]:
    """The alias groups with a member among ``ids`` (read before the entities are removed)."""
    return current_groups(run, ids) if ids else {}


def repair_after_removal(run: Run, before: dict[str, AliasGroup], removed: Iterable[str], dim: int) -> list[str]:
    """Inside the removal's transaction, after the entities ``removed`` were deleted: each
    group of ``before`` (:func:`groups_touching`) that lost members is rewritten with the
    remaining ones and their medoid (a group left with one member dissolves; its method
    kept). Returns the ids whose edge may have changed."""
    gone = set(removed)
    changed: list[str] = []
    for group in before.values():
        if gone & set(group.members):
            changed += regroup(run, [set(group.members) - gone], group.method, dim)
    return changed


@dataclass
class GroupView:
    """An alias group for people (``pathweave aliases show``): the canonical's id and name,
    and the aliases as ``(id, name, score, method)``, best score first."""

    canonical: str
    name: str
    aliases: list[tuple[str, str, float, str]]


def describe_groups(store: GraphStore, entity: str | None = None) -> list[GroupView]:
    """The tenant's alias groups, largest first (only the group of ``entity``, an entity id or
    name, when given). Raises LookupError when ``entity`` names no entity of the tenant."""
    rows = store.run("alias_groups")
    if entity is not None:
        found = find_entity(store, entity)
        canonicals = {row["canonical"] or row["id"] for row in found}
        rows = [row for row in rows if row["canonical"] in canonicals]
    groups: dict[str, GroupView] = {}
    for row in rows:
        view = groups.setdefault(row["canonical"], GroupView(row["canonical"], row["canonical_name"], []))
        view.aliases.append((row["alias"], row["alias_name"], float(row["score"] or 0.0), row["method"] or ""))
    for view in groups.values():
        view.aliases.sort(key=lambda a: (-a[2], a[0]))
    return sorted(groups.values(), key=lambda g: (-len(g.aliases), g.name or ""))


def find_entity(store: GraphStore, key: str) -> list[dict]:
    """Entities whose id is ``key`` or whose normalized name is ``normalize(key)``: rows
    ``{id, name, canonical}``. Raises LookupError when there is none."""
    rows = store.run("alias_find_entity", key=key, norm=normalize(key))
    if not rows:
        raise LookupError(f"no entity {key!r} in tenant {store.tenant!r}")
    return rows


def split(store: GraphStore, key: str) -> list[str]:
    """Undo a merge: when ``key`` (an entity id or name) is an alias, its ALIAS_OF edge is
    removed and the rest of its group gets its medoid again; when it is a canonical, the
    whole group is dissolved. The entities split off are marked ``alias_split`` so later
    batches do not merge them again, and the change is recorded (graph version bumped).
    Returns the ids split off. Raises LookupError when ``key`` names no entity, ValueError
    when it is in no alias group (nothing changed then)."""
    found = find_entity(store, key)
    target = next((row for row in found if row["id"] == key), found[0])
    entity = target["id"]
    group = current_groups(store.run, [entity]).get(target["canonical"] or entity)
    if group is None:
        raise ValueError(f"entity {key!r} ({entity}) is in no alias group")
    off = group.members if entity == group.canonical else [entity]
    rest = [m for m in group.members if m not in off]

    def work(run: Run) -> list[str]:
        run("alias_mark_split", ids=off)
        run("alias_mark_unrefined", meta_id=store.meta_id)  # the rest's new canonical may leave it loose
        changed = write_groups(run, [], off)
        return sorted(set(changed) | set(regroup(run, [rest], group.method, store.dimensions) if rest else ()))

    store.record_change(aliases=store.execute_write(work))
    return off
