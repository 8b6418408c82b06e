"""Coarse-to-fine retrieval over the three channels and the compact prompt (APR, spec §3;
paper §2.4-2.6): :func:`retrieve` (retrieval mode ``apr``).

Per query: the question's triples (the configured extractor; a question it finds none in is
the one triple ``(entity, "asks", question)``) and their lines are embedded; the facts
channel's candidates are the fact runs of PropRAG's top passages for the question (setting
``apr.facts_source``; ``index``: the nearest runs of the run vector index, as the paper's
coarse search), the questions and answers channels' the nearest runs of the memory index,
``coarse_candidates`` per index; the coarse score (entities and relations) keeps
``coarse_top_k`` per channel; the fine score on S = cos(query lines, run lines) ranks them;
``top_m`` runs are kept across facts and questions and the answer quota from answers (runs
the session saw beyond them: a reference costs a code; a session's follow-up takes its
questions and answers from its own runs, setting ``apr.session_memory``); each
channel's action selects; runs the session already saw, and runs whose triples were all given
already (in the session or above in the prompt), are referenced by code; the three
renderings are counted and the cheapest is the prompt. Everything the score needs is read
by id through the codebook view (:class:`~pathweave.apr.codebook.CodebookView`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pathweave.access import UNRESTRICTED, Access
from pathweave.apr.codebook import CodebookView, RunRow, code_steps
from pathweave.errors import NotApplicable
from pathweave.apr.prompt import Payload, PromptRun, compact_prompt
from pathweave.apr.runs import line
from pathweave.apr.scoring import answer_quota, coarse_score, fine_score
from pathweave.apr.channel_actions import CHANNELS, check_actions, select
from pathweave.apr.memory import link_steps, query_steps, seen_runs
from pathweave.records.session_ids import check_session_id
from pathweave.apr.writes import TripleRef, memory_run, run_text, triple_ref
from pathweave.store.backends.base import vector_search
from pathweave.model import AprContext, AprRun
from pathweave.retrieval.proprag import PropRAGMode
from pathweave.retrieval.request import QueryRequest
from pathweave.retrieval.strategy import Retrieval, RetrievalMode

QuestionParser = Callable[[str], tuple[list[tuple[str, str, str]], list[str]]]
"""question -> (its triples ``(h, r, t)``, its entity names): the configured extractor."""

_CHANNEL_OF = {"fact": "facts", "question": "questions", "answer": "answers"}
ASK_RELATION = "asks"
"""Relation of the triple standing for a question the extractor found no triple in."""
EVIDENCE_LINES = 3
"""Triples of an evidence answer run: the first of the selected fact runs' triples in rank
order (an answer is short; a longer one would re-send the evidence through the answers channel)."""


@dataclass
class Ranked:
    """A candidate run with its coarse and fine scores."""

    row: RunRow
    coarse: float
    fine: float = 0.0


@dataclass
class AprOutcome:
    """What :func:`retrieve` returns: the ``context`` (prompt, runs, tokens, passages), the
    ``query_id``, the ranked passages ``passage_scores`` (passage id -> score, best first:
    :func:`passage_ranking`), the question's ``(d,)`` vector and, with the facts channel from
    PropRAG, ``passages``: PropRAG's hits in that order (texts and citations read once)."""

    query_id: str
    context: AprContext
    passage_scores: dict[str, float] = field(default_factory=dict)
    query: np.ndarray | None = None
    _write: Callable[[str | None], None] | None = field(default=None, repr=False)
    passages: list | None = None

    def record(self, answer_text: str | None = None) -> None:
        """Write this query's APR record now (see :func:`retrieve`'s ``write_record``), its
        answer run from ``answer_text`` (an LLM's answer) or else from the selected evidence."""
        if self._write is not None:
            self._write(answer_text)
            self._write = None


