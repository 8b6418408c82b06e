"""``pathweave bench history``: a register checker for versioned documents, in the style of
Jepsen's.

The real service on loopback (:class:`~pathweave_bench.service.Service`: Redis, the API, one
Celery worker, the managed store of ``backend``). ``writers`` clients concurrently PUT and
DELETE a handful of external ids (every PUT carries a unique marker: "The approver of policy
<id> is <marker>."), while the worker is SIGKILLed mid-replacement (restarted 2 s later, as
a supervisor would), the store server is SIGKILLed (started again by whichever process
needs it next), the API is SIGKILLed between a submission's accepting commit and its publish
(a fault point, restarted at once), and Redis is SIGKILLed and started again without its
files (every message it held lost): the API's sweep must publish what the store holds as
accepted. Meanwhile one reader asks, the whole time, ``GET /v1/documents/{doc_id}`` of
every id and a dense query that returns every id's passage, and a poller records when each
accepted version's job finishes (done, superseded or failed).

The recorded history (every write with the version it was accepted as and when it
completed, every read with the marker it found) is then checked (:func:`check`):

- **lost updates**: after the drain, each id shows its last accepted write (absent after a
  DELETE), or a write sent after it whose answer was lost (the API killed at its fault
  point: accepted, at a version nobody was told), no accepted version ended failed, and no
  document is left queued or running;
- **missing windows**: while an id's latest completed write is a PUT (and no DELETE of it is
  under way), every read of it finds some version (a replacement in progress never makes it
  disappear);
- **going back**: no read sees an older version than an earlier read of the same id did, and
  no GET sees a version older than one whose write had completed before it began (stale);
- **graph**: the tenant's document graph equals a clean ingest of the final versions into a
  fresh tenant (:meth:`~pathweave.store.graph_store.GraphStore.document_counts`).

A failing history is written to ``history-failed.json`` beside the results:
``python -m pathweave_bench.history FILE`` checks a saved history again.
"""

from __future__ import annotations

import json
import os
import random
import re
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx

TENANT = "history"
HISTORY_WRITERS = 4
"""Concurrent writing clients of the checker in ``bench soak``."""
MARKER = re.compile(r"approver of policy (\S+) is (\S+)\.")


@dataclass
class Event:
    """One operation of the history. ``kind``: put | delete | get | query; ``t0``/``t1``: when
    it was invoked and answered (s since the start); ``version``: what a write was accepted as
    (None: refused); ``done_t``/``outcome``: when the poller saw a PUT's job finish and how;
    ``found``: what a read saw (``{id: marker or None}``; None = absent)."""

    kind: str
    t0: float
    t1: float = 0.0
    id: str | None = None
    marker: str | None = None
    version: int | None = None
    status: int = 0
    job_id: str | None = None
    done_t: float | None = None
    outcome: str | None = None
    found: dict[str, str | None] = field(default_factory=dict)


