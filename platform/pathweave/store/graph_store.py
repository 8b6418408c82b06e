"""The graph store: named Cypher statements over Bolt (official ``neo4j`` driver).

The same code serves the managed ArcadeDB server (default) and Neo4j; what differs
lives behind :class:`pathweave.store.backends.Backend` (``store.backend``).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

from neo4j import Driver

from pathweave.store.retry import again, masked_transient, retrying, server_error, transient
from pathweave.store.statements import access_mode, load_all, statement
from pathweave.store.backends.base import Backend
from pathweave.telemetry import traced

log = logging.getLogger(__name__)

_SCHEMA_PREFIX = "constraint_"
T = TypeVar("T")

_BOOKMARK_MANAGERS: "weakref.WeakKeyDictionary[Driver, Any]" = weakref.WeakKeyDictionary()
_BOOKMARK_LOCK = threading.Lock()


BOOKMARK_TIMEOUT = "Neo.TransientError.Transaction.BookmarkTimeout"
"""Neo4j's error for a transaction asked to start after a state its database has not reached."""


def bookmark_manager(driver: Driver):
    """The one bookmark manager of ``driver`` (so of the process's connection): every
    :class:`GraphStore` on it, whatever its tenant, shares it."""
    from neo4j import GraphDatabase

    with _BOOKMARK_LOCK:
        manager = _BOOKMARK_MANAGERS.get(driver)
        if manager is None:
            manager = _BOOKMARK_MANAGERS[driver] = GraphDatabase.bookmark_manager()
        return manager


def forget_bookmarks(driver: Driver | None = None) -> None:
    """Start the bookmarks of ``driver`` (None: of every connection of this process) afresh:
    the database was replaced by an earlier state (a restore), which will never reach them."""
    with _BOOKMARK_LOCK:
        if driver is None:
            _BOOKMARK_MANAGERS.clear()
        else:
            _BOOKMARK_MANAGERS.pop(driver, None)


