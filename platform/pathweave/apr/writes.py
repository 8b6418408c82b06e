"""The rows APR writes (spec §3, §0 APR lines; ``cypher/apr.cypher``): fact runs of new
passages at ingestion, question and answer runs (with their triples and symbols) at query
time. Ids are content hashes (tenant + channel + the run's triple ids), so writing the same
run twice changes nothing and identical runs of two passages are one node with two
``HAS_RUN`` links.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from pathweave.apr.runs import line, segment
from pathweave.text import normalize, stable_id
from pathweave.graph.vectors import encode_vector

Encode = Callable[[list[str]], np.ndarray]
"""The embedder's ``encode``: texts -> ``(n, d)`` float32, L2-normalized."""


@dataclass(frozen=True)
class TripleRef:
    """A triple as a run holds it: its id, words ``(h, r, t)`` and symbol ids."""

    triple_id: str
    words: tuple[str, str, str]
    subject_id: str
    relation_id: str
    object_id: str


def triple_ref(tenant: str, subject: str, relation: str, obj: str) -> TripleRef | None:
    """The triple ``(subject, relation, obj)`` with the ingestion's content ids (spec §0),
    or None when a part normalizes to nothing."""
    if not (normalize(subject) and normalize(relation) and normalize(obj)):
        return None
    return TripleRef(stable_id("triple", tenant, normalize(subject), normalize(relation), normalize(obj)),
                     (subject, relation, obj), stable_id("entity", tenant, normalize(subject)),
                     stable_id("relation", tenant, normalize(relation)), stable_id("entity", tenant, normalize(obj)))


def run_id(tenant: str, channel: str, triple_ids: Sequence[str]) -> str:
    """The content id of a run: tenant + channel + its triple ids in order."""
    return stable_id("run", tenant, channel, *triple_ids)


def run_text(triples: Sequence[tuple[str, str, str]]) -> str:
    """A run's text: its lines "h r t", one per line (embedded for the whole-chunk gate)."""
    return "\n".join(line(t) for t in triples)


def _run_row(tenant: str, channel: str, refs: Sequence[TripleRef], vec: np.ndarray) -> dict:
    return {"run_id": run_id(tenant, channel, [r.triple_id for r in refs]), "tenant": tenant,
            "text": run_text([r.words for r in refs]), "vec": encode_vector(vec),
            "entity_ids": list(dict.fromkeys(e for r in refs for e in (r.subject_id, r.object_id))),
            "relation_ids": list(dict.fromkeys(r.relation_id for r in refs)), "size": len(refs)}


def fact_run_rows(tenant: str, passages: dict[str, list[TripleRef]], encode: Encode, tau: float = 0.7,
                  bonus: float = 0.05) -> dict[str, list[dict]]:
    """Rows of the fact runs of ``passages`` (``{passage_id: its triples in text order}``):
    ``{"apr_triple_lines": [...], "apr_upsert_fact_runs": [...], "apr_link_run_edges": [...]}``.
    Two ``encode`` calls: the triples' lines, then the runs' texts."""
    lines: dict[str, str] = {}
    for refs in passages.values():
        for ref in refs:
            lines.setdefault(ref.triple_id, line(ref.words))
    line_ids = list(lines)
    vectors = dict(zip(line_ids, encode([lines[i] for i in line_ids]))) if line_ids else {}
    out: dict[str, list[dict]] = {"apr_triple_lines": [{"triple_id": i, "line_vec": encode_vector(v)}
                                                       for i, v in vectors.items()],
                                  "apr_upsert_fact_runs": [], "apr_link_run_edges": []}
    drafts: list[tuple[str, list[TripleRef]]] = []
    for pid, refs in passages.items():
        refs = list(dict.fromkeys(refs))  # a triple stated twice in a passage is one edge
        if not refs:
            continue
        matrix = np.stack([vectors[r.triple_id] for r in refs])
        for run in segment([r.words for r in refs], matrix, tau, bonus):
            drafts.append((pid, [refs[i] for i in run]))
    texts = encode([run_text([r.words for r in refs]) for _, refs in drafts]) if drafts else []
    for (pid, refs), vec in zip(drafts, texts):
        row = _run_row(tenant, "fact", refs, vec)
        out["apr_upsert_fact_runs"].append({**row, "passage_id": pid, "embedding": vec.tolist()})
        out["apr_link_run_edges"] += [{"run_id": row["run_id"], "triple_id": r.triple_id, "order": n}
                                      for n, r in enumerate(refs)]
    return out


@dataclass
class MemoryRun:
    """A question or answer run ready to write: its row, its triples' rows, its new symbols'
    rows and its edge links (statements of ``cypher/apr.cypher`` and ``upsert_entities`` /
    ``upsert_relations``)."""

    run_id: str
    steps: list[tuple[str, dict]]


def memory_run(tenant: str, channel: str, refs: Sequence[TripleRef], line_vecs: np.ndarray, text_vec: np.ndarray,
               symbol_vecs: dict[str, np.ndarray], names: dict[str, str], passage_ids: Sequence[str] = ()) -> MemoryRun:
    """The writes of one question/answer run of ``refs`` (``line_vecs``: ``(n, d)`` their
    line embeddings; ``text_vec``: the run text's; ``symbol_vecs``/``names``: entity and
    relation ids -> vector/name, for symbols the store may not have yet; a symbol without a
    vector there is not written: it is stored already)."""
    row = _run_row(tenant, channel, refs, text_vec)
    row.update(channel=channel, memory_embedding=text_vec.tolist(), passage_ids=list(passage_ids))
    entities = [{"entity_id": i, "tenant": tenant, "name": names[i], "norm_name": normalize(names[i]),
                 "type": "", "embedding": symbol_vecs[i].tolist(), "vec": encode_vector(symbol_vecs[i])}
                for i in row["entity_ids"] if i in symbol_vecs]
    relations = [{"relation_id": i, "tenant": tenant, "name": names[i], "embedding": symbol_vecs[i].tolist(),
                  "vec": encode_vector(symbol_vecs[i])} for i in row["relation_ids"] if i in symbol_vecs]
    triples = [{"triple_id": r.triple_id, "tenant": tenant, "subject": r.words[0], "relation": r.words[1],
                "object": r.words[2], "subject_id": r.subject_id, "object_id": r.object_id,
                "relation_id": r.relation_id, "line_vec": encode_vector(v)} for r, v in zip(refs, line_vecs)]
    edges = [{"run_id": row["run_id"], "triple_id": r.triple_id, "order": n} for n, r in enumerate(refs)]
    steps = [("upsert_entities", {"rows": entities}), ("upsert_relations", {"rows": relations}),
             ("apr_upsert_memory_triples", {"rows": triples}), ("apr_upsert_memory_runs", {"rows": [row]}),
             ("apr_link_run_edges", {"rows": edges})]
    return MemoryRun(row["run_id"], [(name, params) for name, params in steps if params["rows"]])