class History:
    """The events of a run, appended by many threads."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.events: list[Event] = []
        self.faults: list[dict] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self.started, 4)

    def add(self, event: Event) -> Event:
        with self._lock:
            self.events.append(event)
        return event

    def dump(self, path: Path) -> Path:
        path.write_text(json.dumps({"events": [asdict(e) for e in self.events], "faults": self.faults}, indent=1))
        return path

    @classmethod
    def load(cls, path: Path) -> "History":
        data = json.loads(Path(path).read_text())
        history = cls()
        history.events = [Event(**e) for e in data["events"]]
        history.faults = data.get("faults", [])
        return history


def body(ext_id: str, marker: str) -> dict:
    return {"title": f"Policy {ext_id}", "text": f"The approver of policy {ext_id} is {marker}. Requests above "
                                                f"the limit of policy {ext_id} need that approval."}


def writer(url: str, token: str, ids: list[str], number: int, budget: list[int], lock: threading.Lock,
           history: History, stop: threading.Event, think_s: float) -> None:
    """One client: PUTs (a fresh marker each) and DELETEs (one in five) of random ids until
    the shared ``budget`` of writes is spent."""
    rng = random.Random(number)
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        count = 0
        while not stop.is_set():
            with lock:
                if budget[0] <= 0:
                    return
                budget[0] -= 1
            ext_id = rng.choice(ids)
            count += 1
            if rng.random() < 0.2:
                event = history.add(Event("delete", history.now(), id=ext_id))
                doc_id = doc_ids(ids)[ext_id]
                response = _call(client, "DELETE", f"/v1/documents/{doc_id}")
                if response is not None and response.status_code == 200:
                    event.version = response.json()["version"]
            else:
                marker = f"W{number}n{count:04d}"
                event = history.add(Event("put", history.now(), id=ext_id, marker=marker))
                response = _call(client, "PUT", f"/v1/documents/{ext_id}", json=body(ext_id, marker))
                if response is not None and response.status_code == 202:
                    accepted = response.json()
                    event.version, event.job_id = accepted["documents"][0]["version"], accepted["job_id"]
            event.t1, event.status = history.now(), response.status_code if response is not None else 0
            if response is None or response.status_code >= 500:
                stop.wait(1.0)
            stop.wait(think_s * rng.random() * 2)


def _call(client: httpx.Client, method: str, path: str, **kwargs) -> httpx.Response | None:
    try:
        return client.request(method, path, **kwargs)
    except httpx.HTTPError:
        return None


_DOC_IDS: dict[tuple[str, ...], dict[str, str]] = {}


def doc_ids(ids: list[str]) -> dict[str, str]:
    """The document id of each external id of the run's tenant."""
    key = tuple(ids)
    if key not in _DOC_IDS:
        from pathweave_ingest.documents import source_doc_id

        _DOC_IDS[key] = {ext: source_doc_id(TENANT, ext) for ext in ids}
    return _DOC_IDS[key]


def reader(url: str, token: str, ids: list[str], history: History, stop: threading.Event,
           pause_s: float = 0.05) -> None:
    """The reader: every id's document (GET), then one dense query that returns every id's
    passage, over and over (``pause_s`` seconds apart) until ``stop``."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        while not stop.is_set():
            for ext_id, doc_id in doc_ids(ids).items():
                event = Event("get", history.now(), id=ext_id)
                response = _call(client, "GET", f"/v1/documents/{doc_id}")
                event.t1, event.status = history.now(), response.status_code if response is not None else 0
                if event.status == 200:
                    text = " ".join(p["text"] for p in response.json()["passages"])
                    event.found = {ext_id: _marker(text, ext_id)}
                    history.add(event)
                elif event.status == 404:
                    event.found = {ext_id: None}
                    history.add(event)
            event = Event("query", history.now())
            response = _call(client, "POST", "/v1/query", json={
                "question": "Who is the approver of the policy?", "mode": "dense", "k": 3 * len(ids)})
            event.t1, event.status = history.now(), response.status_code if response is not None else 0
            if event.status == 200:
                event.found = {ext: None for ext in ids}
                for passage in response.json()["passages"]:
                    for match in MARKER.finditer(passage["text"]):
                        if match.group(1) in event.found:
                            event.found[match.group(1)] = match.group(2)
                history.add(event)
            stop.wait(pause_s)


def _marker(text: str, ext_id: str) -> str | None:
    for match in MARKER.finditer(text):
        if match.group(1) == ext_id:
            return match.group(2)
    return "?"  # a document without its marker: a broken version


def poller(url: str, token: str, history: History, stop: threading.Event) -> None:
    """Records when each accepted PUT's job finished (``done_t``) and how (``outcome``: its
    document's status: done, superseded, failed)."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        while True:
            waiting = [e for e in list(history.events) if e.kind == "put" and e.job_id and e.outcome is None]
            for event in waiting:
                response = _call(client, "GET", f"/v1/jobs/{event.job_id}")
                if response is not None and response.status_code == 200:
                    status = response.json()["documents"][0]["status"]
                    if status not in ("queued", "running"):
                        event.outcome, event.done_t = status, history.now()
            if stop.is_set() and not waiting:
                return
            time.sleep(0.1)


