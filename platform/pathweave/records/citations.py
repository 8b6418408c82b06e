"""Citations down to the page and section: ``"title, p. N"`` for a PDF passage,
``"title > section"`` for a passage under a heading (Markdown, HTML, Word), the
title alone otherwise.

The retriever cites its ranked passages as it reads their texts (statement
``subgraph_passage_texts``); :func:`cite_result` cites a token-budgeted context's
lines (and any passage still uncited) afterwards in one or two statements.
"""

from __future__ import annotations

from typing import Any

from pathweave.access import UNRESTRICTED, Access
from pathweave.model import QueryResult
from pathweave.store.graph_store import GraphStore


def format_citation(title: str | None, page: int | None = None, section: str | None = None) -> str:
    """``"title, p. N"`` when ``page`` is set, else ``"title > section"`` when ``section``
    is set, else ``title`` (``""`` for None)."""
    title = title or ""
    if page is not None:
        return f"{title}, p. {int(page)}"
    if section:
        return f"{title} > {section}" if title else section
    return title


def passage_citations(store: GraphStore, passage_ids: list[str],
                      access: Access = UNRESTRICTED) -> dict[str, dict[str, Any]]:
    """``passage_id -> {page, section, title, source, doc_id, reference}`` for the passages of
    ``passage_ids`` found in the store's tenant, each cited by the first of its documents (by
    id) that ``access`` may read (:mod:`pathweave.access`); unknown ids, and passages none of
    whose documents it may read, are left out."""
    if not passage_ids:
        return {}
    out: dict[str, dict[str, Any]] = {}
    for row in store.run("passage_citations", ids=sorted(set(passage_ids))):
        if row["passage_id"] in out:
            continue
        if access.restricted and not (row["held"] and access.reads(row["acl"])):
            continue
        out[row["passage_id"]] = {"page": row["page"], "section": row["section"], "title": row["title"],
                                  "source": row["source"], "doc_id": row["doc_id"],
                                  "reference": format_citation(row["title"], row["page"], row["section"])}
    return out


def statement_passages(store: GraphStore, prop_ids: list[str], preferred: list[str],
                       access: Access = UNRESTRICTED) -> dict[str, str]:
    """``prop_id -> passage_id`` citing each proposition: the first of ``preferred`` (e.g.
    the result's ranked passages) stating it, else the first passage stating it that
    ``access`` may read."""
    if not prop_ids:
        return {}
    order = {pid: i for i, pid in enumerate(preferred)}
    best: dict[str, str] = {}
    rows = store.run("proposition_citing_passages", prop_ids=sorted(set(prop_ids)))
    if access.restricted:
        readable = passage_citations(store, [row["passage_id"] for row in rows], access)
        rows = [row for row in rows if row["passage_id"] in readable]
    for row in rows:
        current = best.get(row["prop_id"])
        candidate = row["passage_id"]
        if current is None or order.get(candidate, len(order)) < order.get(current, len(order)):
            best[row["prop_id"]] = candidate
    return best


def cite_result(store: GraphStore, result: QueryResult, access: Access = UNRESTRICTED) -> QueryResult:
    """``result`` with ``page``, ``section`` and ``reference`` set on its passages (those
    the retriever left uncited) and ``reference`` on its context lines (a statement line cites a passage stating it,
    preferring the result's ranked passages), citing only documents ``access`` may read.
    Changes ``result`` in place and returns it. Raises what the store raises."""
    ranked = [hit.passage_id for hit in result.passages]
    lines = result.context.lines if result.context is not None else []
    statement_of = statement_passages(store, [line.id for line in lines if line.kind == "proposition"], ranked,
                                      access)
    cited = passage_citations(store, [hit.passage_id for hit in result.passages if hit.reference is None]
                              + [line.id for line in lines if line.kind == "passage"] + list(statement_of.values()),
                              access)
    for hit in result.passages:
        found = cited.get(hit.passage_id)
        if found:
            hit.page, hit.section, hit.reference = found["page"], found["section"], found["reference"]
    for line in lines:
        passage = line.id if line.kind == "passage" else statement_of.get(line.id)
        if passage in cited:
            line.reference = cited[passage]["reference"]
    return result
