"""The vocabulary of a query: the retrieval modes and the options each takes, and the
result models (pydantic): ranked passages, reasoning paths, seed entities and per-stage
timings; with an LLM, the generated answer and the PruneRAG tree. The same objects are
persisted as the reasoning record (spec §0) and returned by the CLI and the API.

A new mode is one entry in :data:`RETRIEVAL_MODES` and :data:`MODE_OPTIONS`, and its
strategy class in :data:`pathweave.query.modes.STRATEGIES`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, PrivateAttr

RETRIEVAL_MODES: dict[str, str] = {
    "proprag": "PropRAG: two-stage PPR over propositions and beam search over proposition paths (spec §1)",
    "dense": "cosine ranking of the question against the passage embeddings (baseline)",
    "hipporag2": "HippoRAG 2: PPR over entities and passages seeded by filtered facts (spec §2, baseline)",
    "apr": "AutoPrunedRetriever: coarse-to-fine retrieval of triple runs over facts, earlier questions "
           "and earlier answers, sent as a compact prompt that reuses what a session already sent (spec §3)",
    "prunerag": "PruneRAG: an LLM decomposes the question into a tree of sub-questions answered "
                "over PropRAG passages, pruned by answer confidence (spec §4; needs an LLM)",
}
"""Mode name -> what it ranks with (``pathweave query --mode``; the first is the default)."""

MODES: tuple[str, ...] = tuple(RETRIEVAL_MODES)
"""The mode names, in the order above."""

LLM_MODES: tuple[str, ...] = ("prunerag",)
"""Modes that need an LLM to search (``pathweave bench qa`` measures those)."""

RETRIEVAL_ONLY: tuple[str, ...] = tuple(m for m in MODES if m not in LLM_MODES)
"""Modes that rank with the store and the embedder alone (``pathweave bench musique``)."""

Mode = Literal[MODES]  # type: ignore[valid-type]  # Literal["proprag", "dense", "hipporag2", "apr", "prunerag"]

OPTION_NAMES = ("k", "token_budget", "selection_method", "context_style", "session_id", "answer", "write_record")
"""A request's options besides ``question`` and ``mode``, in the order of the docs' table."""

_RANKING_OPTIONS = frozenset(OPTION_NAMES)
MODE_OPTIONS: dict[str, frozenset[str]] = {
    "proprag": _RANKING_OPTIONS, "dense": _RANKING_OPTIONS, "hipporag2": _RANKING_OPTIONS,
    "apr": frozenset({"k", "session_id", "answer", "write_record"}),
    "prunerag": frozenset({"k", "answer", "write_record"}),
}
"""The options each mode takes; another option given is
:class:`~pathweave.errors.NotApplicable`, never dropped."""


class PassageHit(BaseModel):
    """A ranked passage; ``score`` is the mode's final score (PPR mass or cosine);
    ``page``/``section``/``reference`` (citations) are read with the text by the retriever."""

    passage_id: str
    doc_id: str = ""
    title: str
    text: str
    score: float
    rank: int
    page: int | None = Field(None, description="1-based PDF page of the passage (citations).")
    section: str | None = Field(None, description="Heading path of the passage, 'A > B' (citations).")
    reference: str | None = Field(None, description="Citation: 'title, p. N', 'title > section' or the title.")
    source: str | None = Field(None, description="The document's source (file path, URL or upload name).")


class PathStep(BaseModel):
    """One proposition on a path; ``via`` names the entity shared with the previous
    step (None for the first step or a jump)."""

    prop_id: str
    text: str
    via: str | None = None
    citations: list[int] = Field(default_factory=list,
                                 description="Ranks of the returned passages that state this proposition.")


class ReasoningPath(BaseModel):
    """A proposition path found by the beam search (PropRAG §1, stage 2)."""

    path_id: str = ""
    rank: int
    score: float
    steps: list[PathStep]


class SeedEntity(BaseModel):
    """An entity that seeded the stage-2 Personalized PageRank, with its weight in [0, 1]."""

    entity_id: str
    name: str
    weight: float


class ContextLine(BaseModel):
    """One line of a budgeted context: the node it renders, its weight and rank."""

    id: str
    kind: Literal["passage", "proposition", "entity"]
    rank: int
    weight: float
    line: str
    citation: str | None = Field(None, description="The label the line ends with ('[label]'), what an answer cites.")
    reference: str | None = Field(None, description="Citation of the line's passage: 'title, p. N' / 'title > section'.")
    code: str | None = Field(None, description="The line's code in its session ('S3'), None outside a session.")
    referenced: bool = Field(False, description="Sent earlier in the session: the line is its code alone.")


class BudgetedContext(BaseModel):
    """Prompt-ready context selected under a token budget (spec §5).

    ``text`` has ``token_count`` tokens of ``tokenizer``; ``objective`` is the selected
    weight, ``bound`` an upper bound, ``gap`` their relative difference; ``solve_ms`` ms.
    In a session (``session_id``) every line carries its code, lines the session was sent
    before are the code alone (``referenced``), and the first context of the session starts
    with the legend of the codes (APR's "send only what is new" on spec §5's context).
    """

    text: str
    token_count: int
    tokenizer: str
    budget: int
    method: str
    requested: str
    objective: float
    bound: float
    gap: float
    optimal: bool
    solve_ms: float
    candidate_nodes: int
    lines: list[ContextLine]
    session_id: str | None = Field(None, description="The session the context was sent in: lines it sent "
                                                     "before are referenced by code, not re-sent (spec §3).")
    expanded: str | None = Field(None, description="In a session: the context with its referenced lines written "
                                                   "out, for a reader that has not seen the session (the answer step).")


class Answer(BaseModel):
    """An answer generated by an LLM from a query's evidence.

    ``source``: what it was generated from (``passages``: the top passages, ``context``: the
    token-budgeted context, ``prunerag``: the aggregated decomposition tree, spec §4);
    ``citations``: the labels the model cited (passage markers ``"1"``.. or context
    citations), resolved to ``passage_ids``/``prop_ids``; ``prompt_tokens`` and
    ``completion_tokens`` (tokens, as the endpoint counts them) and ``latency_ms`` (ms) over
    all ``llm_calls``; ``error``: why no answer was generated (endpoint down, bad JSON).
    """

    text: str
    source: Literal["passages", "context", "prunerag"]
    citations: list[str] = Field(default_factory=list)
    passage_ids: list[str] = Field(default_factory=list)
    prop_ids: list[str] = Field(default_factory=list)
    model: str = ""
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    error: str | None = None


class TreeNode(BaseModel):
    """A node of a PruneRAG decomposition tree (spec §4): a ``query`` node (sub-question) or
    an ``entity`` leaf (an entity string used as a retrieval query), at ``depth`` (root 1).

    ``decision``: ``answer`` (accepted, confidence > threshold), ``low_confidence`` (an
    answer still below the threshold after the retry), ``decomposition`` / ``entity``
    (expanded into ``children``), ``max_depth`` (wanted to expand at the depth limit),
    ``dead`` (LLM failure or unparseable output: ``error``), ``retrieved`` (entity leaf);
    ``confidence``: exp(mean log-prob) of the answer value's tokens (0..1);
    ``passages``: the node's top-k PropRAG passages.
    """

    node_id: str
    kind: Literal["query", "entity"]
    text: str
    depth: int
    decision: str = "pending"
    answer: str | None = None
    confidence: float | None = None
    llm_calls: int = 0
    error: str | None = None
    passages: list[PassageHit] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)


class PruneTree(BaseModel):
    """A PruneRAG tree, root first (breadth-first order), and what building and aggregating
    it cost: ``llm_calls``, ``prompt_tokens``/``completion_tokens`` (tokens),
    ``llm_ms`` (ms in LLM requests), ``retrievals`` (PropRAG queries)."""

    nodes: list[TreeNode]
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llm_ms: float = 0.0
    retrievals: int = 0

    def retrieved_passages(self) -> list[PassageHit]:
        """Every passage retrieved anywhere in the tree (first occurrence, BFS order)."""
        seen: dict[str, PassageHit] = {}
        for node in self.nodes:
            for hit in node.passages:
                seen.setdefault(hit.passage_id, hit)
        return list(seen.values())


class AprRun(BaseModel):
    """A run an APR query selected (spec §3): its codebook ``code``, ``channel``
    (facts | questions | answers), fine ``score``, whether it was ``reused`` (referenced by
    code: sent earlier in the session, or all its triples given already — in the session or
    above in the prompt) and the ``passage_ids`` it stands for."""

    run_id: str
    code: int | None = None
    channel: Literal["facts", "questions", "answers"]
    score: float
    reused: bool = False
    lines: list[str] = Field(default_factory=list, description="Its triples as 'h r t' lines, in order.")
    passage_ids: list[str] = Field(default_factory=list)


class AprContext(BaseModel):
    """The compact prompt of an APR query (spec §3): the ``rendering`` sent (the cheapest of
    ``token_counts``: rendering -> tokens of ``tokenizer``), its ``prompt`` text and
    ``prompt_tokens``, the selected ``runs`` (sent or reused), the ``actions`` per channel,
    the question's triples and the ``passage_ids`` (and their ``doc_ids``) the context covers."""

    session_id: str | None = None
    rendering: str
    prompt: str
    prompt_tokens: int
    token_counts: dict[str, int]
    tokenizer: str
    actions: dict[str, str]
    question_triples: list[list[str]] = Field(default_factory=list)
    runs: list[AprRun] = Field(default_factory=list)
    passage_ids: list[str] = Field(default_factory=list)
    doc_ids: list[str] = Field(default_factory=list, description="The documents of passage_ids (context recall).")


RecordState = Literal["written", "pending", "failed"]
RECORD_STATE = ("Its reasoning record: `written` before the answer; `pending`: written off the query path (GET "
                "/v1/queries/{id} finds it shortly); `failed`: not written after the store's retries (GET answers 404); "
                "null: not recorded.")


class QueryResult(BaseModel):
    """Everything one query returns. ``timings_ms`` maps stage -> milliseconds."""

    query_id: str
    question: str
    mode: Mode
    passages: list[PassageHit]
    paths: list[ReasoningPath] = Field(default_factory=list)
    seeds: list[SeedEntity] = Field(default_factory=list)
    context: BudgetedContext | None = None
    answer: Answer | None = None
    tree: PruneTree | None = None
    apr: AprContext | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    graph_version: int = 0
    trace_id: str | None = Field(None, description="The OpenTelemetry trace of the query (32 hex), when traced.")
    record: RecordState | None = Field(None, description=RECORD_STATE)
    _principals: list[str] | None = PrivateAttr(default=None)  # the caller's (None: unrestricted), never returned

    def principals(self) -> list[str] | None:
        """The principals of the caller this result was computed for (None: unrestricted;
        :mod:`pathweave.access`): its reasoning record and session are theirs."""
        return self._principals