def check(history: History, final: dict[str, str | None] | None = None) -> dict:
    """The violations of the recorded history (see the module doc). ``final``: each id's
    visible marker after the drain (None: absent). Returns counts and the first examples."""
    events = sorted(history.events, key=lambda e: e.t0)
    writes = [e for e in events if e.kind in ("put", "delete") and e.version is not None]
    # a write whose answer was lost or a 5xx (the API or the store killed meanwhile): it may have
    # been accepted, at a version nobody was told
    unsure = [e for e in events if e.kind in ("put", "delete") and e.version is None
              and (e.status == 0 or e.status >= 500)]
    by_marker = {e.marker: e for e in writes + unsure if e.kind == "put"}
    ids = sorted({e.id for e in writes} | {e.id for e in unsure})
    out: dict = {"writes": len(writes), "puts": sum(e.kind == "put" for e in writes),
                 "deletes": sum(e.kind == "delete" for e in writes),
                 "reads": sum(e.kind in ("get", "query") for e in events),
                 "outcomes": {}, "lost_updates": [], "failed_versions": [], "missing": [], "going_back": [],
                 "stale": [], "unknown_marker": [], "unsure_writes": len(unsure), "unsure_reads": 0}
    for e in writes:
        if e.kind == "put":
            out["outcomes"][e.outcome or "unfinished"] = out["outcomes"].get(e.outcome or "unfinished", 0) + 1
            if e.outcome == "failed":
                out["failed_versions"].append(asdict(e))

    def completed(e: Event) -> float | None:
        """When ``e`` had become visible (a PUT's job done, a DELETE answered); None: never."""
        if e.kind == "delete":
            return e.t1
        return e.done_t if e.outcome == "done" else None

    for ext in ids:
        mine = sorted((e for e in writes if e.id == ext), key=lambda e: e.version)
        # a DELETE without a version (its answer lost, a 5xx, a 404) may have taken effect: an
        # absence after it was sent is no violation
        unsure_deletes = [e for e in events if e.kind == "delete" and e.id == ext and e.version is None]
        last = mine[-1] if mine else None
        if final is not None:
            want = last.marker if last is not None and last.kind == "put" else None
            after = [e for e in unsure if e.id == ext and (last is None or e.t1 > last.t0)]  # maybe accepted later
            allowed = {want} | {e.marker if e.kind == "put" else None for e in after}
            if final.get(ext) not in allowed:
                out["lost_updates"].append({"id": ext, "visible": final.get(ext), "expected": sorted(allowed, key=str),
                                            "last_write": asdict(last) if last else None})
        seen = 0  # the newest version a read of this id has shown
        for read in (e for e in events if e.kind in ("get", "query") and ext in e.found):
            marker = read.found[ext]
            done = [e for e in mine if (completed(e) or float("inf")) < read.t0]
            newest = max(done, key=lambda e: e.version) if done else None
            if marker is None:
                deleting = [e for e in mine if e.kind == "delete" and e.t0 < read.t1
                            and (newest is None or e.version > newest.version)]  # before or concurrent
                deleting += [e for e in unsure_deletes if e.t0 < read.t1 and (newest is None or e.t0 > newest.t0)]
                if newest is not None and newest.kind == "put" and not deleting:
                    out["missing"].append({"id": ext, "read": asdict(read), "completed": asdict(newest)})
                later_delete = [e for e in mine if e.kind == "delete" and e.version > seen and e.t0 < read.t1]
                later_delete += [e for e in unsure_deletes if e.t0 < read.t1]
                if seen and not later_delete:
                    out["going_back"].append({"id": ext, "read": asdict(read), "had_seen": seen})
                continue
            write = by_marker.get(marker)
            if write is None or write.id != ext:
                out["unknown_marker"].append({"id": ext, "read": asdict(read), "marker": marker})
                continue
            if write.version is None:  # an unsure PUT, accepted after all: its version is unknown
                out["unsure_reads"] += 1
                continue
            if write.version < seen:
                out["going_back"].append({"id": ext, "read": asdict(read), "had_seen": seen,
                                          "saw": write.version})
            if read.kind == "get" and newest is not None and newest.version > write.version:
                out["stale"].append({"id": ext, "read": asdict(read), "saw": write.version,
                                     "completed": newest.version})
            seen = max(seen, write.version)
    for key in ("lost_updates", "failed_versions", "missing", "going_back", "stale", "unknown_marker"):
        out[f"{key}_n"] = len(out[key])
        out[key] = out[key][:5]
    out["ok"] = not any(out[f"{key}_n"] for key in ("lost_updates", "missing", "going_back", "stale",
                                                      "unknown_marker", "failed_versions"))
    return out


