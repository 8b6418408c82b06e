"""Result models of a query (pydantic): ranked passages, reasoning paths,
seed entities and per-stage timings. The same objects are persisted as the
reasoning record (spec §0) and returned by the CLI and the API.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from pathweave.retrieval.modes import Mode


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


class PathStep(BaseModel):
    """One proposition on a path; ``via`` names the entity shared with the previous
    step (None for the first step or a jump)."""

    prop_id: str
    text: str
    via: str | None = None


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
    reference: str | None = Field(None, description="Citation of the line's passage: 'title, p. N' / 'title > section'.")


class BudgetedContext(BaseModel):
    """Prompt-ready context selected under a token budget (spec §5).

    ``text`` has ``token_count`` tokens of ``tokenizer``; ``objective`` is the selected
    weight, ``bound`` an upper bound, ``gap`` their relative difference; ``solve_ms`` ms.
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


class QueryResult(BaseModel):
    """Everything one query returns. ``timings_ms`` maps stage -> milliseconds."""

    query_id: str
    question: str
    mode: Mode
    passages: list[PassageHit]
    paths: list[ReasoningPath] = Field(default_factory=list)
    seeds: list[SeedEntity] = Field(default_factory=list)
    context: BudgetedContext | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    graph_version: int = 0
