"""PruneRAG: confidence-guided query decomposition trees (spec §4; seed
prunerag-confidence-guided-decomposition.md, Algorithm 1).

Top-down, breadth-first: every query node retrieves its top-k passages (PropRAG here)
and makes ONE greedy LLM call with its documents, its parent's query ("ROOT" for the
root), its own query and three few-shot examples; the LAST JSON object of the output is
the decision: ``answer`` (accepted when the answer value's tokens have confidence
exp(mean log-prob) > threshold; on rejection asked once more with a low-confidence note),
``decomposition`` (two child query nodes, while depth < max_depth) or ``entity`` (two
entity leaves, each entity string a retrieval query). An LLM failure, a timeout or an
unparseable output makes the node a dead leaf (never an exception). Bottom-up: the tree
(query, answer, context for the unanswered nodes) is serialized as nested JSON and one
final call answers the root question from it; we keep the root's own passages in that
context (the reference drops them once the root decomposes).

:func:`build_tree` is the pure tree logic over a ``retrieve(text, k)`` callable and a
client; :class:`PruneRAGMode` runs it on the query resources, every node retrieved by mode
proprag's strategy (retrieval mode ``prunerag``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Callable

from pathweave.access import UNRESTRICTED, Access
from pathweave.llm.client import LLMError
from pathweave.llm.confidence import answer_confidence, last_json_object
from pathweave.retrieval.proprag import PropRAGMode
from pathweave.retrieval.request import QueryRequest
from pathweave.retrieval.strategy import Retrieval, RetrievalMode
from pathweave.settings import PruneRAGSettings
from pathweave.model import Answer, PassageHit, PruneTree, TreeNode

DECISION_TOKENS = 96
"""Completion budget of one node decision (tokens)."""
AGGREGATE_TOKENS = 48
"""Completion budget of the final aggregation call (tokens)."""
DOC_CHARS = 1200
"""Characters of a passage shown in a node's prompt and in the aggregated tree (a 256-token chunk fits)."""

SYSTEM = """You solve one question of a question-decomposition tree using the retrieved documents.
Reply with ONE JSON object:
- if the documents answer the question: {"type": "answer", "answer": "<short answer>"}
- else, if the question combines two simpler questions: {"type": "decomposition", "subquery1": "<question>", "subquery2": "<question>"}
- else: {"type": "entity", "entity1": "<entity or phrase to search>", "entity2": "<entity or phrase to search>"}"""

FEW_SHOT = (
    ("Documents:\n- Titanic (1997 film): Titanic is a 1997 epic film directed by James Cameron.\n"
     "Parent question: ROOT\nQuestion: Who directed Titanic (1997)?",
     '{"type": "answer", "answer": "James Cameron"}'),
    ("Documents:\n- Avatar (2009 film): Avatar is a science fiction film by James Cameron.\n"
     "Parent question: ROOT\nQuestion: Which film came out first, Titanic or Jaws?",
     '{"type": "decomposition", "subquery1": "When was Titanic released?", "subquery2": "When was Jaws released?"}'),
    ("Documents:\n- Welch (surname): Welch is a surname of Welsh origin.\n"
     "Parent question: Who employs the brother of Danny Welch?\nQuestion: Who is Danny Welch's employer?",
     '{"type": "entity", "entity1": "Danny Welch", "entity2": "employer of Danny Welch"}'),
)

LOW_CONFIDENCE = ("Your answer {answer!r} has low confidence ({confidence:.2f}). Do not answer again: "
                  "decompose the question into two simpler questions, or give two entities to search for. "
                  "Reply with one JSON object.")

AGGREGATE_SYSTEM = ("Answer the root question using the decomposition tree (sub-questions, their answers and "
                    'retrieved documents). Reply with one JSON object: {"answer": "<the short answer: a name, '
                    'date, number or short phrase>"}.')
AGGREGATE_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}

Retrieve = Callable[[str, int], list[PassageHit]]
OnStep = Callable[[TreeNode, "str | None"], None]
"""What hears of each settled tree node: ``(node, its parent's node id or None)``."""


def documents_block(passages: list[PassageHit]) -> str:
    """Passages as ``- title: text`` lines (each cut to :data:`DOC_CHARS` characters)."""
    return "\n".join(f"- {hit.title}: {' '.join(hit.text.split())[:DOC_CHARS]}" for hit in passages) or "(none)"


def node_messages(node: TreeNode, parent: str) -> list[dict]:
    """The decision prompt of ``node``: system, three few-shot exchanges, its documents,
    parent query (or ROOT) and query."""
    messages = [{"role": "system", "content": SYSTEM}]
    for user, assistant in FEW_SHOT:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": f"Documents:\n{documents_block(node.passages)}\n"
                                                f"Parent question: {parent}\nQuestion: {node.text}"})
    return messages


