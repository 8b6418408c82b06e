"""Knowledge selection per channel (APR, spec §3 "Selection per channel"; paper §2.5).

Each channel (facts, questions, answers) gets one action: ``include_all`` keeps every
retrieved run, ``unique`` keeps one representative per group of near-duplicate runs
(connected components of the run-vector graph with cosine >= 0.93; the representative is
the group's medoid: the member with the largest summed cosine to the others, ties to the
better-ranked), ``not_include`` drops the channel.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

CHANNELS: tuple[str, ...] = ("facts", "questions", "answers")
"""The three channels, in prompt order after the question."""

ACTIONS: tuple[str, ...] = ("include_all", "unique", "not_include")
"""The actions a channel can take."""


def check_actions(actions: Mapping[str, str]) -> dict[str, str]:
    """``actions`` validated (channels of :data:`CHANNELS`, actions of :data:`ACTIONS`);
    a channel not named gets ``unique``. Raises ValueError naming a bad channel or action."""
    out = dict.fromkeys(CHANNELS, "unique")
    for channel, action in actions.items():
        if channel not in CHANNELS:
            raise ValueError(f"unknown channel {channel!r}; use {', '.join(CHANNELS)}")
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r} for {channel}; use {', '.join(ACTIONS)}")
        out[channel] = action
    return out


def unique_medoids(vectors: np.ndarray, threshold: float = 0.93) -> list[int]:
    """Indices of one representative per near-duplicate group of the ``(n, d)``
    L2-normalized ``vectors`` (rows in rank order): groups are connected components of
    ``cos >= threshold``; each group's medoid (max summed cosine to its members). Returned
    in the rank order of the representatives."""
    n = len(vectors)
    if n == 0:
        return []
    sims = np.asarray(vectors, dtype=np.float64) @ np.asarray(vectors, dtype=np.float64).T
    adjacency = sp.csr_matrix(sims >= threshold)
    _, labels = connected_components(adjacency, directed=False)
    chosen = []
    for group in np.unique(labels):
        members = np.flatnonzero(labels == group)
        totals = sims[np.ix_(members, members)].sum(axis=1)
        chosen.append(int(members[int(np.argmax(totals))]))  # argmax: first (best-ranked) on ties
    return sorted(chosen)


def select(action: str, vectors: np.ndarray, threshold: float = 0.93) -> list[int]:
    """Indices (rank order) of the runs of one channel kept by ``action``; ``vectors``:
    ``(n, d)`` the channel's ranked run vectors. Raises ValueError on an unknown action."""
    if action == "include_all":
        return list(range(len(vectors)))
    if action == "unique":
        return unique_medoids(vectors, threshold)
    if action == "not_include":
        return []
    raise ValueError(f"unknown action {action!r}; use {', '.join(ACTIONS)}")
