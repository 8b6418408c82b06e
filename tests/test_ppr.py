"""Personalized PageRank (scipy.sparse power iteration) against a dense linear solve."""

import numpy as np
import pytest
import scipy.sparse as sp

from pathweave.graph.ppr import min_max, personalized_pagerank, transition_matrix


def dense_ppr(adjacency: np.ndarray, reset: np.ndarray, damping: float) -> np.ndarray:
    """Closed form p = (1-d) r (I - d M)^-1, M = T + dangling rows sending mass to r."""
    degree = adjacency.sum(axis=1)
    transition = np.divide(adjacency, degree[:, None], out=np.zeros_like(adjacency), where=degree[:, None] > 0)
    r = reset / reset.sum()
    transition[degree == 0] = r
    n = len(r)
    return (1 - damping) * r @ np.linalg.inv(np.eye(n) - damping * transition)


def test_ppr_matches_linear_solve_on_small_weighted_graph():
    adjacency = np.array([
        [0, 2, 1, 0, 0],
        [2, 0, 0, 1, 0],
        [1, 0, 0, 1, 0],
        [0, 1, 1, 0, 0],
        [0, 0, 0, 0, 0],  # dangling node
    ], dtype=float)
    reset = np.array([1.0, 0, 0, 0.5, 0])
    got = personalized_pagerank(transition_matrix(sp.csr_matrix(adjacency)), reset, 0.75, tol=1e-12, max_iter=1000)
    want = dense_ppr(adjacency, reset, 0.75)
    np.testing.assert_allclose(got, want, atol=1e-9)
    assert got.sum() == pytest.approx(1.0)


def test_ppr_hand_checked_two_nodes():
    # two nodes joined by one edge, all reset mass on node 0, damping d:
    # p0 = (1-d) + d p1, p1 = d p0  ->  p0 = 1/(1+d)
    d = 0.5
    got = personalized_pagerank(transition_matrix(sp.csr_matrix(np.array([[0.0, 1.0], [1.0, 0.0]]))),
                                np.array([1.0, 0.0]), d, tol=1e-14, max_iter=1000)
    assert got[0] == pytest.approx(1 / (1 + d))
    assert got[1] == pytest.approx(d / (1 + d))


def test_ppr_rejects_empty_reset():
    with pytest.raises(ValueError, match="positive mass"):
        personalized_pagerank(transition_matrix(sp.csr_matrix(np.eye(2))), np.zeros(2), 0.5)


def test_min_max_guards_constant_vectors():
    np.testing.assert_array_equal(min_max(np.array([3.0, 3.0])), [1.0, 1.0])
    np.testing.assert_array_equal(min_max(np.array([0.0, 0.0])), [0.0, 0.0])
    np.testing.assert_allclose(min_max(np.array([1.0, 2.0, 3.0])), [0.0, 0.5, 1.0])