def question_triples(question: str, parse: QuestionParser | None) -> list[tuple[str, str, str]]:
    """The question's triples from ``parse``; when it finds none, one triple
    ``(longest entity name or "question", "asks", question)`` (a question is one run)."""
    triples, entities = parse(question) if parse is not None else ([], [])
    triples = [t for t in triples if all(part.strip() for part in t)]
    if triples:
        return triples
    head = max(entities, key=len) if entities else "question"
    return [(head, ASK_RELATION, question)]


@dataclass
class EncodedQuestion:
    """A question as APR scores it: its triples (``refs``), the ``(n, d)`` embeddings of their
    ``lines``, of the run text (``whole``) and of the question (``vector``), its entities' and
    relations' ``(a, d)`` / ``(b, d)`` vectors and ``symbol_vecs``/``names`` by symbol id."""

    refs: list[TripleRef]
    lines: np.ndarray
    whole: np.ndarray
    vector: np.ndarray
    entities: np.ndarray
    relations: np.ndarray
    symbol_vecs: dict[str, np.ndarray]
    names: dict[str, str]


def _encode_question(resources, question: str) -> EncodedQuestion:
    """The question's triples (the resources' ``question_parser``) and one ``encode`` call
    for their lines, the run text, the question and the symbols' names."""
    dim = resources.store.dimensions
    triples = question_triples(question, getattr(resources, "question_parser", None))
    refs = list(dict.fromkeys(r for r in (triple_ref(resources.store.tenant, *t) for t in triples) if r is not None))
    entities = {r.subject_id: r.words[0] for r in refs} | {r.object_id: r.words[2] for r in refs}
    relations = {r.relation_id: r.words[1] for r in refs}
    names = entities | relations
    vectors = resources.embedder.encode([line(r.words) for r in refs] + [run_text([r.words for r in refs]), question]
                                        + list(names.values()))
    n = len(refs)
    symbol_vecs = dict(zip(names, vectors[n + 2:]))

    def stack(ids) -> np.ndarray:
        return np.stack([symbol_vecs[i] for i in ids]) if ids else np.zeros((0, dim), dtype=np.float32)
    return EncodedQuestion(refs, vectors[:n], vectors[n], vectors[n + 1], stack(list(entities)), stack(list(relations)),
                           symbol_vecs, names)


def fact_candidates(resources, question: str, passages: int) -> tuple[list[str], list]:
    """The facts channel's candidates from PropRAG (setting ``apr.facts_source = "proprag"``):
    ``(run ids, passage hits)``: the fact runs of the top ``passages`` passages PropRAG ranks
    for ``question`` (nothing written), in their passages' order, and those passages best
    first, texts and citations included (the mode returns them without reading them again)."""
    request = QueryRequest.of(question, mode="proprag", k=passages)
    hits = PropRAGMode().search(resources, request).result.passages
    ranked = {hit.passage_id: hit.score for hit in hits}
    order = {pid: i for i, pid in enumerate(ranked)}
    rows = resources.store.run("apr_passage_fact_runs", ids=list(ranked))
    rows.sort(key=lambda row: order[row["passage_id"]])
    return list(dict.fromkeys(row["run_id"] for row in rows)), hits


def passage_ranking(fine_ranked: Sequence["Ranked"], proprag: dict[str, float] | None) -> dict[str, float]:
    """Mode apr's passages, best first, with their scores. With the facts channel from
    PropRAG (``proprag``: its passages best first, with their scores) they are PropRAG's: the
    passages the facts channel starts from, in PropRAG's order, while the coarse-to-fine
    score picks and orders the runs the prompt carries. Otherwise (the run index's facts
    channel, the paper's) the passages of the fact runs by their best run's fine score
    (spec §3). PropRAG's order is the default because it ranked best on MuSiQue (figures:
    docs/benchmarks-history.md)."""
    if proprag is not None:
        return dict(proprag)
    fine: dict[str, float] = {}
    for r in fine_ranked:
        for pid in r.row.passage_ids:
            fine.setdefault(pid, r.fine)
    return fine


