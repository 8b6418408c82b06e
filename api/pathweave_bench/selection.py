"""Synthetic benchmark: CP-SAT solve time and greedy quality.

Builds retrieval-like candidate graphs (query node linked to seed entities;
passages, propositions and entities with passage-proposition,
proposition-entity and passage-entity edges; exponentially skewed weights)
and measures the ILP and greedy selectors on them.

Run: ``pathweave bench select`` (JSON on stdout).

Source: graph context optimization seed, graph-context-optimization-ilp.md;
spec §5.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from pathweave.selection.candidate import CandidateGraph, CandidateNode
from pathweave.selection.greedy import solve_greedy
from pathweave.selection.ilp import Connectivity, solve_ilp


GraphStyle = Literal["rendered", "coverage"]

KIND_WEIGHT_SCALE: dict[str, float] = {"passage": 1.0, "proposition": 0.5, "entity": 0.1}
"""Default per-kind weight scale: a passage is full evidence, a proposition one
fact, an entity only a name (and is dropped from the context when a selected
statement mentions it), so retrieval weights shrink in that order."""

UNIFORM_WEIGHT_SCALE: dict[str, float] = {"passage": 1.0, "proposition": 1.0, "entity": 1.0}
"""Stress setting: all kinds on one weight scale, so cheap entities dominate
the ratio ``w/l`` and the problem becomes Steiner-like (hard for exact
solvers)."""


def random_candidate_graph(
    n_nodes: int,
    rng: np.random.Generator,
    n_seeds: int = 5,
    weight_scale: Mapping[str, float] | None = None,
    style: GraphStyle = "rendered",
) -> CandidateGraph:
    """Random retrieval-like candidate graph with ``n_nodes`` nodes (``Q`` included).

    Composition of the ``n_nodes - 1`` evidence nodes: ~20 % passages (cost
    80-200 tokens), ~30 % entities (cost 2-6, at least ``n_seeds``), the rest
    propositions (cost 15-40). Each proposition is linked to its source
    passage and to 1-3 entities; each passage to the entities its
    propositions mention plus 0-2 random ones; ``Q`` to ``n_seeds`` seed
    entities. Weights are exponential (scale 1) times the per-kind
    ``weight_scale`` (default :data:`KIND_WEIGHT_SCALE`), doubled for nodes
    touching a seed entity, so a few items dominate.

    ``style="coverage"`` gives the shape of the PropRAG candidate graphs of
    :mod:`pathweave.retrieval.context` on the same random skeleton: passages
    and entities cost 0 and are not rendered (passages are coverage nodes,
    entities connectors with weight only on the seeds), passage-entity edges
    are dropped (passages link only to their statements), so only the
    propositions cost tokens.

    Raises:
        ValueError: ``n_nodes < n_seeds + 3`` or an unknown ``style``.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    if style not in ("rendered", "coverage"):
        raise ValueError(f"style must be 'rendered' or 'coverage', got {style!r}")
    if n_nodes < n_seeds + 3:
        raise ValueError(f"n_nodes must be >= {n_seeds + 3}, got {n_nodes}")
    rest = n_nodes - 1
    n_pass = max(1, round(0.2 * rest))
    n_ent = max(n_seeds, round(0.3 * rest))
    n_prop = rest - n_pass - n_ent
    if n_prop < 1:
        n_ent -= 1 - n_prop
        n_prop = 1
    passages = [f"p{i}" for i in range(n_pass)]
    entities = [f"e{i}" for i in range(n_ent)]
    props = [f"s{i}" for i in range(n_prop)]

    edges: set[tuple[str, str]] = set()
    seeds = [str(e) for e in rng.choice(entities, size=n_seeds, replace=False)]
    for e in seeds:
        edges.add(("Q", e))
    citation: dict[str, str] = {}
    for s in props:
        p = passages[int(rng.integers(n_pass))]
        citation[s] = p
        edges.add((p, s))
        k = int(rng.integers(1, 4))
        for e in rng.choice(entities, size=min(k, n_ent), replace=False):
            edges.add((s, str(e)))
            edges.add((p, str(e)))
    for p in passages:
        for e in rng.choice(entities, size=min(int(rng.integers(0, 3)), n_ent), replace=False):
            edges.add((p, str(e)))

    seed_set = set(seeds)
    near_seed = {u for a, b in edges for u, v in ((a, b), (b, a)) if v in seed_set}
    weights = rng.exponential(1.0, size=n_nodes)

    scale = KIND_WEIGHT_SCALE if weight_scale is None else weight_scale

    def w(i: int, node_id: str) -> float:
        kind = {"p": "passage", "s": "proposition", "e": "entity"}[node_id[0]]
        return float(weights[i] * scale[kind] * (2.0 if node_id in near_seed else 1.0))

    nodes = [CandidateNode(id="Q", kind="query", text="query", weight=0.0, cost=0)]
    i = 1
    for p in passages:
        nodes.append(CandidateNode(id=p, kind="passage", text=f"passage {p}",
                                   weight=w(i, p), cost=int(rng.integers(80, 201))))
        i += 1
    for s in props:
        nodes.append(CandidateNode(id=s, kind="proposition", text=f"proposition {s}",
                                   weight=w(i, s), cost=int(rng.integers(15, 41)),
                                   citation=citation[s]))
        i += 1
    for e in entities:
        nodes.append(CandidateNode(id=e, kind="entity", text=f"entity {e}",
                                   weight=w(i, e), cost=int(rng.integers(2, 7))))
        i += 1
    if style == "coverage":
        kinds = {n.id: n.kind for n in nodes}
        nodes = [n if n.kind in ("query", "proposition") else n.model_copy(update={
            "cost": 0, "rendered": False, "weight": n.weight if n.kind == "passage" or n.id in seed_set else 0.0})
            for n in nodes]
        edges = {(a, b) for a, b in edges if {kinds[a], kinds[b]} != {"passage", "entity"}}
    return CandidateGraph(query_id="Q", nodes=nodes, edges=sorted(edges))


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def synthetic_solve_stats(
    sizes: tuple[int, ...] = (50, 100, 200),
    trials: int = 20,
    budget: int = 400,
    seed: int = 0,
    *,
    time_limit_ms: float = 50.0,
    reference_limit_ms: float = 3000.0,
    num_workers: int = 1,
    connectivity: Connectivity = "order",
    weight_scale: Mapping[str, float] | None = None,
    style: GraphStyle = "rendered",
) -> dict[str, Any]:
    """Per-size ILP timing/optimality and greedy quality on random graphs.

    For each size, ``trials`` graphs from :func:`random_candidate_graph`
    (``style``) are solved by the greedy rules (frontier, path, path + local
    search), by the ILP cold (no hint) and by the ILP warm-started with the
    best greedy solution (as
    :func:`~pathweave.selection.select.select` does), each within
    ``time_limit_ms``; then once more warm-started with
    ``reference_limit_ms`` to get a reference optimum (``0`` skips it).

    Returns:
        ``{"config": {...}, "sizes": {size: stats}}``; ``stats`` holds
        ``edges_mean``; ``ilp_ms_p50``/``ilp_ms_p95``/``ilp_ms_max`` (wall ms
        per call, model build included), ``ilp_optimal_frac`` (proved optimal
        within the limit) and ``ilp_found_frac`` (its answer equals the best
        known objective, optimality proved or not) for the warm-started ILP, the same with prefix ``ilp_cold_`` for the cold ILP;
        ``greedy_ms_p95``/``path_ms_p95`` (frontier / path rule, ms);
        ``greedy_over_ilp_mean``/``_min``, ``path_over_ilp_mean``/``_min`` and
        ``ls_over_ilp_mean``/``_min`` (frontier, path, ``"path+ls"`` objective /
        best objective of the trial; ``ls_ms_p95`` its time) and
        ``ilp_over_ref_mean`` (time-limited ILP / reference); with a
        reference also ``ref_ms_p50``/``ref_ms_p95``/``ref_optimal_frac``
        (time to prove optimality) and ratios are taken against the best of
        all runs.

    Source: graph context optimization seed, graph-context-optimization-ilp.md;
    spec §5.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {
        "config": {"trials": trials, "budget": budget, "seed": seed,
                   "time_limit_ms": time_limit_ms, "reference_limit_ms": reference_limit_ms,
                   "num_workers": num_workers, "connectivity": connectivity,
                   "weight_scale": dict(weight_scale or KIND_WEIGHT_SCALE), "style": style},
        "sizes": {},
    }
    for n in sizes:
        rows: dict[str, list[float]] = {k: [] for k in (
            "edges", "warm_ms", "warm_opt", "cold_ms", "cold_opt", "greedy_ms", "path_ms",
            "greedy_ratio", "path_ratio", "ilp_ratio", "ref_ms", "ref_opt", "ls_ms", "ls_ratio", "found")}
        for _ in range(trials):
            g = random_candidate_graph(n, rng, weight_scale=weight_scale, style=style)
            frontier = solve_greedy(g, budget, "frontier")
            path = solve_greedy(g, budget, "path")
            local = solve_greedy(g, budget, "path+ls")
            hint = max(frontier, path, local, key=lambda s: s.objective).selected
            kw = {"num_workers": num_workers, "connectivity": connectivity}
            cold = solve_ilp(g, budget, time_limit_ms=time_limit_ms, **kw)
            warm = solve_ilp(g, budget, time_limit_ms=time_limit_ms, hint=hint, **kw)
            best = max(cold.objective, warm.objective, frontier.objective, path.objective, local.objective)
            if reference_limit_ms > 0:
                ref = solve_ilp(g, budget, time_limit_ms=reference_limit_ms, hint=hint, **kw)
                rows["ref_ms"].append(ref.solve_ms)
                rows["ref_opt"].append(ref.status == "OPTIMAL")
                best = max(best, ref.objective)
            rows["edges"].append(len(g.edges))
            rows["greedy_ms"].append(frontier.solve_ms)
            rows["path_ms"].append(path.solve_ms)
            rows["ls_ms"].append(local.solve_ms)
            rows["cold_ms"].append(cold.solve_ms)
            rows["cold_opt"].append(cold.status == "OPTIMAL")
            rows["warm_ms"].append(warm.solve_ms)
            rows["warm_opt"].append(warm.status == "OPTIMAL")
            rows["found"].append(warm.objective >= best - 1e-9)
            for key, sel in (("greedy_ratio", frontier), ("path_ratio", path), ("ilp_ratio", warm),
                             ("ls_ratio", local)):
                rows[key].append(sel.objective / best if best > 0 else 1.0)
        stats = {
            "edges_mean": float(np.mean(rows["edges"])),
            "ilp_ms_p50": _pct(rows["warm_ms"], 50),
            "ilp_ms_p95": _pct(rows["warm_ms"], 95),
            "ilp_ms_max": max(rows["warm_ms"]),
            "ilp_optimal_frac": float(np.mean(rows["warm_opt"])),
            "ilp_found_frac": float(np.mean(rows["found"])),
            "ilp_cold_ms_p50": _pct(rows["cold_ms"], 50),
            "ilp_cold_ms_p95": _pct(rows["cold_ms"], 95),
            "ilp_cold_optimal_frac": float(np.mean(rows["cold_opt"])),
            "greedy_ms_p95": _pct(rows["greedy_ms"], 95),
            "path_ms_p95": _pct(rows["path_ms"], 95),
            "greedy_over_ilp_mean": float(np.mean(rows["greedy_ratio"])),
            "greedy_over_ilp_min": float(np.min(rows["greedy_ratio"])),
            "path_over_ilp_mean": float(np.mean(rows["path_ratio"])),
            "path_over_ilp_min": float(np.min(rows["path_ratio"])),
            "ls_ms_p95": _pct(rows["ls_ms"], 95),
            "ls_over_ilp_mean": float(np.mean(rows["ls_ratio"])),
            "ls_over_ilp_min": float(np.min(rows["ls_ratio"])),
            "ilp_over_ref_mean": float(np.mean(rows["ilp_ratio"])),
        }
        if reference_limit_ms > 0:
            stats.update({
                "ref_ms_p50": _pct(rows["ref_ms"], 50),
                "ref_ms_p95": _pct(rows["ref_ms"], 95),
                "ref_optimal_frac": float(np.mean(rows["ref_opt"])),
            })
        out["sizes"][n] = stats
    return out


def main() -> None:
    """Print :func:`synthetic_solve_stats` for both weight settings as JSON.

    Source: graph context optimization seed, graph-context-optimization-ilp.md; spec §5.
    """
    print(json.dumps({
        "kind_scaled": synthetic_solve_stats(),
        "uniform": synthetic_solve_stats(weight_scale=UNIFORM_WEIGHT_SCALE),
        "coverage": synthetic_solve_stats(style="coverage"),
    }, indent=2))


if __name__ == "__main__":
    main()
