"""The one retry policy of every store transaction: what an error says of the transaction it
ended, and whether running the transaction again is safe.

An error ends a transaction in one of three ways:

- **rolled back** (:func:`rolled_back`): the store says the transaction did not commit: an
  ArcadeDB write conflict (another writer's commit changed a record this one wrote, or took
  the key its MERGE created: :class:`WriteConflict`, ``ConcurrentModificationException``,
  "duplicated key"), or a retryable Neo4j error the driver let through behind a
  ``ResultFailedError``, or any retryable error of an auto-commit transaction
  (:func:`transient`, which the driver does not retry). Running the transaction again is
  safe for any statement.
- **ambiguous** (:func:`ambiguous`): ArcadeDB over Bolt reports a commit that failed as
  "Transaction error on commit", whether the cause was a duplicate key (rolled back) or I/O
  (the outcome unknown). It is run again too: every statement is safe to run again after a
  commit that took effect, which is the rule of ``cypher/`` (MERGE on stable ids, SET of
  values, compare-and-set; a statement that counts says under ``// replay:`` how its own
  committed outcome is recognized, e.g. a document head locked by this very transaction,
  ``doc_lock``'s ``replayed``).
- anything else: raised at once (the caller classifies it: :func:`pathweave.errors.is_transient`).

Neo4j's own managed transactions already retry what its server reports as transient
(deadlocks, lock timeouts, leader switches); this policy adds what they do not see.
A database replaced by an earlier state (a restore) is behind the process's bookmarks:
``moved_back`` forgets them and the transaction runs again (:class:`~pathweave.store.graph_store.GraphStore`).

Waits: random, growing with the attempt (10-50 ms times the attempt's number), at most
:data:`CONFLICT_RETRIES` runs again.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random

from pathweave.errors import PathweaveError

CONFLICT_RETRIES = 8
"""How often a transaction runs again after an error :func:`again` allows."""

ROLLED_BACK_SIGNS = ("concurrentmodification", "duplicated key", "concurrent change")
"""Lower-case text of ArcadeDB's errors for a transaction rolled back by another writer's commit."""

AMBIGUOUS_SIGN = "transaction error on commit"
"""Lower-case text of ArcadeDB's error for a commit that failed, rolled back or not."""


class WriteConflict(PathweaveError, RuntimeError):
    """Raised by a transaction's own work when a record it wrote earlier in the same
    transaction is not found again: on ArcadeDB, a concurrent transaction committed the node
    this one's MERGE created (both made it), and the index lookup no longer sees this one's
    copy. The transaction is run again; its MERGE then matches the committed node."""

    transient = True


def server_error(exc: BaseException) -> BaseException:
    """The server's error behind what the driver raised in its place: a transaction whose
    close, exhausting a result that failed, raised a :class:`neo4j.exceptions.ResultFailedError`
    from the server's error (neo4j 6.x, when another thread took the released connection
    first); ``exc`` itself otherwise."""
    from neo4j.exceptions import ResultFailedError

    seen = 0
    while isinstance(exc, ResultFailedError) and exc.__cause__ is not None and seen < 8:
        exc, seen = exc.__cause__, seen + 1
    return exc


def transient(exc: BaseException) -> bool:
    """Whether the server's error behind ``exc`` is a retryable Neo4j error (a deadlock, a lock
    timeout, ArcadeDB's "modified by a concurrent transaction between its read and its
    update"): the transaction, reading or writing, did not commit. The driver retries these
    in managed transactions only, so an auto-commit transaction's caller retries them
    (:meth:`~pathweave.store.graph_store.GraphStore.run`)."""
    from neo4j.exceptions import Neo4jError

    error = server_error(exc)
    return isinstance(error, Neo4jError) and error.is_retryable()


def masked_transient(exc: BaseException) -> bool:
    """Whether ``exc`` is a :func:`transient` error that the driver let through unretried
    behind a ``ResultFailedError`` (a managed transaction's)."""
    return server_error(exc) is not exc and transient(exc)


def rolled_back(exc: BaseException) -> bool:
    """Whether ``exc`` says its transaction did not commit and may run again whatever it
    ran: a write conflict of ArcadeDB's optimistic transactions, or :func:`masked_transient`."""
    error = server_error(exc)
    if isinstance(error, WriteConflict) or masked_transient(exc):
        return True
    return any(sign in str(error).lower() for sign in ROLLED_BACK_SIGNS)


def ambiguous(exc: BaseException) -> bool:
    """Whether ``exc`` is a commit that failed without saying whether it took effect."""
    return AMBIGUOUS_SIGN in str(server_error(exc)).lower()


def again(exc: BaseException) -> bool:
    """Whether a transaction ended by ``exc`` runs again: it was rolled back, or its commit's
    outcome is unknown (every statement may run again after its own commit)."""
    return rolled_back(exc) or ambiguous(exc)


def retrying(runs_again: Callable[[BaseException], bool],
             moved_back: Callable[[BaseException], bool] = lambda exc: False) -> Retrying:
    """The policy's tries, for ``for attempt in retrying(...): with attempt: ...``: again while
    an error says so (``runs_again(exc)``, e.g. :func:`again`; ``moved_back(exc)``: the store is
    behind the process's bookmarks, which it forgot), at most :data:`CONFLICT_RETRIES` times,
    after a random wait growing with the try's number; the last try's error is raised (the
    caller raises the server's error behind it, :func:`server_error`)."""
    return Retrying(stop=stop_after_attempt(CONFLICT_RETRIES + 1),
                    wait=lambda state: wait_random(0.01, 0.05)(state) * state.attempt_number,
                    retry=retry_if_exception(lambda exc: moved_back(exc) or runs_again(exc)),
                    reraise=True)