def _rank(store, view: CodebookView, q: EncodedQuestion, settings,
          own: Container[str] | None = None, facts: Sequence[str] | None = None) -> dict[str, list[Ranked]]:
    """Per channel, the candidate runs ranked by fine score: the ``coarse_candidates``
    nearest runs of each run index (``facts``: the facts channel's candidates given instead,
    :func:`fact_candidates`), the ``coarse_top_k`` best by coarse score, re-ranked by the
    fine score (spec §3). ``own``: a session follow-up's runs (setting
    ``apr.session_memory = "session"``): the questions and answers channels keep only
    those, dropped before their rows are read and scored."""
    memory = vector_search(store, "Run", q.whole, settings.coarse_candidates, prop="memory_embedding")
    fact_hits = vector_search(store, "Run", q.whole, settings.coarse_candidates) if facts is None \
        else [(run_id, 0.0) for run_id in facts]
    hits = fact_hits + [hit for hit in memory if own is None or hit[0] in own]
    rows = view.runs([h[0] for h in hits])
    entity_rows = view.entities([e for r in rows.values() for e in r.entity_ids])
    relation_rows = view.relations([e for r in rows.values() for e in r.relation_ids])
    by_channel: dict[str, list[Ranked]] = {c: [] for c in CHANNELS}
    for run_id, _ in hits:
        row = rows.get(run_id)
        if row is None or row.channel not in _CHANNEL_OF:
            continue
        score = coarse_score(q.entities, q.relations, view.matrix(entity_rows, row.entity_ids),
                             view.matrix(relation_rows, row.relation_ids), settings.coarse_entity_weight,
                             settings.coarse_relation_weight)
        by_channel[_CHANNEL_OF[row.channel]].append(Ranked(row, score))
    for ranked in by_channel.values():
        ranked.sort(key=lambda r: -r.coarse)
        del ranked[settings.coarse_top_k:]
        _fine(view, ranked, q.lines, q.whole, settings)
        ranked.sort(key=lambda r: -r.fine)
    return by_channel


def _select(by_channel: dict[str, list[Ranked]], actions: dict[str, str], settings,
            seen: Container[str] = ()) -> list[tuple[str, Ranked]]:
    """The runs kept, then each channel's action, as ``(channel, run)`` in channel and rank
    order: the top ``top_m`` across facts and questions and the answer quota (spec §3),
    and beyond them every run of ``seen`` (the run ids the session saw: referenced by
    code, not re-sent, so a reference costs a code)."""
    pooled = sorted(by_channel["facts"] + by_channel["questions"], key=lambda r: -r.fine)[:settings.top_m]
    answers = by_channel["answers"][:answer_quota(len(by_channel["answers"]), settings.top_m, settings.answer_share)]
    quota = {r.row.run_id for r in pooled + answers}
    kept = {c: [r for r in runs if r.row.run_id in quota or r.row.run_id in seen] for c, runs in by_channel.items()}
    selected: list[tuple[str, Ranked]] = []
    for channel in CHANNELS:
        runs = kept[channel]
        picks = select(actions[channel], np.stack([r.row.vec for r in runs]) if runs else np.zeros((0, 1)),
                       settings.unique_cos)
        selected += [(channel, runs[i]) for i in picks]
    return selected


def _fine(view: CodebookView, ranked: list[Ranked], query_lines: np.ndarray, whole: np.ndarray, params) -> None:
    triples = view.triples([t for r in ranked for t in r.row.triple_ids])
    for r in ranked:
        lines = view.matrix(triples, r.row.triple_ids, "line_vec")
        if not len(lines):
            r.fine = 0.0
            continue
        r.fine = fine_score(query_lines @ lines.T, float(whole @ r.row.vec), params)


