"""Persist a query's reasoning record to the graph (spec §0) so Neo4j Browser
users can explore it: ``(:Query)-[:FOUND {rank, score}]->(:Path)-[:STEP {order, via}]->(:Proposition)``
and ``(:Query)-[:SELECTED {rank, weight}]->(:Passage|:Proposition|:Entity)``.

Queries hand their records to a :class:`RecordWriter`, which writes them on a
background thread: the caller gets its answer without waiting for the store's
write, and readers call :meth:`RecordWriter.flush` first.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from datetime import datetime, timezone

from pathweave.records.answers import answer_steps, read_answer, read_tree
from pathweave.model import QueryResult
from pathweave.access import UNRESTRICTED, Access
from pathweave.records.session_ids import session_steps
from pathweave.store.graph_store import GraphStore
from pathweave.errors import PathweaveError

log = logging.getLogger(__name__)


def write_reasoning_record(store: GraphStore, result: QueryResult) -> None:
    """Write ``result`` in one transaction: the Query node (and its session, for a context
    sent in one), its paths and steps, and the SELECTED edges to its ranked passages, path
    propositions and seed entities, or to its budgeted context's lines (with their session
    ``code`` and whether they were only ``referenced``)."""
    qid = result.query_id
    paths = [{"path_id": p.path_id, "rank": p.rank, "score": p.score,
              "text": " -> ".join(s.text for s in p.steps)} for p in result.paths]
    steps = [{"path_id": p.path_id, "prop_id": s.prop_id, "order": i, "via": s.via}
             for p in result.paths for i, s in enumerate(p.steps)]
    if result.context is not None:  # the budgeted selection is what the query selected
        chosen = {kind: [{"id": line.id, "rank": line.rank, "weight": line.weight, "code": line.code,
                          "referenced": line.referenced}
                         for line in result.context.lines if line.kind == kind]
                  for kind in ("passage", "proposition", "entity")}
        passages, entities = chosen["passage"], chosen["entity"]
        props = {row["id"]: row for row in chosen["proposition"]}
    else:
        passages = [{"id": h.passage_id, "rank": h.rank, "weight": h.score, "code": None, "referenced": False}
                    for h in result.passages]
        props = {}
        for p in result.paths:
            for s in p.steps:
                props.setdefault(s.prop_id, {"id": s.prop_id, "rank": len(props) + 1, "weight": p.score,
                                             "code": None, "referenced": False})
        entities = [{"id": s.entity_id, "rank": i + 1, "weight": s.weight} for i, s in enumerate(result.seeds)]
    created = datetime.now(timezone.utc).isoformat()
    principals = result.principals()
    steps_to_run = [("write_query", {"query_id": qid, "text": result.question, "mode": result.mode,
                                     "created_at": created, "principals": principals,
                                     "trace_id": result.trace_id})]
    if result.context is not None and result.context.session_id:
        steps_to_run += session_steps(store, qid, result.context.session_id, created, principals)
    for name, rows in (("write_paths", paths), ("write_steps", steps), ("select_passages", passages),
                       ("select_propositions", list(props.values())), ("select_entities", entities)):
        if rows:
            steps_to_run.append((name, {"rows": rows, "query_id": qid}))
    steps_to_run += answer_steps(result)  # the answer and PruneRAG tree, when the query has them
    store.run_in_transaction(steps_to_run)


def read_reasoning_record(store: GraphStore, query_id: str, access: Access = UNRESTRICTED) -> dict:
    """A stored record: ``{query_id, text, paths: [{rank, score, steps}], selected: [...],
    answer, tree, runs}``; each selected passage or proposition carries its ``reference``
    (citation); ``answer``/``tree`` (see :mod:`pathweave.records.answers`) are None unless
    the query generated them; ``runs`` (mode apr, :func:`read_query_runs`):
    the session and the runs the query asked, sent and reused, else None. For a restricted
    ``access``, only what it may read now (:func:`_readable_now`: an access list changed
    since the query leaves out what it no longer reads; ``withheld`` then says so, and the
    answer and the tree are None).

    Raises KeyError when the tenant has no such query, or when ``access`` does not read
    everything the caller that asked it read (:meth:`pathweave.access.Access.covers`; the
    same error, so a record's existence is not disclosed either).
    """
    asked = store.run("read_query_principals", query_id=query_id)
    if asked and not access.covers(Access(None if asked[0]["principals"] is None
                                          else frozenset(asked[0]["principals"]))):
        raise KeyError(f"no reasoning record {query_id!r}")
    rows = store.run("read_query_paths", query_id=query_id)
    selected = store.run("read_query_selected", query_id=query_id)
    answer, tree = read_answer(store, query_id), read_tree(store, query_id)
    runs = read_query_runs(store, query_id)
    has_runs = any(runs[link] for link in ("asked", "sent", "reused"))
    if not rows and not selected and answer is None and tree is None and not has_runs:
        raise KeyError(f"no reasoning record {query_id!r}")
    paths: dict[str, dict] = {}
    for row in rows:
        path = paths.setdefault(row["path_id"], {"path_id": row["path_id"], "rank": row["rank"],
                                                 "score": row["score"], "steps": []})
        path["steps"].append({"order": row["step"], "prop_id": row["prop_id"],
                              "text": row["proposition"], "via": row["via"]})
    statement_of, cited = _sources(store, access, list(paths.values()), selected, tree)
    kept, selected, withheld = _readable_now(access, list(paths.values()), selected, tree, statement_of, cited)
    if withheld:  # written from sources this reader may no longer read
        answer = tree = None
    for row in selected:  # "title, p. N" / "title > section", citing only documents it may read
        passage = row["id"] if row["label"] == "Passage" else statement_of.get(row["id"])
        row["reference"] = cited[passage]["reference"] if passage in cited else None
    return {"query_id": query_id, "text": rows[0]["text"] if rows else None,
            "paths": sorted(kept, key=lambda p: p["rank"]), "selected": selected,
            "answer": answer, "tree": tree, "runs": runs if has_runs else None, "withheld": withheld}


def _sources(store: GraphStore, access: Access, paths: list[dict], selected: list[dict],
             tree: dict | None) -> tuple[dict[str, str], dict[str, dict]]:
    """The record's citations (:func:`pathweave.records.citations.statement_citations`):
    a passage stating each selected proposition (a selected passage first) and the
    passages' citations, as ``access`` may read them; for a restricted reader also the
    paths' propositions and the tree's passages, which :func:`_readable_now` checks."""
    from pathweave.records.citations import statement_citations

    props = [row["id"] for row in selected if row["label"] == "Proposition"]
    passages = [row["id"] for row in selected if row["label"] == "Passage"]
    if not access.restricted:
        return statement_citations(store, props, passages, passages, access)
    props += [step["prop_id"] for path in paths for step in path["steps"]]
    tree_passages = [hit["passage_id"] for node in (tree or {}).get("nodes", []) for hit in node["passages"]]
    return statement_citations(store, props, passages + tree_passages, passages, access)


def _readable_now(access: Access, paths: list[dict], selected: list[dict], tree: dict | None,
                  statement_of: dict[str, str], cited: dict[str, dict]) -> tuple[list[dict], list[dict], bool]:
    """What of a record ``access`` may read now (an access list may have changed since the
    query), from its :func:`_sources`: the paths whose every proposition a readable passage
    states, the selected passages and propositions it may read, and whether anything was
    left out, a tree's retrieved passage included (then the selected entities, the answer
    and the tree, chosen or written from those sources, are withheld too). An unrestricted
    reader reads everything."""
    if not access.restricted:
        return paths, selected, False
    passages = {row["id"] for row in selected if row["label"] == "Passage"}
    passages |= {hit["passage_id"] for node in (tree or {}).get("nodes", []) for hit in node["passages"]}
    kept = [path for path in paths if all(step["prop_id"] in statement_of for step in path["steps"])]
    shown = [row for row in selected if row["id"] in (statement_of if row["label"] == "Proposition" else cited)
             or row["label"] not in ("Proposition", "Passage")]
    withheld = len(kept) < len(paths) or len(shown) < len(selected) or not passages <= cited.keys()
    if withheld:  # the entities were selected with those sources: their names go with them
        shown = [row for row in shown if row["label"] in ("Proposition", "Passage")]
    return kept, shown, withheld


class RecordsBehind(PathweaveError, RuntimeError):
    """The record writer did not catch up within the wait a reader allows (retry later)."""


class _Count:
    """A thread-safe count (the process's records not written)."""

    def __init__(self) -> None:
        self._n, self._lock = 0, threading.Lock()

    def add(self) -> None:
        with self._lock:
            self._n += 1

    @property
    def value(self) -> int:
        return self._n


FAILED_RECORDS = _Count()
"""Reasoning records this process could not write after the store's retries (every writer;
the API's ``pathweave_reasoning_records_failed`` metric)."""


class RecordWriter:
    """Writes reasoning records of one store/tenant on a background thread, in order.

    ``submit(result)`` returns at once (it blocks only while ``max_pending`` records
    already wait: back-pressure, nothing is dropped); ``flush()`` returns when every
    record submitted before it is written (or its write failed). A write runs under the
    store's retry policy (:mod:`pathweave.store.retry`); one that still fails is logged and
    counted (``failures``, :data:`FAILED_RECORDS`); it never fails the query that produced
    it, whose response says so where it is written before the answer
    (:meth:`write_now`). Records still waiting when the process dies are lost (they are a
    trace, not data).
    """

    def __init__(self, store: GraphStore, max_pending: int = 1000) -> None:
        self.store = store
        self.failures = 0
        self._queue: queue.Queue[QueryResult] = queue.Queue(max_pending)
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, result: QueryResult) -> None:
        """Queue ``result``'s record for writing."""
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="reasoning-records", daemon=True)
                self._thread.start()
        self._queue.put(result)

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every submitted record has been written, at most ``timeout_s`` seconds
        (None: as long as it takes). Raises :class:`RecordsBehind` when they are not written
        in time."""
        if timeout_s is None:
            self._queue.join()
            return
        deadline = time.monotonic() + timeout_s
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RecordsBehind(f"{self._queue.unfinished_tasks} reasoning record(s) still being written "
                                        f"after {timeout_s:g} s")
                self._queue.all_tasks_done.wait(remaining)

    def write_now(self, result: QueryResult) -> bool:
        """Write ``result``'s record on the calling thread, after every record submitted
        before it (a session's next query reads what this one sent). Returns whether it was
        written (a failure is logged and counted, as on the writer's thread)."""
        self.flush()
        return self._write(result)

    def _write(self, result: QueryResult) -> bool:
        try:
            write_reasoning_record(self.store, result)
            return True
        except Exception:  # noqa: BLE001 - the query's result stands (a lost trace must not take the writer down)
            self.failures += 1
            FAILED_RECORDS.add()
            log.exception("reasoning record %s not written", result.query_id)
            return False

    def _run(self) -> None:
        while True:
            result = self._queue.get()
            try:
                self._write(result)
            finally:
                self._queue.task_done()


def read_query_runs(store: GraphStore, query_id: str) -> dict:
    """What an APR query asked, sent and reused: ``{session_id, asked: [...], sent: [...],
    reused: [...]}``, each entry ``{run_id, code, channel, rank}`` (empty lists for a query
    of another mode)."""
    out: dict = {"session_id": None, "asked": [], "sent": [], "reused": []}
    for row in store.run("apr_query_runs", query_id=query_id):
        out["session_id"] = row["session_id"]
        out[row["link"].lower()].append({k: row[k] for k in ("run_id", "code", "channel", "rank")})
    return out
