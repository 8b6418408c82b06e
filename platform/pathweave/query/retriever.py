"""The query entry point: :meth:`Retriever.run` is a query's whole life, for every mode and
for streaming alike. It checks a request, hands it to its mode's strategy
(:mod:`pathweave.query.modes`; strategies only retrieve) with the query resources
(:mod:`pathweave.retrieval.resources`), cites the result, runs the answer step when asked
and writes the reasoning record back to the graph (by default), telling its caller each
event as it happens (:mod:`pathweave.query.events`). The API, the CLI and the MCP tools
only turn those events into their own form.

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
from pathweave.query.events import OnEvent, QueryEvent
from pathweave.query.modes import needs_llm, strategy as mode_strategy
from pathweave.retrieval.request import QueryRequest
from pathweave.retrieval.resources import QueryResources
from pathweave.retrieval.strategy import Retrieval, RetrievalMode
from pathweave.settings import Settings
from pathweave.telemetry import TRACER, current_trace_id, traced
from pathweave.retrieval.stopwatch import Stopwatch
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
              access: Access = UNRESTRICTED, on_event: OnEvent | None = None, **options) -> QueryResult:
        """The :class:`~pathweave.model.QueryResult` of :meth:`run`, for a
        :class:`~pathweave.retrieval.request.QueryRequest` or a question with the request's
        options as keywords."""
        return self.run(request_of(question, mode, k, **options), access, on_event).result

    def search(self, question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, *,
               access: Access = UNRESTRICTED, **options) -> Retrieval:
        """:meth:`run` without events, for a request or a question with the request's options
        as keywords (``token_budget``, ``selection_method``, ``context_style``, ``session_id``,
        ``answer``, ``write_record``): the result with the subgraph and ``(d,)`` query vector
        it used."""
        return self.run(request_of(question, mode, k, **options), access)

    def run(self, request: QueryRequest, access: Access = UNRESTRICTED, on_event: OnEvent | None = None) -> Retrieval:
        """One query's whole life, for every mode (:mod:`pathweave.query.events`): the
        request checked; the LLM had when the mode or the answer needs one (before anything
        is retrieved); the mode's strategy retrieves (:func:`pathweave.query.modes.strategy`;
        a mode with steps hands each to ``on_event`` as it is settled); the result cited
        (every passage and context line carries its reference) and handed over as
        ``retrieval``; with ``answer`` the answer step (a mode that answers itself already
        did): with ``on_event`` written token by token where the mode answers with the
        default step (prose citing ``[n]``, :class:`~pathweave.answering.AnswerStream`),
        else one call; its milliseconds in ``timings_ms["answer"]``; then the reasoning
        record, unless ``write_record`` is False (default: setting
        ``query.write_reasoning``), also when ``on_event`` raised meanwhile (it keeps what was
        answered); ``answer`` last. All of it in the query's span ``pathweave.query``.

        ``access``: what the caller may read (:mod:`pathweave.access`); every mode retrieves,
        answers and records from that only (mode apr refuses a restricted caller). Returns
        the :class:`~pathweave.retrieval.strategy.Retrieval` (result, subgraph, ``(d,)``
        query vector). Raises :class:`~pathweave.errors.BadRequest` /
        :class:`~pathweave.errors.NotApplicable` on a bad request (nothing read or written),
        :class:`~pathweave.errors.LLMUnavailable` when an LLM is needed and none can be had,
        and what ``on_event`` raises."""
        request = request.check()
        strategy = mode_strategy(request.mode)
        client = self.resources.llm_client() if needs_llm(request) else None  # before anything is retrieved
        emit = _Listener(on_event)
        steps = {"on_step": lambda node, parent_id: emit(QueryEvent("step", node=node, parent_id=parent_id))} \
            if strategy.has_steps and on_event is not None else {}
        with self._span(request, access, streamed=on_event is not None) as span:
            retrieval = strategy.search(self.resources, request, access, **steps)
            result = retrieval.result
            cite_result(self.store, result, access)  # passages left uncited, a budgeted context's lines
            result.trace_id = result.trace_id or current_trace_id()
            if span.is_recording():
                span.set_attribute("pathweave.query_id", result.query_id)
            done = False
            try:
                if on_event is not None:
                    # a copy as it stands now (the answer and the timings are set on the result later)
                    emit(QueryEvent("retrieval", result=result.model_copy(
                        update={"answer": None, "timings_ms": dict(result.timings_ms)})))
                if request.answer and not strategy.answers_itself:
                    self._answer(strategy, retrieval, client, emit if on_event is not None else None)
                done = True
            finally:  # also when the listener stopped the query (it keeps what was answered); not on a failure
                if (done or emit.stopped) and request.record(self.settings.query.write_reasoning):
                    self._record(strategy, retrieval)
            emit(QueryEvent("answer", result=result))
            return retrieval

    def _answer(self, strategy: RetrievalMode, retrieval: Retrieval, client, on_event: OnEvent | None) -> None:
        """The answer step: streamed to ``on_event`` (closed when it raises) where the mode
        answers with the default step, else the mode's own (one call); its milliseconds added
        to the result's timings."""
        from pathweave.answering import AnswerStream

        result = retrieval.result
        if on_event is not None and type(strategy).answer is RetrievalMode.answer:
            stream = AnswerStream(client, result)
            pieces = iter(stream)
            try:
                for piece in pieces:
                    on_event(QueryEvent("token", text=piece))
            finally:  # the caller left (or the stream failed): the model stops, the answer keeps what was said
                stream.close()
                for _ in pieces:  # closed: it ends at once, and sets the answer it stopped at
                    pass
                result.answer = stream.answer
        else:
            with traced("answer", **{"pathweave.stage": "answer"}):
                strategy.answer(self.resources, retrieval, client)
        if result.answer is not None:
            _add_stage(result, "answer", result.answer.latency_ms)

    def _record(self, strategy: RetrievalMode, retrieval: Retrieval) -> None:
        """The mode's record step (:meth:`RetrievalMode.write_record`: written now or
        submitted, as its setting says), its milliseconds as ``timings_ms["record"]``."""
        clock = Stopwatch()
        strategy.write_record(self.resources, retrieval)
        clock("record")
        _add_stage(retrieval.result, "record", clock.timings["record"])

    def _span(self, request: QueryRequest, access: Access, streamed: bool = False):
        """The query's span ``pathweave.query`` (tenant, mode, k, restricted, streamed), made
        current for a ``with`` block."""
        attributes = {"pathweave.tenant": self.store.tenant, "pathweave.mode": request.mode, "pathweave.k": request.k,
                      "pathweave.restricted": access.restricted, "pathweave.streamed": streamed}
        return TRACER.start_as_current_span("pathweave.query", attributes=attributes)


def request_of(question: str | QueryRequest, mode: Mode = "proprag", k: int = 5, **options) -> QueryRequest:
    """``question`` when it is a request, else the request of the question, mode, ``k`` and
    options (unchecked: :meth:`Retriever.run` checks it)."""
    return question if isinstance(question, QueryRequest) else QueryRequest.of(question, mode=mode, k=k, **options)


def _add_stage(result: QueryResult, stage: str, ms: float) -> None:
    """``result``'s milliseconds of ``stage`` (a step after retrieval), counted in its total."""
    result.timings_ms[stage] = ms
    result.timings_ms["total"] = round(result.timings_ms.get("total", 0.0) + ms, 2)


class _Listener:
    """``on_event`` (None: nobody listens), remembering whether what it raised stopped the
    query (``stopped``: a client that left, an interrupted terminal)."""

    def __init__(self, on_event: OnEvent | None) -> None:
        self.on_event, self.stopped = on_event, False

    def __call__(self, event: QueryEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except BaseException:
            self.stopped = True
            raise