def retrieve(resources, question: str, session_id: str | None = None, actions: Mapping[str, str] | None = None,
             write_record: bool = False, answer_text: str | None = None,
             query_id: str | None = None) -> AprOutcome:
    """APR for one ``question`` of the tenant of ``resources`` (spec §3): retrieve runs from the
    facts, earlier questions and earlier answers, select per channel with ``actions``
    (``{"facts": "unique", "questions": "include_all", "answers": "not_include"}``; channels
    not named: section ``apr``'s default actions; ``actions`` None with a selector policy
    configured (``selector.policy_path``): the policy's choice for this question,
    :func:`pathweave.apr.policy.choose_actions`), and build the compact prompt.

    ``session_id``: runs the session already saw are referenced by code, not re-sent.
    Returns an :class:`AprOutcome`: ``context.prompt`` / ``context.prompt_tokens`` (tokens of
    the configured tokenizer, the cheapest of ``context.token_counts``), ``context.runs``
    and ``context.passage_ids`` / ``context.doc_ids`` — the passages (documents) the context
    covers (runs sent or referenced), for context recall of gold passages:
    ``len(gold & set(context.doc_ids)) / len(gold)`` (MuSiQue gold = document ids).

    ``write_record``: persist the query (``(:Query {session_id})``), its question run
    (``ASKED``), the runs it ``SENT`` and ``REUSED`` and its answer run (``answer_text`` when
    an LLM answered, else the selected evidence) — the memory later questions retrieve.
    Without it nothing is written (a session then sees nothing of this query) until the
    caller calls ``outcome.record(answer_text)`` (e.g. after an LLM answered).

    Raises ValueError on an empty question, a bad session id or a bad channel/action.
    """
    question = question.strip()
    if not question:
        raise ValueError("question is empty")
    session_id = check_session_id(session_id)
    if resources.settings.apr.facts_source == "index":  # else PropRAG's search checks the embedder first
        resources.check_embedder(resources.store.graph_version())
    settings = resources.settings.apr
    chosen = check_actions({"facts": settings.facts_action, "questions": settings.questions_action,
                            "answers": settings.answers_action, **(actions or {})})
    store = resources.store
    view = CodebookView(store, resources.topology().nodes, store.dimensions)
    query_id = query_id or uuid.uuid4().hex

    q = _encode_question(resources, question)
    if actions is None and resources.settings.selector.policy_path is not None:  # the DPO selector (spec §3)
        from pathweave.apr.policy import choose_actions

        chosen = choose_actions(resources.settings, q.vector, resources.token_counter().count(question))
    # what the session saw, and every triple given already (in the session or above in this
    # prompt), is referenced by run code, not re-sent; a follow-up's memory is the session's
    seen = seen_runs(store, session_id)
    facts, proprag = fact_candidates(resources, question, settings.facts_passages) \
        if settings.facts_source == "proprag" else (None, None)
    by_channel = _rank(store, view, q, settings, seen if seen and settings.session_memory == "session" else None,
                       facts)
    selected = _select(by_channel, chosen, settings, seen)
    given = {t for row in view.runs(list(seen)).values() for t in row.triple_ids}
    triple_rows = view.triples([t for _, r in selected for t in r.row.triple_ids])
    prompt_runs, reused_codes, out_runs = [], [], []
    for channel, r in selected:
        new = [t for t in dict.fromkeys(r.row.triple_ids) if t in triple_rows and t not in given]
        reused = r.row.run_id in seen or not new
        given.update(new)
        words = [triple_rows[t].words for t in r.row.triple_ids if t in triple_rows]
        if reused:
            reused_codes.append(r.row.code)
        else:
            prompt_runs.append(PromptRun(r.row.code if r.row.code is not None else -1, channel,
                                         [triple_rows[t].words for t in new]))
        out_runs.append(AprRun(run_id=r.row.run_id, code=r.row.code, channel=channel, score=round(r.fine, 6),
                               reused=reused, lines=[line(w) for w in words], passage_ids=list(r.row.passage_ids)))
    counter = resources.token_counter()
    prompt = compact_prompt(Payload(question, prompt_runs, [c for c in reused_codes if c is not None],
                                    legend=not seen), counter)
    passage_scores = passage_ranking(by_channel["facts"],
                                     None if proprag is None else {hit.passage_id: hit.score for hit in proprag})
    covered = list(dict.fromkeys(p for run in out_runs for p in run.passage_ids))
    docs = resources.reader(resources.topology()).passages(covered)
    context = AprContext(
        session_id=session_id, rendering=prompt.rendering, prompt=prompt.text, prompt_tokens=prompt.tokens,
        token_counts=prompt.token_counts, tokenizer=counter.name, actions=chosen,
        question_triples=[list(r.words) for r in q.refs], runs=out_runs, passage_ids=covered,
        doc_ids=list(dict.fromkeys(docs[p][1] for p in covered if p in docs and docs[p][1])))
    facts = [r.row for channel, r in selected if channel == "facts"]

    def write(answer: str | None) -> None:
        _write(resources, query_id, question, session_id, q, out_runs, facts, triple_rows, answer)

    outcome = AprOutcome(query_id, context, passage_scores, q.vector, write, passages=proprag)
    if write_record:
        outcome.record(answer_text)
    return outcome