class Register:
    """The checker's clients on a running service (its API at ``url``): ``writers`` clients PUT
    and DELETE ``ids`` external ids of tenant :data:`TENANT` until ``writes`` writes are spent
    (``think_s``: the mean pause of a writer, s), the reader (every ``read_pause_s`` s) and the
    poller. :meth:`finish` drains, checks the history and compares the graph with a replay
    (through ``replay_token``, a key of tenant ``history-replay``). Used by ``bench history``
    and, beside its own load, by ``bench soak``."""

    def __init__(self, url: str, token: str, replay_token: str, ids: int = 5, writes: int = 200,
                 writers: int = 4, think_s: float = 1.0, read_pause_s: float = 0.05) -> None:
        self.url, self.token, self.replay_token = url, token, replay_token
        self.external = [f"policy-{n}" for n in range(ids)]
        self.history = History()
        self._dumped: Path | None = None
        self.budget, self._lock = [writes], threading.Lock()
        self._stop, self._reading = threading.Event(), threading.Event()
        self._writers = [threading.Thread(target=writer, name=f"writer-{n}", daemon=True,
                                          args=(url, token, self.external, n, self.budget, self._lock, self.history,
                                                self._stop, think_s))
                         for n in range(writers)]
        self._side = [threading.Thread(target=reader, name="reader", daemon=True,
                                       args=(url, token, self.external, self.history, self._reading, read_pause_s)),
                      threading.Thread(target=poller, name="poller", daemon=True,
                                       args=(url, token, self.history, self._reading))]

    def start(self, started: float | None = None) -> None:
        """Start the clients; ``started`` (``time.monotonic()``): the history's time zero."""
        self.history.started = started if started is not None else time.monotonic()
        for thread in self._writers + self._side:
            thread.start()

    @property
    def left(self) -> int:
        """Writes not yet started."""
        return self.budget[0]

    def stop(self) -> None:
        """Stop every client (idempotent; :meth:`finish` does it too)."""
        self._stop.set()
        self._reading.set()

    def fault(self, fault: str, info: dict) -> None:
        """Record a fault injected meanwhile (for the saved history)."""
        self.history.faults.append({"t": self.history.now(), "fault": fault, **info})

    def wait_running(self, timeout: float) -> None:
        """Until one of the last PUTs' versions is running (a worker is mid-replacement), at
        most ``timeout`` s."""
        with httpx.Client(base_url=self.url, headers=self._auth, timeout=60) as client:
            _wait_running(client, self.history, timeout)

    @property
    def _auth(self) -> dict:
        return {"Authorization": f"Bearer {self.token}"}

    def finish(self, settings, slack: int, out: Path, stop_writers: bool = False, drain_s: float = 900) -> dict:
        """Stop the writers (``stop_writers``; else wait until they spent the budget), wait
        until every accepted version finished (at most ``drain_s`` s), read each id's final
        content, check the history and replay the final versions into a fresh tenant. Returns
        ``{drain_s, left_in_flight, check, graph, ok}`` (``left_in_flight``: the documents still
        queued or running after the drain; plus ``history_file`` where it failed: the history
        written to ``out/history-failed.json``). Raises TimeoutError when the acknowledged
        versions do not all finish."""
        from pathweave_bench.api import same_graph
        from pathweave_bench.common import wait_for

        if stop_writers:
            self._stop.set()
        for thread in self._writers:
            thread.join(900)
        started = time.monotonic()
        results: dict = {}
        try:
            wait_for(lambda: all(e.outcome for e in self.history.events if e.kind == "put" and e.job_id), drain_s,
                     "every accepted version", interval=1.0)
            with httpx.Client(base_url=self.url, headers=self._auth, timeout=60) as client:
                # and the versions accepted without an answer (published by the API's sweep)
                in_flight = lambda: [d for d in client.get("/v1/documents", params={"limit": 200}).json()["documents"]
                                     if d["status"] in ("queued", "running")]  # noqa: E731
                try:
                    wait_for(lambda: not in_flight(), max(drain_s - (time.monotonic() - started), 1.0),
                             "no document queued or running", interval=1.0)
                except TimeoutError:
                    pass
                results["left_in_flight"] = [{k: d.get(k) for k in ("doc_id", "status", "version", "queued_at")}
                                             for d in in_flight()]
            time.sleep(1.0)  # the reader sees the drained state too
            self._reading.set()
            for thread in self._side:
                thread.join(120)
            final = {}
            with httpx.Client(base_url=self.url, headers=self._auth, timeout=60) as client:
                for ext, doc_id in doc_ids(self.external).items():
                    response = client.get(f"/v1/documents/{doc_id}")
                    final[ext] = _marker(" ".join(p["text"] for p in response.json()["passages"]), ext) \
                        if response.status_code == 200 else None
            results["drain_s"] = round(time.monotonic() - started, 1)
            results["check"] = check(self.history, final)
            results["graph"] = _replay(self.url, self.replay_token, final, self.external, settings, same_graph, slack)
            results["ok"] = results["check"]["ok"] and results["graph"]["same"] and not results["left_in_flight"]
        finally:
            self.stop()
            if not results.get("ok"):
                results["history_file"] = self.dump_failed(out)
        return results

    def dump_failed(self, out: Path) -> str:
        """Write the history to ``out/history-failed.json`` (once); returns its path."""
        path = Path(out) / "history-failed.json"
        if self._dumped != path:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._dumped = self.history.dump(path)
        return str(path)


