"""The query entry point: :class:`Retriever` checks a request, hands it to its mode's
strategy (:mod:`pathweave.query.modes`) with the query resources
(:mod:`pathweave.retrieval.resources`), runs the answer step when asked and writes the
reasoning record back to the graph (by default).

Per proprag query the store answers: the vector searches (run concurrently; the first
reads the graph version, and after a change the topology reads the change records:
:mod:`pathweave.graph.topology`), the texts and embeddings of G_sub's propositions and passages
not in the tenant's node cache, the names and embeddings of the few entities the paths and
seeds need, the texts of the returned passages, and the record write.
"""

from __future__ import annotations

import time

from pathweave.access import UNRESTRICTED, Access
from pathweave.model import Mode, QueryResult
from pathweave.records.citations import cite_result
from pathweave.records.reasoning import read_reasoning_record
from pathweave.query.modes import strategy as mode_strategy
from pathweave.retrieval.request import QueryRequest
from pathweave.retrieval.resources import QueryResources
from pathweave.retrieval.strategy import Retrieval, RetrievalMode
from pathweave.settings import Settings
from pathweave.telemetry import TRACER, current_trace_id, in_span, traced
from pathweave.store.graph_store import GraphStore
from pathweave.graph.topology import TopologyCache


class Retriever:
    """Answers queries for one store/tenant: holds the
    :class:`~pathweave.retrieval.resources.QueryResources` it hands to the modes
    (``resources``; the arguments are theirs) and dispatches a request to its mode.
    Thread-safe."""

    __slots__ = ("resources",)  # what a mode uses is set on the resources, never on the retriever

    def __init__(self, store: GraphStore, embedder, settings: Settings, cache: TopologyCache | None = None,
                 llm=None, question_parser=None) -> None:
        self.resources = QueryResources(store, embedder, settings, cache, llm, question_parser)

    @property
    def store(self) -> GraphStore:
        """The store, scoped to the tenant this retriever answers for."""
        return self.resources.store

    @property
    def settings(self) -> Settings:
        """The settings this retriever answers with."""
        return self.resources.settings

    @property
    def embedder(self):
        """The query embedder (``encode``: texts -> ``(n, d) float32``)."""
        return self.resources.embedder

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until the reasoning records of earlier queries are in the store, at most
        ``timeout_s`` seconds (None: unbounded). Raises
        :class:`~pathweave.records.reasoning.RecordsBehind` when they are not."""
        self.resources.records.flush(timeout_s)

    def read_record(self, query_id: str, access: Access = UNRESTRICTED) -> dict:
        """A reasoning record of this tenant, after the pending writes (see
        :func:`~pathweave.records.reasoning.read_reasoning_record`; KeyError when unknown, or
        when ``access`` does not read what its query's caller read)."""
        self.flush()
        return read_reasoning_record(self.store, query_id, access)

    def warm_up(self, queries: int = 50) -> float:
        """Run ``queries`` un-recorded queries built from the tenant's passage titles ("What is
        known about <title>?"), PropRAG and dense alike, and return the seconds taken.

        The first forward passes of each new input shape are slow on CPU, and the store's
        vector indexes answer their first searches slowly (up to ~1 s): services call this
        once before they take traffic, benchmarks before they time.
        """
        started = time.perf_counter()
        titles = [row["title"] for row in self.store.run("passage_titles", limit=queries)]
        for i, title in enumerate(titles):
            self.query(f"What is known about {title}?", mode="dense" if i % 5 == 4 else "proprag", write_record=False)
        return time.perf_counter() - started

    def query(self, question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, *,
              access: Access = UNRESTRICTED, **options) -> QueryResult:
        """The :class:`~pathweave.model.QueryResult` of :meth:`search`."""
        return self.search(question, mode, k, access=access, **options).result

    def search(self, question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, *,
               access: Access = UNRESTRICTED, on_step=None, **options) -> Retrieval:
        """Run one query: a :class:`~pathweave.retrieval.request.QueryRequest`, or a question
        with the request's options as keywords (``token_budget``, ``selection_method``,
        ``context_style``, ``session_id``, ``answer``, ``write_record``).

        The mode's strategy (:func:`pathweave.query.modes.strategy`) retrieves; with
        ``answer`` the mode's answer step follows (one LLM call; PruneRAG answers through its
        tree anyway); then the reasoning record is written unless ``write_record`` is False
        (default: setting ``query.write_reasoning``). The result comes back cited: every
        passage and context line carries its reference. Returns the result with the subgraph
        and ``(d,)`` query vector it used. ``access``: what the caller may read
        (:mod:`pathweave.access`); every mode retrieves, answers and records from that only
        (mode apr refuses a restricted caller). ``on_step``: hears of the steps of a mode that
        has them as they are taken (PruneRAG's tree nodes,
        :data:`~pathweave.retrieval.prunerag.OnStep`); what it raises ends the query. Raises
        :class:`~pathweave.errors.BadRequest` / :class:`~pathweave.errors.NotApplicable` on a
        bad request (nothing read or written) and :class:`~pathweave.errors.LLMUnavailable`
        when a mode or the answer needs an LLM and none can be had.
        """
        request = question.check() if isinstance(question, QueryRequest) else \
            QueryRequest.of(question, mode=mode, k=k, **options)
        with self._span(request, access) as span:
            retrieval = self._search(request, access, on_step)
            retrieval.result.trace_id = retrieval.result.trace_id or current_trace_id()
            if span.is_recording():
                span.set_attribute("pathweave.query_id", retrieval.result.query_id)
            return retrieval

    def stream(self, question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, *,
               access: Access = UNRESTRICTED, on_step=None, **options) -> "StreamedQuery":
        """Run one query as :meth:`search` does, but leave its answer to be streamed: the
        retrieval (cited, unanswered, its record not yet written) and, when the request asks
        for an answer, an :class:`~pathweave.answering.AnswerStream` (prose with ``[n]``
        citations) to iterate, in any thread; then :meth:`StreamedQuery.finish` puts the
        answer into the result, writes the record and ends the query's span (the generation's
        spans are its children). PruneRAG answers through its tree, whole: its query runs as
        :meth:`search` runs it (``on_step`` hears of the tree's nodes as they are settled) and
        has no stream, and so does APR (it answers from its compact prompt). Raises as
        :meth:`search` does."""
        from pathweave.answering import AnswerStream

        request = question.check() if isinstance(question, QueryRequest) else \
            QueryRequest.of(question, mode=mode, k=k, **options)
        strategy = mode_strategy(request.mode)
        if strategy.answers_itself or not request.answer or type(strategy).answer is not RetrievalMode.answer:
            # PruneRAG's tree and APR's compact prompt answer their own way: whole
            return StreamedQuery(self, self.search(request, access=access, on_step=on_step), None, False)
        client = self.resources.llm_client()  # LLMUnavailable before anything is retrieved
        span = self._span(request, access, streamed=True, current=False)  # ends in finish()
        try:
            with in_span(span):
                retrieval = strategy.search(self.resources, request, False, access)
                cite_result(self.store, retrieval.result, access)
                retrieval.result.trace_id = current_trace_id()
                answer = AnswerStream(client, retrieval.result)
        except BaseException:
            span.end()  # the failure is recorded on it already (by in_span)
            raise
        return StreamedQuery(self, retrieval, answer, request.record(self.settings.query.write_reasoning), span)

    def _span(self, request: QueryRequest, access: Access, streamed: bool = False, current: bool = True):
        """The query's span ``pathweave.query`` (tenant, mode, k, restricted): made current for
        a ``with`` block, or (``current`` False) started only, for its owner to end."""
        attributes = {"pathweave.tenant": self.store.tenant, "pathweave.mode": request.mode, "pathweave.k": request.k,
                      "pathweave.restricted": access.restricted, "pathweave.streamed": streamed}
        if current:
            return TRACER.start_as_current_span("pathweave.query", attributes=attributes)
        return TRACER.start_span("pathweave.query", attributes=attributes)

    def _search(self, request: QueryRequest, access: Access, on_step=None) -> Retrieval:
        strategy = mode_strategy(request.mode)
        steps = {"on_step": on_step} if on_step is not None and strategy.has_steps else {}
        record = request.record(self.settings.query.write_reasoning)
        if request.answer or strategy.needs_llm:
            self.resources.llm_client()  # LLMUnavailable before anything is retrieved
        if strategy.answers_itself or not request.answer:
            retrieval = strategy.search(self.resources, request, record, access, **steps)
        else:
            retrieval = strategy.search(self.resources, request, False, access)
            with traced("answer", **{"pathweave.stage": "answer"}):
                strategy.answer(self.resources, retrieval, self.resources.llm_client())
            timings = retrieval.result.timings_ms
            timings["answer"] = retrieval.result.answer.latency_ms
            timings["total"] = round(timings.get("total", 0.0) + timings["answer"], 2)
            if record:
                strategy.write_record(self.resources, retrieval)
        cite_result(self.store, retrieval.result, access)  # passages left uncited, a budgeted context's lines
        return retrieval


class StreamedQuery:
    """A query whose answer is streamed (:meth:`Retriever.stream`): ``retrieval`` (its result
    cited, not yet answered), ``answer`` (an :class:`~pathweave.answering.AnswerStream`, or
    None when there is nothing to stream) and whether its record is to be written."""

    def __init__(self, retriever: Retriever, retrieval: Retrieval, answer, record: bool, span=None) -> None:
        self.retriever, self.retrieval, self.answer, self.record = retriever, retrieval, answer, record
        self._span = span  # the query's span, open while its answer streams
        self._finished = False

    def finish(self) -> QueryResult:
        """After the stream: the answer (and its milliseconds, ``timings_ms["answer"]``) in
        the result, the record written when asked, the query's span ended; once (a second
        call returns the result). Returns the result."""
        result = self.retrieval.result
        if self._finished:
            return result
        self._finished = True
        with in_span(self._span, end=True):
            self._finish(result)
        return result

    def _finish(self, result: QueryResult) -> None:
        if self.answer is not None:
            result.answer = self.answer.answer
            if result.answer is not None:
                result.timings_ms["answer"] = result.answer.latency_ms
                result.timings_ms["total"] = round(result.timings_ms.get("total", 0.0) + result.answer.latency_ms, 2)
            if self.record:
                mode_strategy(result.mode).write_record(self.retriever.resources, self.retrieval)
