"""The compact prompt (APR, spec §3 "Compact prompt"; paper §2.6, App. A.4, Figs. 8-9).

The payload ``(E', R', q, a, f, rules)``: the question, and per channel the selected runs
(each keyed by its codebook run code) with their triples not given yet, plus the codes of
the runs whose triples were all given already — earlier in the session or above in this
prompt (referenced, not re-sent: token cost scales with new evidence). The legend
(``rules``) is sent with a session's first prompt only. Three renderings of the same
payload, compact JSON:

- ``words``: word triples ``[h, r, t]``;
- ``id_triples``: entity and relation lists ``e``/``r`` and runs as ``[h_idx, r_idx, t_idx]``;
- ``edge_matrix``: ``e``/``r``, the unique edges as ``edge_matrix`` rows and runs as lists
  of edge indices.

Each is token-counted with the configured tokenizer and the cheapest is sent.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from pathweave.selection import TokenCounter

Triple = tuple[str, str, str]

RENDERINGS: tuple[str, ...] = ("words", "id_triples", "edge_matrix")

_KEYS = {"facts": "facts", "questions": "questions", "answers": "given knowledge"}
_SEEN = "seen runs: triples given earlier in this session or above, by run id"
_RULES = {
    "words": "KB JSON: q question; facts/questions/given knowledge: {run id: [[head, relation, tail]]}; " + _SEEN,
    "id_triples": "KB JSON: e entities, r relations; q question; facts/questions/given knowledge: "
                  "{run id: [[head e idx, r idx, tail e idx]]}; " + _SEEN,
    "edge_matrix": "KB JSON: e entities, r relations, edge_matrix rows [head e idx, r idx, tail e idx]; q question; "
                   "facts/questions/given knowledge: {run id: [edge idx]}; " + _SEEN,
}


@dataclass
class PromptRun:
    """One selected run in a prompt: its codebook ``code``, channel and word triples (text order)."""

    code: int
    channel: str
    triples: list[Triple]


@dataclass
class Payload:
    """What a prompt carries: the ``question`` text, the ``runs`` sent (each with its triples
    not given before), the codes of the runs ``seen`` (all their triples given before:
    referenced only) and whether the ``legend`` (the rendering's rules) is sent — False for
    a later prompt of a session, which has it from the first."""

    question: str
    runs: list[PromptRun] = field(default_factory=list)
    seen: list[int] = field(default_factory=list)
    legend: bool = True


def _dump(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _channels(payload: Payload, encode) -> dict:
    out: dict = {}
    for run in payload.runs:
        out.setdefault(_KEYS[run.channel], {})[str(run.code)] = encode(run.triples)
    return out


def render(payload: Payload, rendering: str) -> str:
    """``payload`` as one of :data:`RENDERINGS` (compact JSON text). Raises ValueError on
    an unknown rendering."""
    head: dict = {}
    if rendering == "words":
        body = _channels(payload, lambda triples: [list(t) for t in triples])
    elif rendering in ("id_triples", "edge_matrix"):
        entities: dict[str, int] = {}
        relations: dict[str, int] = {}
        edges: dict[tuple[int, int, int], int] = {}

        def ids(t: Triple) -> tuple[int, int, int]:
            return (entities.setdefault(t[0], len(entities)), relations.setdefault(t[1], len(relations)),
                    entities.setdefault(t[2], len(entities)))

        if rendering == "id_triples":
            body = _channels(payload, lambda triples: [list(ids(t)) for t in triples])
        else:
            body = _channels(payload, lambda triples: [edges.setdefault(ids(t), len(edges)) for t in triples])
            head["edge_matrix"] = [list(e) for e in edges]
        head = {"e": list(entities), "r": list(relations), **head}
    else:
        raise ValueError(f"unknown rendering {rendering!r}; use {', '.join(RENDERINGS)}")
    out = {**({"rules": _RULES[rendering]} if payload.legend else {}), **head, "q": payload.question, **body}
    if payload.seen:
        out["seen runs"] = sorted(payload.seen)
    return _dump(out)


@dataclass
class CompactPrompt:
    """The rendering sent (the cheapest), its ``text`` and ``tokens``, and the token count
    of every rendering (``token_counts``: rendering -> tokens of the configured tokenizer)."""

    rendering: str
    text: str
    tokens: int
    token_counts: dict[str, int]


def compact_prompt(payload: Payload, counter: TokenCounter,
                   renderings: Sequence[str] = RENDERINGS) -> CompactPrompt:
    """Render ``payload`` every way, count the tokens with ``counter`` and keep the cheapest
    (ties: the first of ``renderings``)."""
    texts = {name: render(payload, name) for name in renderings}
    counts = dict(zip(texts, counter.count_many(list(texts.values()))))
    best = min(renderings, key=lambda name: counts[name])
    return CompactPrompt(best, texts[best], counts[best], counts)