class _Builder:
    def __init__(self, client, retrieve: Retrieve, params: PruneRAGSettings, on_step: OnStep | None = None) -> None:
        self.client, self.retrieve, self.params, self.on_step = client, retrieve, params, on_step
        self.tree = PruneTree(nodes=[])
        self.parent_of: dict[str, TreeNode] = {}  # node id -> its parent

    def add(self, kind: str, text: str, depth: int, parent: TreeNode | None) -> TreeNode:
        node = TreeNode(node_id=f"n{len(self.tree.nodes)}", kind=kind, text=text, depth=depth)
        self.tree.nodes.append(node)
        if parent is not None:
            parent.children.append(node.node_id)
            self.parent_of[node.node_id] = parent
        return node

    def call(self, node: TreeNode, messages: list[dict], **kwargs):
        node.llm_calls += 1
        completion = self.client.chat(messages, **kwargs)
        self._count(completion)
        return completion

    def _count(self, completion) -> None:
        self.tree.llm_calls += 1
        self.tree.prompt_tokens += completion.prompt_tokens
        self.tree.completion_tokens += completion.completion_tokens
        self.tree.llm_ms += completion.latency_ms

    def run(self, question: str) -> PruneTree:
        queue = [self.add("query", question, 1, None)]
        while queue:
            node = queue.pop(0)
            try:
                node.passages = self.retrieve(node.text, self.params.top_k)
                self.tree.retrievals += 1
            except Exception as exc:  # noqa: BLE001 - a failed retrieval kills this branch only
                node.decision, node.error = "dead", f"retrieval failed: {exc}"
            else:
                if node.kind == "entity":
                    node.decision = "retrieved"
                else:
                    queue += self.decide(node)
            if self.on_step is not None:
                parent = self.parent_of.get(node.node_id)
                self.on_step(node, parent.node_id if parent is not None else None)
        return self.tree

    def decide(self, node: TreeNode) -> list[TreeNode]:
        """One decision (plus the retry on a low-confidence answer); returns new children."""
        messages = node_messages(node, self.parent_of[node.node_id].text if node.node_id in self.parent_of else "ROOT")
        for attempt in range(self.params.retries + 1):
            try:
                completion = self.call(node, messages, json=True, logprobs=True, max_tokens=DECISION_TOKENS)
            except LLMError as exc:
                node.decision, node.error = "dead", str(exc)
                return []
            found = last_json_object(completion.text)
            decision = found[0] if found else {}
            kind = decision.get("type")
            if kind == "answer" and isinstance(decision.get("answer"), (str, int, float)) \
                    and str(decision["answer"]).strip():
                node.answer = str(decision["answer"]).strip()
                node.confidence = round(answer_confidence(completion.text, completion.tokens) or 0.0, 6)
                if node.confidence > self.params.threshold:
                    node.decision = "answer"
                    return []
                if attempt < self.params.retries:
                    messages = messages + [
                        {"role": "assistant", "content": completion.text},
                        {"role": "user", "content": LOW_CONFIDENCE.format(answer=node.answer,
                                                                          confidence=node.confidence)}]
                    continue
                node.decision = "low_confidence"
                return []
            if kind in ("decomposition", "entity"):
                prefix = "subquery" if kind == "decomposition" else "entity"
                texts = [str(decision.get(f"{prefix}{i}", "")).strip() for i in range(1, self.params.branching + 1)]
                texts = [t for t in dict.fromkeys(texts) if t]
                if not texts:
                    node.decision, node.error = "dead", f"{kind} without {prefix}s: {completion.text[:200]!r}"
                    return []
                if node.depth >= self.params.max_depth:
                    node.decision = "max_depth"
                    return []
                node.decision = kind
                child_kind = "query" if kind == "decomposition" else "entity"
                return [self.add(child_kind, text, node.depth + 1, node) for text in texts]
            node.decision, node.error = "dead", f"unparseable decision: {completion.text[:200]!r}"
            return []
        return []

    def serialize(self, node: TreeNode, shown: set[str]) -> dict:
        """The nested JSON of the aggregation prompt: query (or entity), answer, and the
        documents of answer / low-confidence / entity / max-depth nodes (each passage once)."""
        out: dict = {"entity" if node.kind == "entity" else "query": node.text}
        if node.answer is not None:
            out["answer"] = node.answer
            if node.decision == "low_confidence":
                out["answer_confidence"] = "low"
        if node.decision in ("answer", "low_confidence", "retrieved", "max_depth"):
            docs = [hit for hit in node.passages[:self.params.aggregate_docs] if hit.passage_id not in shown]
            shown.update(hit.passage_id for hit in docs)
            if docs:
                out["documents"] = [f"{hit.title}: {' '.join(hit.text.split())[:DOC_CHARS]}" for hit in docs]
        children = [n for n in self.tree.nodes if n.node_id in node.children]
        if children:
            out["children"] = [self.serialize(child, shown) for child in children]
        return out

    def aggregate(self, question: str) -> Answer:
        root = self.tree.nodes[0]
        if root.decision == "answer":  # accepted at the root: nothing to aggregate
            return self._answer(root.answer or "", [hit.passage_id for hit in root.passages])
        shown: set[str] = set()
        root_docs = root.passages if self.params.keep_root_docs else []
        shown.update(hit.passage_id for hit in root_docs)
        tree = self.serialize(root, shown)
        prompt = (f"Root question: {question}\n\nDecomposition tree:\n{json.dumps(tree, ensure_ascii=False)}\n\n"
                  + (f"Documents of the root question:\n{documents_block(root_docs)}\n\n" if root_docs else "")
                  + f"Question: {question}")
        messages = [{"role": "system", "content": AGGREGATE_SYSTEM}, {"role": "user", "content": prompt}]
        try:
            completion = self.client.chat(messages, schema=AGGREGATE_SCHEMA, max_tokens=AGGREGATE_TOKENS)
            self._count(completion)
        except LLMError as exc:
            return self._answer(root.answer or "", [], error=str(exc))
        found = last_json_object(completion.text)
        if found is None or not isinstance(found[0].get("answer"), (str, int, float)):
            return self._answer(root.answer or "", [], error=f"unparseable aggregation: {completion.text[:200]!r}")
        return self._answer(str(found[0]["answer"]).strip(), sorted(shown))

    def _answer(self, text: str, passage_ids: list[str], error: str | None = None) -> Answer:
        return Answer(text=text, source="prunerag", passage_ids=passage_ids, model=getattr(self.client, "model", ""),
                      llm_calls=self.tree.llm_calls, prompt_tokens=self.tree.prompt_tokens,
                      completion_tokens=self.tree.completion_tokens, latency_ms=round(self.tree.llm_ms, 1),
                      error=error)


