"""The errors a query (or a batch) ends with, one small hierarchy shared by the core, the CLI
and the API, so that the same request fails the same way everywhere.

- :class:`BadRequest` (a ``ValueError``): the request itself is wrong (empty question,
  ``k`` < 1, unknown mode); the API answers 422, the CLI exits 2.
- :class:`NotApplicable` (a :class:`BadRequest`): an option that the chosen mode does not
  use (a token budget with mode ``apr``, a session id with mode ``dense``), never dropped
  silently; the table of what applies is :data:`pathweave.model.MODE_OPTIONS`.
- :class:`StoreUnavailable`: the store could not be reached or asked to retry (API 503
  with ``Retry-After``; a worker retries the batch).
- :class:`LLMUnavailable`: no LLM could be had for a mode or an answer that needs one
  (API 503 ``llm-unavailable``).
"""

from __future__ import annotations


class PathweaveError(Exception):
    """Base of Pathweave's typed errors. ``transient``: worth retrying later, nothing lost
    (what :func:`is_transient` answers for it)."""

    transient: bool = False


class BadRequest(PathweaveError, ValueError):
    """The request is invalid; nothing was read or written."""


class NotApplicable(BadRequest):
    """An option was given that the request's mode does not use."""


class StoreUnavailable(PathweaveError, RuntimeError):
    """The store could not be reached or asked to retry: retry later, nothing is lost."""

    transient = True


class LLMUnavailable(PathweaveError, RuntimeError):
    """No LLM client could be had (the extra not installed, the server not starting, the
    managed server exited). ``retry_after_s``: when to ask again (s; the API's Retry-After)."""

    retry_after_s: int = 30


def _raised_in_driver(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside the neo4j driver's own code (its innermost Python
    frame is in the ``neo4j`` package)."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        last, tb = tb, tb.tb_next
    return last is not None and "/neo4j/" in last.tb_frame.f_code.co_filename.replace("\\", "/")


def is_transient(exc: BaseException) -> bool:
    """Is ``exc`` worth retrying later: a connection problem, a server (re)starting, a
    transaction conflict, a driver closed under a request because the connection was dropped
    to reconnect (:meth:`pathweave.runtime.QueryRuntime.lost`; the driver's I/O then also
    fails inside itself with an ``AttributeError`` or ``BufferError`` on the connection it
    tore down), credentials a restarted managed store no longer accepts (it generated new
    ones: reconnecting reads them)? A Pathweave error says it itself (``transient``: a
    :class:`StoreUnavailable`, a managed server's error, a write conflict)."""
    import httpx
    from neo4j.exceptions import AuthError, DriverError, ServiceUnavailable, SessionExpired, TransientError

    if isinstance(exc, PathweaveError):
        return exc.transient
    if isinstance(exc, (ServiceUnavailable, SessionExpired, TransientError, AuthError, ConnectionError, TimeoutError,
                        httpx.TransportError)):
        return True
    text = str(exc).lower()
    if isinstance(exc, DriverError) and "closed" in text:
        return True
    if isinstance(exc, (AttributeError, BufferError)) and _raised_in_driver(exc):
        return True
    return any(s in text for s in ("connection refused", "connection reset", "broken pipe", "defunct connection",
                                   "concurrentmodification"))
