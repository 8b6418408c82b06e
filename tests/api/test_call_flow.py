"""How a question travels: followed through its calls from the CLI's ``query`` and the API's
``POST /v1/query``, a question of every mode, as one body and streamed, enters the core once
(``Retriever.run``), returns to no file it has left more than once, and never passes
through ``ingest/``; the route, the CLI and the MCP tools branch on no mode.

"Returns to a file it has left": a call into a file of Pathweave that is already on the call
stack below another of Pathweave's files (A -> B -> A: a mode reaching back into its
dispatcher). Calls into libraries are transparent; their callbacks into Pathweave count.
Traced with ``sys.setprofile`` on the calling thread and every thread started meanwhile (the
API's route runs on a worker thread of a fresh app; the process's vector-search pool, started
earlier, is not followed), on the real store and models. The app's own background threads
(named ``pathweave-*``: warm-up, reaper, ingestion queue) are not the question's path."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from typer.testing import CliRunner

from pathweave.model import RETRIEVAL_ONLY

from pathweave_cli.main import app as cli_app

ROOT = Path(__file__).resolve().parents[2]
SOURCES = tuple(str(ROOT / part) + "/" for part in ("platform", "api", "ingest"))
QUESTION = "Which river flows through the city where Marie Curie was born?"


class CallFlow:
    """Per thread, the stack of Pathweave's files on the call stack; ``returns[file]`` counts
    the calls into ``file`` while it was already on the stack below another file, ``files``
    every file a call entered."""

    def __init__(self) -> None:
        self.stacks: dict[int, list[str | None]] = {}
        self.returns: dict[str, set[str]] = {}
        self.files: set[str] = set()
        self.runs = 0  # calls of Retriever.run, the core's one entry of a query
        self.active = True  # counting (the stacks are kept either way)

    def __call__(self, frame, event: str, arg) -> None:
        if event not in ("call", "return") or threading.current_thread().name.startswith("pathweave-"):
            return
        stack = self.stacks.setdefault(threading.get_ident(), [])
        if event == "return":
            if stack:
                stack.pop()
            return
        name = frame.f_code.co_filename
        own = name.startswith(SOURCES) and "/tests/" not in name
        if own and self.active and frame.f_code.co_qualname == "Retriever.run":
            self.runs += 1
        if own and self.active:
            ours = [f for f in stack if f is not None]
            if ours and ours[-1] != name and name in ours:
                self.returns.setdefault(name, set()).add(f"{frame.f_code.co_qualname} <- {Path(ours[-1]).name}")
            self.files.add(name)
        stack.append(name if own else None)

    def __enter__(self) -> CallFlow:
        threading.setprofile(self)
        sys.setprofile(self)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]

    def report(self) -> str:
        return "; ".join(f"{Path(f).relative_to(ROOT)}: {sorted(names)}" for f, names in self.returns.items())


def _check(flow: CallFlow) -> None:
    assert flow.files, "nothing traced"
    assert not [f for f in flow.files if f.startswith(str(ROOT / "ingest") + "/")], sorted(flow.files)
    assert all(len(names) <= 1 for names in flow.returns.values()), flow.report()


def test_a_question_from_the_cli_returns_to_no_file_more_than_once(client, new_tenant, ingest, docs):
    tenant, headers = new_tenant("flow-cli")
    assert ingest(headers, docs["core"])["status"] == "done"
    runner = CliRunner()
    for mode in RETRIEVAL_ONLY:
        args = ["query", QUESTION, "--tenant", tenant, "--json", "--mode", mode]
        assert runner.invoke(cli_app, args).exit_code == 0  # warm: the topology view and its derived graphs
        with CallFlow() as flow:
            result = runner.invoke(cli_app, args + (["--budget", "200"] if mode != "apr" else []))
        assert result.exit_code == 0, result.output
        assert any(f.endswith("/pathweave_cli/main.py") for f in flow.files)
        _check(flow)


STREAMED = {"answer": True, "stream": True}


def test_a_question_through_the_api_returns_to_no_file_more_than_once(
        new_tenant, ingest, docs, settings, api_settings, worker_settings, runtime, monkeypatch):
    """Every mode, as one JSON body and as a stream (an answer streamed token by token, a
    PruneRAG tree node by node; the model's replies scripted): the request enters the core
    once (``Retriever.run``) and returns to no file it has left more than once."""
    from fastapi.testclient import TestClient

    from llm_scripted import ScriptedClient, two_level_tree
    from pathweave.model import MODES
    from pathweave_api.app import create_app

    tenant, headers = new_tenant("flow-api")
    assert ingest(headers, docs["core"])["status"] == "done"
    bodies = [{"mode": mode, **({"token_budget": 200} if mode in ("proprag", "dense") else {})}
              for mode in RETRIEVAL_ONLY]
    bodies += [{"mode": "proprag", **STREAMED}, {"mode": "prunerag", "stream": True}]
    assert {body["mode"] for body in bodies} == set(MODES)
    for body in bodies:
        replies = two_level_tree() if body["mode"] == "prunerag" else ['Warsaw lies on the Vistula [1].']
        monkeypatch.setattr(runtime, "_llm", ScriptedClient(replies))
        with CallFlow() as flow:
            flow.active = False
            # a fresh app under the profiler: its worker threads start traced; counted: the request
            with TestClient(create_app(settings, api_settings, worker_settings, runtime=runtime)) as fresh:
                flow.active = True
                response = fresh.post("/v1/query", headers=headers, json={"question": QUESTION, **body})
                flow.active = False
        assert response.status_code == 200, (body, response.text)
        if body.get("stream"):
            assert "event: answer" in response.text, response.text[-500:]
        assert flow.runs == 1, (body, flow.runs)
        assert any(f.endswith("/routers/query.py") for f in flow.files)
        assert any(f.endswith("/query/retriever.py") for f in flow.files)
        _check(flow)


def test_the_route_the_cli_and_the_mcp_tools_have_no_mode_of_their_own():
    """What a mode does is the core's (its strategy, :meth:`Retriever.run`): the query route,
    the CLI's commands and the MCP tools read no mode's capabilities and compare no mode's
    name, so a new mode is one strategy module and its registration."""
    import ast

    from pathweave.model import MODES

    capabilities = {"has_steps", "answers_itself", "needs_llm"}
    found = []
    for part in ("api/pathweave_api/routers/query.py", "api/pathweave_cli/main.py", "api/pathweave_cli/render.py",
                 "api/pathweave_api/mcp_server.py"):
        for node in ast.walk(ast.parse((ROOT / part).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in capabilities:
                found.append(f"{part}:{node.lineno} .{node.attr}")
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "strategy":
                found.append(f"{part}:{node.lineno} strategy(...)")
            if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in MODES
                                                     for c in [node.left, *node.comparators]):
                found.append(f"{part}:{node.lineno} compares a mode's name")
    assert found == []


def _check_ingestion(flow: CallFlow) -> None:
    assert any(f.endswith("/pathweave_ingest/pipeline.py") for f in flow.files), sorted(flow.files)
    assert all(len(names) <= 1 for names in flow.returns.values()), flow.report()


def test_an_ingestion_from_the_cli_returns_to_no_file_more_than_once(base_store, tmp_path):
    """``pathweave ingest``: load -> chunk -> extract -> embed -> the group's write transaction."""
    import uuid

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "docs"
    tenant = f"flow-ingest-{uuid.uuid4().hex[:8]}"
    runner = CliRunner()
    with CallFlow() as flow:
        result = runner.invoke(cli_app, ["ingest", str(fixtures), "--tenant", tenant])
    assert result.exit_code == 0, result.output
    _check_ingestion(flow)


def test_a_queued_version_returns_to_no_file_more_than_once(new_tenant, runtime, worker_settings):
    """The queue's path (``POST /v1/documents`` accepted a version, a worker runs its batch):
    claim under a lease -> pipeline -> fence + atomic swap -> done, traced on this thread."""
    from pathweave_ingest import jobs
    from pathweave_ingest.loaders import SourceDocument
    from pathweave_ingest.tasks import run_batch

    tenant, _ = new_tenant("flow-queue")
    store = runtime.store(tenant)
    doc = SourceDocument("api", "Flow", "Marie Curie was born in Warsaw. The Vistula flows through Warsaw.",
                         key="flow-1")
    job_id = jobs.new_job_id()
    batch = jobs.create_job(store, job_id, jobs.payloads(tenant, [doc]), 8, "inprocess").to_enqueue
    with CallFlow() as flow:
        outcome = run_batch(runtime, tenant, job_id, batch)
    assert outcome.done == [batch[0]["doc_id"]]
    _check_ingestion(flow)
