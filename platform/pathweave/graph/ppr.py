"""Personalized PageRank on scipy.sparse matrices: power iteration (whole graph) and local
push (work of the seeds' neighbourhood only, for stage 1 on large tenants).

``damping`` is the probability of following an edge (HippoRAG/PropRAG
convention); with probability ``1 - damping`` the walk restarts at the reset
distribution. Dangling nodes (no edges) send their mass to the reset
distribution, so the result is a probability vector.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


def transition_matrix(adjacency: sp.spmatrix) -> sp.csr_matrix:
    """Row-stochastic transition ``T = D^-1 A`` of a weighted adjacency ``(n, n)``
    (rows of dangling nodes stay zero)."""
    adjacency = sp.csr_matrix(adjacency, dtype=np.float64)
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    return sp.csr_matrix(sp.diags(inverse) @ adjacency)


@dataclass(frozen=True)
class Walk:
    """A transition matrix prepared for power iteration: ``transposed`` ``(n, n)`` CSR
    float64 (``T^T``, so one iteration is one CSR mat-vec) and the ``dangling`` ``(n,)``
    bool mask of rows without edges. Built once per graph (snapshot), not per query:
    transposing the graph costs more than the PPR iterations themselves (docs/benchmarks-history.md)."""

    transposed: sp.csr_matrix
    dangling: np.ndarray

    @classmethod
    def of(cls, transition: sp.spmatrix) -> Walk:
        """The walk of a row-stochastic ``(n, n)`` ``transition``."""
        transition = sp.csr_matrix(transition, dtype=np.float64)
        return cls(transition.T.tocsr(), np.asarray(transition.sum(axis=1)).ravel() == 0)


def personalized_pagerank(
    transition: sp.spmatrix | Walk, reset: np.ndarray, damping: float,
    tol: float = 1e-6, max_iter: int = 100,
) -> np.ndarray:
    """Stationary distribution ``(n,)`` float64 of the walk with restarts.

    ``transition``: ``(n, n)`` row-stochastic CSR (see :func:`transition_matrix`) or its
    prepared :class:`Walk`; ``reset``: ``(n,)`` non-negative seed weights, normalized here
    to sum 1. Iterates ``p <- (1-d) r + d (p T + (p . dangling) r)`` until the L1 change
    is below ``tol`` (default 1e-6: the top passages' order is that of a far tighter solve,
    in fewer iterations than 1e-8; docs/benchmarks-history.md). Raises
    ValueError when ``reset`` has no positive mass.
    """
    reset = np.asarray(reset, dtype=np.float64)
    total = reset.sum()
    if not np.isfinite(total) or total <= 0:
        raise ValueError("PPR reset vector has no positive mass")
    reset = reset / total
    walk = transition if isinstance(transition, Walk) else Walk.of(transition)
    transposed, dangling = walk.transposed, walk.dangling
    p = reset.copy()
    for _ in range(max_iter):
        nxt = damping * (transposed @ p + p[dangling].sum() * reset) + (1.0 - damping) * reset
        if np.abs(nxt - p).sum() < tol:
            return nxt
        p = nxt
    return p


def min_max(values: np.ndarray) -> np.ndarray:
    """Min-max normalize ``(n,)`` values to ``(n,)`` float64 in [0, 1]; a constant vector maps to ones where positive,
    zeros otherwise (never divides by zero; spec §1 guard)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    low, high = values.min(), values.max()
    if high - low < 1e-12:
        return np.where(values > 0, 1.0, 0.0) if high > 0 else np.zeros_like(values)
    return (values - low) / (high - low)


def push_pagerank(adjacency: sp.csr_matrix, degree: np.ndarray, reset: np.ndarray, damping: float,
                  epsilon: float = 1e-6) -> np.ndarray:
    """Personalized PageRank by local push (Andersen, Chung & Lang 2006), all active nodes
    pushed at once: ``(n,)`` float64 estimates of :func:`personalized_pagerank` on the walk
    of ``adjacency``.

    ``adjacency``: ``(n, n)`` symmetric weighted CSR (an undirected graph) and its row sums
    ``degree``; ``reset``: ``(n,)`` non-negative seeds (normalized here); ``damping``: the
    probability of following an edge. A node is pushed while its residual exceeds
    ``epsilon x max(degree, 1)``: it keeps ``1 - damping`` of it and spreads the rest over
    its edges (a node without edges returns it to the seeds, as the power iteration does).
    The work is that of the seeds' neighbourhood, not of the graph: at most
    ``1 / (epsilon (1 - damping))`` units of degree are touched, and each estimate is
    below the exact score by less than ``epsilon x degree``. Raises ValueError when
    ``reset`` has no positive mass.
    """
    return push(adjacency, degree, reset, damping, epsilon)[0]


def push(adjacency: sp.csr_matrix, degree: np.ndarray, reset: np.ndarray, damping: float,
         epsilon: float = 1e-6, pushable: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The push of :func:`push_pagerank`, returning ``(estimate, residual)``, both ``(n,)``
    float64. ``pushable``: ``(n,)`` bool, the nodes whose rows of ``adjacency`` are whole
    (a frontier's, :mod:`pathweave.graph.frontier`); the others keep their residual
    unpushed, so the caller can read their rows and push again. Every push is exact on the
    whole graph, so ``estimate + residual`` pushed further converges to the same scores.
    Raises ValueError when ``reset`` has no positive mass."""
    reset = np.asarray(reset, dtype=np.float64)
    total = reset.sum()
    if not np.isfinite(total) or total <= 0:
        raise ValueError("PPR reset vector has no positive mass")
    reset = reset / total
    threshold = epsilon * np.maximum(degree, 1.0)
    if pushable is not None:
        threshold = np.where(pushable, threshold, np.inf)
    estimate = np.zeros_like(reset)
    residual = reset.copy()
    active = np.flatnonzero(residual > threshold)
    while active.size:
        mass = residual[active]
        residual[active] = 0.0
        estimate[active] += (1.0 - damping) * mass
        moving = damping * mass
        isolated = degree[active] <= 0
        if isolated.any():
            residual += moving[isolated].sum() * reset
            active, moving = active[~isolated], moving[~isolated]
        if active.size:
            residual += adjacency[active].T @ (moving / degree[active])
        active = np.flatnonzero(residual > threshold)
    return estimate, residual
