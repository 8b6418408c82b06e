"""The LLM parts of a reasoning record (spec §0, §4; ``cypher/answers.cypher``):
``(:Query)-[:ANSWERED]->(:Answer)-[:CITES]->(:Passage|:Proposition)`` and the PruneRAG
tree ``(:Query)-[:TREE]->(:TreeNode)-[:CHILD {order}]->(:TreeNode)``,
``(:TreeNode)-[:RETRIEVED {rank}]->(:Passage)``. Written in the query record's
transaction by :func:`pathweave.records.reasoning.write_reasoning_record`, read back with it.
"""

from __future__ import annotations

from pathweave.model import QueryResult
from pathweave.store.graph_store import GraphStore


def answer_steps(result: QueryResult) -> list[tuple[str, dict]]:
    """The named statements writing ``result.answer`` and ``result.tree`` (none without them)."""
    qid, steps = result.query_id, []
    answer = result.answer
    if answer is not None:
        steps.append(("write_answer", {
            "query_id": qid, "text": answer.text, "source": answer.source, "model": answer.model,
            "llm_calls": answer.llm_calls, "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens, "latency_ms": answer.latency_ms,
            "error": answer.error, "citations": answer.citations}))
        for name, ids in (("answer_cites_passages", answer.passage_ids), ("answer_cites_propositions", answer.prop_ids)):
            if ids:
                steps.append((name, {"query_id": qid, "rows": [{"id": i, "order": n} for n, i in enumerate(ids)]}))
    tree = result.tree
    if tree is not None and tree.nodes:
        def node_id(local: str) -> str:
            return f"{qid}:{local}"

        steps.append(("write_tree_nodes", {"query_id": qid, "rows": [
            {"node_id": node_id(n.node_id), "kind": n.kind, "text": n.text, "depth": n.depth, "decision": n.decision,
             "answer": n.answer, "confidence": n.confidence, "llm_calls": n.llm_calls, "error": n.error}
            for n in tree.nodes]}))
        steps.append(("link_tree_root", {"query_id": qid, "node_id": node_id(tree.nodes[0].node_id),
                                         "llm_calls": tree.llm_calls, "prompt_tokens": tree.prompt_tokens,
                                         "completion_tokens": tree.completion_tokens, "llm_ms": tree.llm_ms,
                                         "retrievals": tree.retrievals}))
        children = [{"parent": node_id(n.node_id), "child": node_id(c), "order": i}
                    for n in tree.nodes for i, c in enumerate(n.children)]
        if children:
            steps.append(("link_tree_children", {"query_id": qid, "rows": children}))
        retrieved = [{"node_id": node_id(n.node_id), "passage_id": h.passage_id, "rank": h.rank, "score": h.score}
                     for n in tree.nodes for h in n.passages]
        if retrieved:
            steps.append(("tree_retrieved", {"query_id": qid, "rows": retrieved}))
    return steps


def read_answer(store: GraphStore, query_id: str) -> dict | None:
    """The stored answer of a query: ``{text, source, model, llm_calls, prompt_tokens,
    completion_tokens, latency_ms, error, citations, cited: [{label, id}]}``, or None."""
    rows = store.run("read_query_answer", query_id=query_id)
    if not rows:
        return None
    keys = ("text", "source", "model", "llm_calls", "prompt_tokens", "completion_tokens", "latency_ms", "error",
            "citations")
    out = {key: rows[0][key] for key in keys}
    out["cited"] = [{"label": r["cited_label"], "id": r["cited_id"]} for r in rows if r["cited_id"] is not None]
    return out


def read_tree(store: GraphStore, query_id: str) -> dict | None:
    """The stored PruneRAG tree of a query: ``{llm_calls, prompt_tokens, completion_tokens,
    llm_ms, retrievals, nodes: [{node_id, kind, text, depth, decision, answer, confidence,
    llm_calls, error, children: [node_id], passages: [{passage_id, title, rank, score}]}]}``
    (nodes root first, breadth-first), or None."""
    rows = store.run("read_query_tree", query_id=query_id)
    if not rows:
        return None
    children: dict[str, list[str]] = {}
    for row in store.run("read_tree_children", query_id=query_id):
        children.setdefault(row["parent"], []).append(row["child"])
    passages: dict[str, list[dict]] = {}
    for row in store.run("read_tree_retrieved", query_id=query_id):
        passages.setdefault(row["node_id"], []).append(
            {"passage_id": row["passage_id"], "title": row["title"], "rank": row["rank"], "score": row["score"]})
    nodes = [{"node_id": r["node_id"], "kind": r["kind"], "text": r["text"], "depth": r["depth"],
              "decision": r["decision"], "answer": r["answer"], "confidence": r["confidence"],
              "llm_calls": r["node_llm_calls"], "error": r["error"], "children": children.get(r["node_id"], []),
              "passages": passages.get(r["node_id"], [])} for r in rows]
    nodes.sort(key=lambda n: int(n["node_id"].rsplit(":n", 1)[-1]))
    totals = {key: rows[0][key] for key in ("llm_calls", "prompt_tokens", "completion_tokens", "llm_ms", "retrievals")}
    return {**totals, "nodes": nodes}
