"""A query streamed as Server-Sent Events: the query runs in a thread of its own and hands
each of its events (:mod:`pathweave.query.events`) to the event loop as it comes, so no
pool thread waits the seconds a token or a PruneRAG node may take.

A client that disconnects, or stops reading for ``api.stream_send_timeout_s``, stops the
query at its next event (:class:`ClientLeft` raised into it: a streamed answer is closed, its
generation stops, and the record keeps what was answered); the response ends once the query
has (at most :data:`END_WAIT_S`), so its record is written before the request is done."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading
from collections.abc import Callable

from pathweave_api.problems import ApiProblem, unexpected

END_WAIT_S = 30.0
"""Seconds a stream's end waits for its query to stop after the client left (the query
notices at its next event)."""

TRACE_HEADER = "X-Pathweave-Trace-Id"
"""The response header naming the query's OpenTelemetry trace, when the service traces."""


class ClientLeft(Exception):
    """Raised into a query whose streamed events nobody reads any more: its work stops."""


class Feed:
    """What the query's thread produces, handed to the event loop as it comes. ``left``: set
    once the reader is gone; ``ended``: set (on the loop) once the producer returned."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._items: asyncio.Queue = asyncio.Queue()
        self.left = threading.Event()
        self.ended = asyncio.Event()

    def put(self, item) -> None:
        """Hand ``item`` to the reader (from any thread)."""
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the loop is closed: the service is stopping, nobody reads
            self.left.set()

    def start(self, produce: Callable[[], None], name: str) -> None:
        """Run ``produce()`` in a new thread, in the caller's context (its trace)."""
        def run() -> None:
            try:
                produce()
            finally:
                try:
                    self._loop.call_soon_threadsafe(self.ended.set)
                except RuntimeError:  # the loop is closed: nobody waits
                    pass
        threading.Thread(target=contextvars.copy_context().run, args=(run,), name=name, daemon=True).start()

    async def get(self):
        """The next item; a reader cancelled meanwhile (the client left) sets ``left``."""
        try:
            return await self._items.get()
        except BaseException:
            self.left.set()
            raise


async def event_stream(svc, run: Callable[[Callable], object], to_sse: Callable[[object], dict], what: str):
    """The ``EventSourceResponse`` of the query ``run(on_event)``: each event as ``to_sse``
    makes it. An error before the first event is raised (the route answers it as a problem
    document); one after it is an ``error`` event (a problem document, :func:`unexpected`
    naming ``what``) that ends the stream."""
    import anyio
    from sse_starlette.sse import EventSourceResponse

    from pathweave.telemetry import current_trace_id

    feed = Feed()

    def on_event(event) -> None:
        if feed.left.is_set():
            raise ClientLeft()
        feed.put(("event", event))

    def produce() -> None:
        try:
            run(on_event)
            feed.put(("done", None))
        except BaseException as exc:  # noqa: BLE001 - handed to the request (or dropped: the client left)
            feed.put(("failed", exc))

    def problem_event(exc: BaseException) -> dict:
        problem = exc if isinstance(exc, ApiProblem) else unexpected(exc, svc, what)
        return {"event": "error", "data": json.dumps({"type": f"urn:pathweave:problem:{problem.kind}",
                                                      "status": problem.status, "detail": problem.detail})}

    feed.start(produce, "query-stream")  # the request's own work (not a background thread of the app)
    first = await feed.get()  # a client leaving before the first event stops the query
    if first[0] == "failed":
        raise first[1]

    async def events():
        kind, item = first
        try:
            while kind == "event":
                yield to_sse(item)
                kind, item = await feed.get()  # a client leaving cancels the wait at once
            if kind == "failed" and not isinstance(item, ClientLeft):
                yield problem_event(item)
        finally:  # the client left (or the stream ended): the query stops at its next event, and has ended
            feed.left.set()
            with anyio.CancelScope(shield=True), anyio.move_on_after(END_WAIT_S):  # no pool thread waits
                await feed.ended.wait()

    # the query's trace: the retrieval's, else the request's (an instrumented service), which the query's joins
    trace_id = getattr(first[1].result, "trace_id", None) if first[0] == "event" else None
    trace_id = trace_id or current_trace_id()
    return EventSourceResponse(events(), headers={TRACE_HEADER: trace_id} if trace_id else None,
                               send_timeout=svc.api.stream_send_timeout_s)