FAULT_KINDS = ("worker", "store", "api", "redis-lost")


def fault_plan(worker_kills: int, store_kills: int, api_kills: int = 0, redis_losses: int = 0) -> list[str]:
    """The faults of a run in the order they are inflicted (:meth:`Service.kill`'s names): one
    of each kind left in turn (worker, store, api, redis-lost), so every kind meets a run
    already recovering from the others."""
    left = dict(zip(FAULT_KINDS, (worker_kills, store_kills, api_kills, redis_losses)))
    plan: list[str] = []
    while any(left.values()):
        for kind in FAULT_KINDS:
            if left[kind]:
                plan.append(kind)
                left[kind] -= 1
    return plan


def run_history(out: Path, writes: int = 200, ids: int = 5, writers: int = 4, worker_kills: int = 3,
                store_kills: int = 1, backend: str = "arcadedb", think_s: float = 0.3,
                workdir: Path | None = None, api_kills: int = 2, redis_losses: int = 1,
                service_settings: dict[str, str] | None = None) -> dict:
    """Run the service (Celery worker and Redis: broker mode), the clients and the faults
    (:func:`fault_plan`, spread over the writes; a worker is killed while a version of it
    runs, the API at its fault point between a commit and its publish), drain, check;
    returns (and writes ``history.json``) the results. ``service_settings``: more
    ``PATHWEAVE_*`` variables of the service (a test's shorter sweep)."""
    import shutil

    from pathweave.servers import store_server
    from pathweave.settings import get_settings
    from pathweave_bench.common import git_commit, machine_info, wait_for
    from pathweave_bench.service import APPROXIMATE_SLACK, Service

    own_dir = workdir is None
    workdir = Path(workdir or tempfile.mkdtemp(prefix="pathweave-bench-history-"))
    settings = get_settings().model_copy(update={"data_dir": workdir})
    settings = settings.model_copy(update={"store": settings.store.model_copy(update={"backend": backend, "uri": ""})})
    service = Service(workdir, llm=False, backend=backend, **(service_settings or {}))
    results: dict = {"machine": machine_info(), "commit": git_commit(), "backend": backend, "writes": writes,
                     "ids": ids, "writers": writers}
    register: Register | None = None
    try:
        store_server.start(settings, owner=os.getpid())  # this run's store: it stops when the run ends
        service.start_redis()
        token, replay_token = register_keys(service)
        service.start_worker()
        service.start_api()
        register = Register(service.url, token, replay_token, ids, writes, writers, think_s)
        outbox = Outbox(service.url, service.create_key(Outbox.TENANT, "outbox", "ingest"))
        register.start()
        faults = fault_plan(worker_kills, store_kills, api_kills, redis_losses)
        for number, fault in enumerate(faults):
            # spread over the writes; a worker is killed while one of its versions runs
            wait_for(lambda: register.left <= writes * (1 - (number + 1) / (len(faults) + 1)), 900, "writes")
            if fault == "worker":
                register.wait_running(60.0)
            register.fault(fault, service.kill(fault, submit=outbox.submit if fault == "api" else None))
        results["faults"] = register.history.faults
        results.update(register.finish(settings, APPROXIMATE_SLACK, out))
        results["outbox"] = outbox.published(900)
        results["ok"] = results["ok"] and all(d["visible"] == d["marker"] for d in results["outbox"])
    finally:
        if register is not None:
            register.stop()
        service.processes.stop_all()
        store_server.stop(settings)
        if register is not None and not results.get("ok"):
            results["history_file"] = register.dump_failed(out)
        if own_dir:
            shutil.rmtree(workdir, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    (Path(out) / "history.json").write_text(json.dumps(results, indent=1, default=str))
    return results


class Outbox:
    """The documents whose submission the API's fault point kills (one per API kill, each its
    own id in a tenant of their own, so only the API's sweep can ever publish them): their
    version is committed and no message was sent."""

    TENANT = f"{TENANT}-outbox"

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.sent: list[dict] = []

    def submit(self, arm, tries: int = 30) -> str:
        """PUT the next document after ``arm(doc_id)`` armed the fault point for it; returns
        its document id once a PUT got no answer (the API exited). A PUT that was answered (a
        503 while the store restarts, a 429) never reached the point: disarmed, tried again
        2 s later, ``tries`` times at most (then RuntimeError)."""
        from pathweave_ingest.documents import source_doc_id

        n = len(self.sent)
        ext, marker = f"outbox-{n}", f"O{n:04d}"
        doc_id = source_doc_id(self.TENANT, ext)
        for _ in range(tries):
            arm(doc_id)
            try:
                answer = httpx.put(f"{self.url}/v1/documents/{ext}", json=body(ext, marker), timeout=60,
                                   headers={"Authorization": f"Bearer {self.token}"})
            except httpx.HTTPError:  # expected: the API exited before answering
                self.sent.append({"id": ext, "doc_id": doc_id, "marker": marker})
                return doc_id
            arm(None)
            if answer.status_code == 202:  # accepted and published: the point was not reached
                raise RuntimeError(f"the API's fault point did not fire for {doc_id}")
            time.sleep(2.0)
        raise RuntimeError(f"no PUT of {ext} reached the API's fault point in {tries} tries")

    def published(self, timeout: float) -> list[dict]:
        """Each document sent, with the marker it shows (``visible``) once every one shows its
        own or after ``timeout`` s."""
        from pathweave_bench.common import wait_for

        def visible() -> list[dict]:
            with httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60) as c:
                out = []
                for sent in self.sent:
                    response = _call(c, "GET", f"/v1/documents/{sent['doc_id']}")
                    text = " ".join(p["text"] for p in response.json()["passages"]) \
                        if response is not None and response.status_code == 200 else ""
                    out.append({**sent, "visible": _marker(text, sent["id"]) if text else None})
                return out
        try:
            wait_for(lambda: all(d["visible"] == d["marker"] for d in visible()), timeout,
                     "the sweep's publish of the versions the API never sent", interval=1.0)
        except TimeoutError:
            pass
        return visible()