def batched(rows: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``rows`` of at most ``size`` items."""
    for start in range(0, len(rows), max(1, size)):
        yield rows[start:start + size]


class GraphStore:
    """A connection to one store database, scoped to one tenant.

    ``run(name, **params)`` executes the named statement of ``cypher/`` and
    returns its records as dicts; the tenant is passed as ``$tenant``.
    """

    def __init__(self, driver: Driver, database: str, backend: Backend, tenant: str,
                 batch_size: int = 500, dimensions: int = 384) -> None:
        self.driver = driver
        self.dimensions = dimensions
        self.database = database
        self.backend = backend
        self.tenant = tenant
        self.batch_size = batch_size
        self._bookmarked = backend.name == "neo4j"

    @property
    def bookmarks(self):
        """The process's bookmark manager of this connection (Neo4j; None on ArcadeDB)."""
        return bookmark_manager(self.driver) if self._bookmarked else None

    def _moved_back(self, exc: BaseException) -> bool:
        """Whether ``exc`` says the database is behind this process's own bookmarks: it was
        replaced by an earlier state (a restore) and will never reach them. They are then
        forgotten (logged), and the work may run again."""
        if not self._bookmarked or getattr(server_error(exc), "code", None) != BOOKMARK_TIMEOUT:
            return False
        log.warning("the store is behind this process's bookmarks (restored from a backup?): starting afresh")
        forget_bookmarks(self.driver)
        return True

    @staticmethod
    def _transact(work: Callable[[], T], runs_again: Callable[[BaseException], bool],
                  moved_back: Callable[[BaseException], bool]) -> T:
        """``work()`` (one transaction) under the store's retry policy
        (:func:`pathweave.store.retry.retrying`); raises the server's error behind the last
        try's (:func:`~pathweave.store.retry.server_error`: what callers classify)."""
        try:
            for attempt in retrying(runs_again, moved_back):
                with attempt:
                    return work()
        except Exception as exc:
            error = server_error(exc)
            if error is exc:
                raise
            raise error from exc
        raise AssertionError("unreachable: the policy's last try raises")

    def _session(self, bookmarks: Sequence[str] = (), read: bool = False):
        """A session of the store's database. On Neo4j it shares the process's bookmark
        manager (every transaction sees what this process committed before it, on whichever
        cluster member serves it), and starts after ``bookmarks`` too (another process's
        commits: :meth:`last_bookmarks`)."""
        manager = self.bookmarks
        if manager is None:
            return self.driver.session(database=self.database)
        from neo4j import Bookmarks

        extra = Bookmarks.from_raw_values(list(bookmarks)) if bookmarks else None
        return self.driver.session(database=self.database, bookmark_manager=manager, bookmarks=extra,
                                   default_access_mode="READ" if read else "WRITE")

    def last_bookmarks(self) -> list[str]:
        """The bookmarks of what this process has committed and read so far (Neo4j; empty on
        ArcadeDB, a single server that serves every read after the commits before it). Another
        process passes them to :meth:`run` to read at least that state."""
        manager = self.bookmarks
        return sorted(manager.get_bookmarks()) if manager is not None else []

    @property
    def meta_id(self) -> str:
        """Id of the tenant's Meta node (graph version counter)."""
        return f"meta:{self.tenant}"

    def run(self, name: str, *, read_after: Sequence[str] = (), on_leader: bool = False,
            **params: Any) -> list[dict[str, Any]]:
        """Run named statement ``name``; records as dicts. On Neo4j in a managed transaction of
        its access mode (:func:`~pathweave.store.statements.access_mode`: reads may go to a
        follower, writes to the leader; the driver retries transient errors and leader
        switches, which the statements' idempotence makes safe), after the process's own
        commits. ``read_after``: bookmarks of another process's commits (:meth:`last_bookmarks`)
        to wait for, once, in an auto-commit transaction (of a read statement, on any member
        the driver picks for reads; a bookmark the cluster has not reached
        in the server's wait is an error, not retried). ``on_leader``: a read that must see
        every commit of every process (e.g. a key's revocation) runs where writes do. ArcadeDB,
        and ``CALL … IN TRANSACTIONS``: an auto-commit transaction. A writing statement runs
        again under the store's retry policy (:mod:`pathweave.store.retry`). In a traced query
        or batch, a span ``store <name>``."""
        params.setdefault("tenant", self.tenant)
        text = statement(name)
        mode = access_mode(name) if self._bookmarked and not read_after else "auto"
        if on_leader and mode == "read":
            mode = "write"

        def attempt() -> list[dict[str, Any]]:
            with self._session(read_after, read=bool(read_after) and access_mode(name) == "read") as session:
                if mode == "auto":
                    return [record.data() for record in session.run(text, params)]

                def work(tx):
                    return [record.data() for record in tx.run(text, params)]
                return session.execute_read(work) if mode == "read" else session.execute_write(work)

        writes = access_mode(name) != "read"
        with traced(f"store {name}", **{"db.operation.name": name, "db.system.name": self.backend.name}):
            # a bookmark another process gave that the store has not reached is an error, not retried
            # a managed read runs again only where the driver let its own retry through (writes:
            # the policy); an auto-commit one also where the driver does not retry at all
            def runs_again(exc: BaseException) -> bool:
                own = mode == "auto" and not read_after and transient(exc)  # never a bookmark's wait
                return (again(exc) if writes else masked_transient(exc)) or own
            return self._transact(attempt, runs_again=runs_again,
                                  moved_back=lambda exc: not read_after and self._moved_back(exc))

    def write(self, name: str, rows: Sequence[dict[str, Any]], **params: Any) -> int:
        """Write ``rows`` with named UNWIND statement ``name`` in batches (one transaction
        each, :meth:`run_in_transaction`)."""
        written = 0
        for chunk in batched(rows, self.batch_size):
            written += len(chunk)
            self.run_in_transaction([(name, {"rows": list(chunk), **params})])
        return written

    def run_in_transaction(self, steps: Iterable[tuple[str, dict[str, Any]]],
                           on_step: Callable[[str, float], None] | None = None) -> None:
        """Run named statements ``(name, params)`` in ONE write transaction: all or nothing.
        ``on_step(name, seconds)`` after each statement (ingestion's profile; a retried
        transaction reports its statements again). ``steps`` is read once into a list: the
        transaction runs again under the store's retry policy (:mod:`pathweave.store.retry`:
        the driver's managed retries, a write conflict, an ambiguous commit, a restore's
        bookmarks), and a generator would then be exhausted and commit nothing. An error the
        policy does not retry, or the last try's, is raised (the server's error)."""
        steps = list(steps)

        def work(tx) -> None:
            for name, params in steps:
                started = time.perf_counter()
                tx.run(statement(name), {"tenant": self.tenant, **params}).consume()
                if on_step is not None:
                    on_step(name, time.perf_counter() - started)

        def attempt() -> None:
            with self._session() as session:
                session.execute_write(work)

        self._transact(attempt, runs_again=again, moved_back=self._moved_back)

    def execute_write(self, work: Callable[[Callable[..., list[dict[str, Any]]]], T]) -> T:
        """Run ``work(run)`` in ONE managed write transaction, run again under the store's
        retry policy (:mod:`pathweave.store.retry`; so ``work`` must start over cleanly):
        ``run(name, **params) -> rows`` runs named statements inside it for the tenant.
        Returns what ``work`` returns; raises the server's error of the last try, or any
        error the policy does not retry (``work``'s own included)."""
        def transaction(tx):
            def run(name: str, **params: Any) -> list[dict[str, Any]]:
                return [r.data() for r in tx.run(statement(name), {"tenant": self.tenant, **params})]
            return work(run)

        def attempt() -> T:
            with self._session() as session:
                return session.execute_write(transaction)

        return self._transact(attempt, runs_again=again, moved_back=self._moved_back)

    def write_all(self, steps: Iterable[tuple[str, Sequence[dict[str, Any]]]]) -> None:
        """Write several named UNWIND batches in ONE transaction (used per group of
        documents, so a failure leaves nothing partial of them)."""
        self.run_in_transaction(
            (name, {"rows": list(chunk)}) for name, rows in steps for chunk in batched(rows, self.batch_size)
        )

    def existing(self, name: str, ids: Sequence[str]) -> set[str]:
        """Ids among ``ids`` that statement ``name`` finds in the store."""
        found: set[str] = set()
        for chunk in batched(list(ids), 2000):
            found.update(row["id"] for row in self.run(name, ids=list(chunk)))
        return found

    def graph_version(self) -> int:
        """The tenant's graph version (0 before any ingestion)."""
        rows = self.run("graph_version", meta_id=self.meta_id)
        return int(rows[0]["version"]) if rows else 0

    def record_change(self, added: Sequence[str] = (), removed: Sequence[str] = (),
                      removed_entities: Sequence[str] = (), entities: Sequence[str] = (),
                      aliases: Sequence[str] = (), keep: int = 1000) -> int:
        """Bump the tenant's graph version and record what changed, in a write transaction of
        its own (retried on conflicts; :meth:`record_change_in` says what is recorded);
        returns the new version. Then tells the backend."""
        version = self.execute_write(lambda run: self.record_change_in(
            run, added, removed, removed_entities, entities, aliases, keep))
        self.backend.graph_changed(self)
        return version

    def record_change_in(self, run: Callable[..., list[dict[str, Any]]], added: Sequence[str] = (),
                         removed: Sequence[str] = (), removed_entities: Sequence[str] = (),
                         entities: Sequence[str] = (), aliases: Sequence[str] = (), keep: int = 1000,
                         access: Sequence[str] = ()) -> int:
        """Inside the caller's write transaction (``run`` of :meth:`execute_write`): bump the
        tenant's graph version and record what changed (statement ``record_graph_change``):
        passage ids ``added`` / ``removed``, entity ids ``removed_entities``, ``entities``
        whose SYNONYM edges were written and ``aliases`` whose ALIAS_OF edge was written or
        removed (alias consolidation, spec §3) and passage ids ``access`` whose documents' access
        lists changed (:mod:`pathweave.access`). Query processes apply these records to their
        topology (:mod:`pathweave.graph.topology`) instead of re-reading the tenant; the last
        ``keep`` records are kept. Returns the new version; the caller calls
        ``backend.graph_changed(store)`` after the commit."""
        version = int(run("record_graph_change", meta_id=self.meta_id, added=list(added), removed=list(removed),
                          removed_entities=list(removed_entities), entities=list(entities),
                          aliases=list(aliases), access=list(access))[0]["version"])
        run("prune_graph_changes", version=version, keep=keep)
        return version

    def counts(self) -> dict[str, int]:
        """Node counts by label and relationship counts by type for the tenant."""
        out = {row["label"]: int(row["n"]) for row in self.run("count_nodes")}
        out.update({f"rel:{row['type']}": int(row["n"]) for row in self.run("count_relationships")})
        return out

    DOCUMENT_GRAPH = ("Document", "Passage", "Proposition", "rel:PART_OF", "rel:NEXT",
                      "rel:STATES", "rel:MENTIONS", "rel:ASSERTS", "rel:RELATES", "rel:SYNONYM", "rel:ALIAS_OF",
                      "rel:HAS_RUN")
    """The :meth:`counts` keys that only ingestion writes (queries write records, sessions,
    answers and APR's memory runs; jobs and document states are bookkeeping)."""

    def document_counts(self) -> dict[str, int]:
        """The counts of the tenant's document graph, what its documents alone determine:
        :data:`DOCUMENT_GRAPH` of :meth:`counts` plus ``Entity`` (mentioned, or joined by RELATES),
        ``Relation`` (of an asserted triple), ``Triple`` (asserted by a passage), ``Run`` (fact
        runs) and ``rel:EDGE`` (theirs). Two stores that ingested the same documents have
        equal document counts however many queries each answered (SYNONYM and ALIAS_OF come
        from the approximate vector index: nearly equal)."""
        counts = self.counts()
        out = {key: counts.get(key, 0) for key in self.DOCUMENT_GRAPH}
        row = self.run("count_document_apr")[0]
        out.update({"Entity": int(row["entities"]), "Relation": int(row["relations"]), "Triple": int(row["triples"]),
                    "Run": int(row["runs"]), "rel:EDGE": int(row["edges"])})
        return out

    def ensure_schema(self, dimensions: int) -> None:
        """Create constraints, vector and full-text indexes idempotently."""
        for name in sorted(load_all()):
            if name.startswith(_SCHEMA_PREFIX):
                self.run(name)
        self.backend.create_vector_indexes(dimensions)
        self.backend.create_fulltext_indexes()

    def close(self) -> None:
        """Release the backend's resources (e.g. the GDS client) and the driver."""
        self.backend.close()
        self.driver.close()

    def __enter__(self) -> "GraphStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