def _write(resources, query_id: str, question: str, session_id: str | None, q: "EncodedQuestion",
           runs: list[AprRun], facts: list[RunRow], triple_rows: dict, answer_text: str | None) -> None:
    """One transaction: the query node and session link, the question run (ASKED), the SENT
    and REUSED links, and the answer run (AS_RUN) — with their codes."""
    store, tenant, refs = resources.store, resources.store.tenant, q.refs
    asked = memory_run(tenant, "question", refs, q.lines, q.whole, q.symbol_vecs, q.names)
    steps = query_steps(store, query_id, question, session_id) + asked.steps
    answer = _answer_run(resources, refs, facts, triple_rows, answer_text)
    runs_written = [asked.run_id] + ([answer.run_id] if answer else [])
    steps += link_steps(query_id, [asked.run_id],
                        [{"run_id": r.run_id, "rank": i, "channel": r.channel} for i, r in enumerate(runs) if not r.reused],
                        [{"run_id": r.run_id, "rank": i, "channel": r.channel} for i, r in enumerate(runs) if r.reused])
    if answer is not None:
        steps += answer.steps + [("apr_write_answer_run", {"query_id": query_id, "run_id": answer.run_id,
                                                           "text": answer_text or ""})]
    steps += code_steps(tenant, {
        "entity": [e for r in refs for e in (r.subject_id, r.object_id)] + _answer_symbols(answer),
        "relation": [r.relation_id for r in refs] + _answer_symbols(answer, "relation"),
        "triple": [r.triple_id for r in refs] + _answer_symbols(answer, "triple"), "run": runs_written})
    store.run_in_transaction(steps)


def _answer_symbols(answer, kind: str = "entity") -> list[str]:
    """Ids of ``kind`` (entity | relation | triple) an answer run's writes carry."""
    if answer is None:
        return []
    key = {"entity": ("upsert_entities", "entity_id"), "relation": ("upsert_relations", "relation_id"),
           "triple": ("apr_upsert_memory_triples", "triple_id")}[kind]
    return [row[key[1]] for name, params in answer.steps if name == key[0] for row in params["rows"]]