def build_tree(question: str, client, retrieve: Retrieve, params: PruneRAGSettings,
               on_step: OnStep | None = None) -> tuple[PruneTree, Answer]:
    """Build the PruneRAG tree of ``question`` and aggregate it into the final answer.

    ``client``: anything with ``chat(messages, **kwargs) -> Completion`` raising
    :class:`~pathweave.llm.client.LLMError` on failure (the real :class:`LLMClient`);
    ``retrieve(text, k)``: the top-k passages of a (sub-)query. Never raises for LLM
    failures (dead leaves; a failed aggregation falls back to the root's answer, if any,
    with ``error`` set). Counts LLM calls, tokens and ms in the tree and the answer.
    ``on_step(node, parent_id)``: called as each node is settled (retrieved and decided, in
    breadth-first order; ``parent_id`` None at the root), before its children are; what it
    raises ends the tree and is raised here (a streamed query whose client left).
    """
    builder = _Builder(client, retrieve, params, on_step)
    tree = builder.run(question)
    answer = builder.aggregate(question)
    tree.llm_ms = round(tree.llm_ms, 1)
    return tree, answer


class PruneRAGMode(RetrievalMode):
    """Retrieval mode ``prunerag`` (spec §4): the tree with every node retrieved by PropRAG;
    the result carries the root's top-k passages, paths and seeds, the tree and the final
    answer (it always answers); its reasoning record holds the tree. Needs an LLM; a token budget and a session do not apply."""

    name = "prunerag"
    needs_llm = True
    answers_itself = True
    has_steps = True

    def search(self, resources, request, access: Access = UNRESTRICTED, on_step: OnStep | None = None) -> Retrieval:
        """The tree's query (see the class); ``on_step`` hears of each settled node
        (:func:`build_tree`)."""
        started = time.perf_counter()
        client = resources.llm_client()
        params = resources.prunerag_params
        question = request.question
        top = max(request.k, params.top_k)
        proprag = PropRAGMode()
        root = proprag.search(resources, QueryRequest.of(question, mode="proprag", k=top), access)

        def retrieve(text: str, n: int) -> list[PassageHit]:
            if text == question and n <= top:
                return root.result.passages[:n]
            return proprag.search(resources, QueryRequest.of(text, mode="proprag", k=n), access).result.passages

        tree, answer = build_tree(question, client, retrieve, params, on_step)
        result = root.result.model_copy(update={"mode": "prunerag", "passages": root.result.passages[:request.k],
                                                "tree": tree, "answer": answer})
        result._principals = access.stored()
        result.timings_ms = {**root.result.timings_ms, "prunerag": round((time.perf_counter() - started) * 1000, 2)}
        result.timings_ms["total"] = result.timings_ms["prunerag"]
        return dataclasses.replace(root, result=result)  # the root's Retrieval (subgraph, query vector)
