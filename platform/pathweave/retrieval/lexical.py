"""Lexical hits beside the vector hits: the question's terms asked of the store's
full-text (Lucene) indexes, fused with the vector ranking by reciprocal rank fusion.

Small embedders miss names, codes and rare terms (a product code, a contract number, a
surname); a full-text index finds them exactly. Peers fuse both the same way (Graphiti: BM25 +
cosine + RRF; neo4j-graphrag's ``HybridRetriever``). Reciprocal rank fusion (Cormack, Clarke
and Büttcher, SIGIR 2009) needs no common score scale: an item's fused score is
``sum_i 1 / (c + rank_i)`` over the lists that hold it, with ``c = 60`` as in the paper.

The question reaches Lucene only as quoted terms: every character of a term is literal inside
its quotes (a backslash and a quote escaped), so Lucene operators, field prefixes, wildcards
and fuzzy marks in a question are searched as text, never interpreted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

RRF_C = 60
"""Reciprocal rank fusion's constant (the paper's)."""

#: A term: letters or digits, with inner - . / ' _ kept (codes such as PX-4471, 3.2.1, O'Neill).
_TERM = re.compile(r"[^\W_](?:[\w'./-]*[^\W_])?")

#: Terms left out of the query: English function words and question words, which the index's
#: analyzer drops (or which match every passage) and which would only add noise to the scores.
STOPWORDS = frozenset("""
a an and are as at be but by for from had has have he her his how i in into is it its of on or she
that the their them then there these they this those to was were what when where which who whom whose
why will with would did does do done not no than so such can could should may might must shall
""".split())

MAX_TERMS = 32
"""At most this many distinct terms are asked (a long question is not a denial of service)."""


def lucene_query(question: str) -> str:
    """The Lucene query of ``question``'s terms: the distinct terms that are no stop word (at
    most :data:`MAX_TERMS`, each cut to 64 characters), each quoted with backslashes and quotes
    escaped, joined by spaces (any may match; BM25 ranks). Where the question names something,
    a term with a capital or a digit (a name, a code), only those are asked: the lexical
    channel is for what embedders miss, and a common word ("contract", "signed") would let
    passages on the question's topic outrank the one that names it. Empty when no term is left."""
    terms: list[str] = []
    for match in _TERM.finditer(question):
        term = match.group(0)[:64]
        if term.lower() in STOPWORDS or term.lower() in (t.lower() for t in terms):
            continue
        terms.append(term)
        if len(terms) == MAX_TERMS:
            break
    named = [term for term in terms if any(c.isupper() or c.isdigit() for c in term)]
    return " ".join('"' + term.replace("\\", "\\\\").replace('"', '\\"') + '"' for term in named or terms)


def rrf(rankings: Sequence[Sequence[tuple[str, float]]], c: int = RRF_C) -> list[tuple[str, float]]:
    """Reciprocal rank fusion of ``rankings`` (each ``[(id, score)]`` best first):
    ``[(id, sum of 1 / (c + rank))]`` best first, ties in first-seen order. Items of equal score
    in a ranking share its best rank (1 + the items scored higher): the order an index lists
    equal scores in is its own storage order, not evidence."""
    fused: dict[str, float] = {}
    for ranking in rankings:
        rank, last = 0, None
        for place, (item, score) in enumerate(ranking, 1):
            if score != last:
                rank, last = place, score
            fused[item] = fused.get(item, 0.0) + 1.0 / (c + rank)
    return sorted(fused.items(), key=lambda pair: -pair[1])


def complete_ties(hits: Sequence[tuple[str, float]], k: int) -> list[tuple[str, float]]:
    """The first ``k`` of ``hits`` (``[(id, score)]`` best first, asked for ``k + 1``) without
    the group of equal scores that the cut at ``k`` splits: which members of such a group an
    index returns is its storage order, so keeping some would rank passages on that order (a
    term every passage holds ties them all; two tenants or two callers holding the same
    passages would get different ones)."""
    hits = list(hits)
    if len(hits) <= k:
        return hits
    cut = hits[k][1]
    return [hit for hit in hits[:k] if hit[1] != cut]