def _answer_run(resources, refs: Sequence[TripleRef], facts: list[RunRow], triple_rows: dict,
                answer_text: str | None):
    """The answer run: the LLM answer's triples (``answer_text``; one ``(entity, "answer",
    text)`` triple when the extractor finds none), else the selected evidence — the first
    :data:`EVIDENCE_LINES` triples of the selected fact runs, in rank order."""
    tenant, embedder = resources.store.tenant, resources.embedder
    passages = list(dict.fromkeys(p for r in facts for p in r.passage_ids))
    if answer_text:
        parse = getattr(resources, "question_parser", None)
        found = parse(answer_text)[0] if parse is not None else []
        head = refs[0].words[0] if refs else "question"
        words = [t for t in found if all(p.strip() for p in t)] or [(head, "answer", answer_text)]
        answer_refs = [r for r in (triple_ref(tenant, *w) for w in words) if r is not None]
    else:
        ids = list(dict.fromkeys(t for r in facts for t in r.triple_ids if t in triple_rows))[:EVIDENCE_LINES]
        answer_refs = [TripleRef(t.triple_id, t.words, t.subject_id, t.relation_id, t.object_id)
                       for t in (triple_rows[i] for i in ids)]
    answer_refs = list(dict.fromkeys(answer_refs))
    if not answer_refs:
        return None
    text = run_text([r.words for r in answer_refs])
    if not answer_text:  # evidence: its triples and symbols are stored, line vectors read already
        lines = np.stack([triple_rows[r.triple_id].line_vec for r in answer_refs])
        return memory_run(tenant, "answer", answer_refs, lines, embedder.encode([text])[0], {}, {}, passages)
    names = {r.subject_id: r.words[0] for r in answer_refs} | {r.object_id: r.words[2] for r in answer_refs} \
        | {r.relation_id: r.words[1] for r in answer_refs}
    ids = list(names)
    vectors = embedder.encode([line(r.words) for r in answer_refs] + [text] + [names[i] for i in ids])
    n = len(answer_refs)
    return memory_run(tenant, "answer", answer_refs, vectors[:n], vectors[n], dict(zip(ids, vectors[n + 1:])),
                      names, passages)



class APRMode(RetrievalMode):
    """Retrieval mode ``apr`` (spec §3): the top ``k`` passages (:func:`passage_ranking`:
    PropRAG's, which the facts channel starts from; with the run index's facts channel, those
    of the fact runs by their best run's fine score) and the compact prompt as ``result.apr``. The reasoning
    record adds the query's runs and session links (written before returning, so the
    session's next query sees them). Its answer reads the compact prompt, and becomes the
    query's answer run; the cited passages are those the prompt's runs stand for. A token
    budget does not apply (the prompt is the compact one); a session does."""

    name = "apr"

    def search(self, resources, request, access: Access = UNRESTRICTED) -> Retrieval:
        import time

        from pathweave.model import QueryResult

        if access.restricted:  # its codebook, runs and session memory are the tenant's, unfiltered
            raise NotApplicable("mode apr answers unrestricted callers only (its codebook and runs are shared by "
                                "the whole tenant); a caller with principals uses proprag, dense, hipporag2 or "
                                "prunerag")

        started = time.perf_counter()
        outcome = retrieve(resources, request.question, request.session_id)
        topology = resources.topology()
        ranked = list(outcome.passage_scores.items())[:request.k]
        result = QueryResult(query_id=outcome.query_id, question=request.question, mode="apr", passages=[],
                             graph_version=topology.version, apr=outcome.context)
        if outcome.passages is not None:  # PropRAG's hits, read by the facts channel's search
            result.passages = outcome.passages[:request.k]
        else:
            result.passages = resources.passage_hits(resources.reader(topology), [p for p, _ in ranked],
                                                     [s for _, s in ranked])
        result.timings_ms = {"total": round((time.perf_counter() - started) * 1000, 2)}
        return Retrieval(result, None, outcome.query, outcome)

    def answer(self, resources, retrieval: Retrieval, client) -> None:
        from pathweave.answering import generate_answer
        from pathweave.model import PassageHit

        result = retrieval.result
        prompt = PassageHit(passage_id="kb", title="knowledge base (JSON)", text=result.apr.prompt, score=1.0, rank=1)
        answer = generate_answer(client, result.model_copy(update={"context": None, "passages": [prompt]}))
        answer.source, answer.passage_ids = "context", list(result.apr.passage_ids) if answer.text else []
        result.answer = answer

    def write_record(self, resources, retrieval: Retrieval) -> None:
        """The query's APR record first (its runs and session links, and the answer run from
        the LLM's answer, else from the selected evidence; spec §3), then its reasoning
        record (SELECTED passages, like every mode's)."""
        answer = retrieval.result.answer
        retrieval.state.record(answer.text or None if answer is not None else None)
        resources.submit_record(retrieval.result)
