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


def statement_citations(store: GraphStore, prop_ids: list[str], passage_ids: list[str], preferred: list[str],
                        access: Access = UNRESTRICTED) -> tuple[dict[str, str], dict[str, dict[str, Any]]]:
    """``(statement_of, cited)``: ``prop_id -> passage_id`` citing each proposition of
    ``prop_ids`` (the first of ``preferred``, e.g. the result's ranked passages, stating it,
    else the first passage stating it that ``access`` may read), and
    :func:`passage_citations` of ``passage_ids`` and of those passages. One read of the
    stating passages and one of citations: a restricted reader's citations read decides
    which stating passages it may read too (``cited`` then also holds the other readable
    stating passages)."""
    rows = store.run("proposition_citing_passages", prop_ids=sorted(set(prop_ids))) if prop_ids else []
    if access.restricted:
        cited = passage_citations(store, list(passage_ids) + [row["passage_id"] for row in rows], access)
        return _first_stating([row for row in rows if row["passage_id"] in cited], preferred), cited
    statement_of = _first_stating(rows, preferred)
    return statement_of, passage_citations(store, list(passage_ids) + list(statement_of.values()), access)


def _first_stating(rows: list[dict], preferred: list[str]) -> dict[str, str]:
    """``prop_id -> passage_id`` from ``{prop_id, passage_id}`` rows: the first of
    ``preferred`` stating it, else the first row's passage."""
    order = {pid: i for i, pid in enumerate(preferred)}
    best: dict[str, str] = {}
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
    statement_of, cited = statement_citations(
        store, [line.id for line in lines if line.kind == "proposition"],
        [hit.passage_id for hit in result.passages if hit.reference is None]
        + [line.id for line in lines if line.kind == "passage"], ranked, access)
    for hit in result.passages:
        found = cited.get(hit.passage_id)
        if found:
            hit.page, hit.section, hit.reference = found["page"], found["section"], found["reference"]
    for line in lines:
        passage = line.id if line.kind == "passage" else statement_of.get(line.id)
        if passage in cited:
            line.reference = cited[passage]["reference"]
    return result