def register_keys(service) -> tuple[str, str]:
    """Ingest-scoped keys (no rate limit) of :data:`TENANT` and of its replay tenant, made in
    ``service``'s store (:meth:`~pathweave_bench.service.Service.create_key`)."""
    return (service.create_key(TENANT, "history", "ingest"),
            service.create_key(f"{TENANT}-replay", "replay", "ingest"))


def _wait_running(client: httpx.Client, history: History, timeout: float) -> None:
    """Until a PUT's version is running (a worker is mid-replacement), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for event in [e for e in list(history.events) if e.kind == "put" and e.job_id and e.outcome is None][-5:]:
            response = _call(client, "GET", f"/v1/jobs/{event.job_id}")
            if response is not None and response.status_code == 200 and \
                    response.json()["documents"][0]["status"] == "running":
                return
        time.sleep(0.05)


def _replay(url: str, token: str, final: dict[str, str | None], external: list[str], settings, same_graph,
            slack: int) -> dict:
    """Ingest the final versions into a fresh tenant through the same API and compare the
    two document graphs."""
    from pathweave.runtime import open_store

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as client:
        jobs = []
        for ext in external:
            if final.get(ext) not in (None, "?"):
                jobs.append(client.put(f"/v1/documents/{ext}", json=body(ext, final[ext])).json()["job_id"])
        deadline = time.monotonic() + 300
        while any(client.get(f"/v1/jobs/{j}").json()["status"] in ("queued", "running") for j in jobs):
            if time.monotonic() > deadline:
                raise TimeoutError("the replay's jobs did not finish")
            time.sleep(0.5)
    with open_store(settings, TENANT) as ran, open_store(settings, f"{TENANT}-replay") as clean:
        counts, reference = ran.document_counts(), clean.document_counts()
    return {"history": counts, "replay": reference, **same_graph(counts, reference, slack=slack)}


def check_rows(results: dict) -> list[tuple[str, str]]:
    """The checker's figures as table rows (``bench history`` and ``bench soak``)."""
    c = results["check"]
    faults = results.get("faults", [])
    return [("PUTs / DELETEs accepted", f"{c['puts']} / {c['deletes']}"), ("reads", str(c["reads"])),
            ("versions by outcome", ", ".join(f"{k} {v}" for k, v in sorted(c["outcomes"].items()))),
            ("kills: worker / store / API before a publish / Redis without its files",
             " / ".join(str(sum(f["fault"] == kind for f in faults)) for kind in FAULT_KINDS)),
            ("writes without an answer", str(c.get("unsure_writes", 0))),
            ("left queued or running", str(len(results.get("left_in_flight", [])))),
            ("accepted, never sent, published by the sweep",
             f"{sum(d['visible'] == d['marker'] for d in results.get('outbox', []))} / {len(results.get('outbox', []))}"),
            ("lost updates", str(c["lost_updates_n"])), ("failed versions", str(c["failed_versions_n"])),
            ("missing windows", str(c["missing_n"])), ("going back", str(c["going_back_n"])),
            ("stale reads", str(c["stale_n"])), ("graph equal to the replay", str(results["graph"]["same"])),
            ("drain (s)", str(results["drain_s"]))]


def print_table(results: dict, console) -> None:
    from rich.table import Table

    table = Table(title=f"History check ({results['backend']}): {results['check']['writes']} versions over "
                        f"{results['ids']} ids")
    table.add_column("what")
    table.add_column("value", justify="right")
    for row in check_rows(results):
        table.add_row(*row)
    console.print(table)


if __name__ == "__main__":  # check a saved history again: python -m pathweave_bench.history FILE
    print(json.dumps(check(History.load(Path(sys.argv[1]))), indent=1))
