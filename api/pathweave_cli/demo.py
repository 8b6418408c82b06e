"""``pathweave demo``: real documents present on any machine after install.

Ingests the long descriptions (READMEs) in the installed packages' metadata
(``*.dist-info/METADATA`` of fastapi, celery, neo4j, spacy, ...) and answers a
few multi-hop questions about them, printing passages, paths and citations, and an
answer written by the LLM (the managed local model server unless ``PATHWEAVE_LLM_BASE_URL``
is set; passages only when no model can be had).
"""

from __future__ import annotations

from importlib import metadata

from rich.console import Console

from pathweave.embedding.embedders import get_query_embedder
from pathweave.query.retriever import Retriever
from pathweave.settings import Settings
from pathweave.runtime import open_store
from pathweave_ingest.loaders import SourceDocument, markdown_to_text

PACKAGES = (
    "fastapi", "starlette", "pydantic", "celery", "kombu", "redis", "neo4j", "spacy", "thinc",
    "sentence-transformers", "transformers", "torch", "scipy", "numpy", "scikit-learn", "ortools",
    "typer", "click", "rich", "uvicorn", "httpx", "arcadedb-embedded",
)

QUESTIONS = (
    "Which library does the web framework built on Starlette use for data validation?",
    "What message broker can the distributed task queue use besides RabbitMQ?",
    "Which Python driver speaks the Bolt protocol to the graph database?",
    "What does the command line library that Typer is based on provide?",
)


def package_documents() -> list[SourceDocument]:
    """One document per installed package with a long description (its README)."""
    documents = []
    for name in PACKAGES:
        try:
            meta = metadata.metadata(name)
        except metadata.PackageNotFoundError:
            continue
        body = markdown_to_text(meta.get_payload() or meta.get("Description") or "")
        if len(body) > 200:
            documents.append(SourceDocument(f"{name}.dist-info/METADATA", meta["Name"], body[:60_000]))
    return documents


def run_demo(settings: Settings) -> None:
    """Ingest the package READMEs (idempotent) and print answers to :data:`QUESTIONS`. The
    store server and the model server the demo started are stopped at the end, however it
    ends; servers that ran before it run on, and the demo says so."""
    from pathweave.servers import store_server
    from pathweave.servers import llm_server
    from pathweave.terminal import stdout_console

    console = stdout_console()
    store_before = store_server.status(settings) is not None
    llm_before = llm_server.status(settings.data_dir) is not None
    try:
        _run(settings, console)
    finally:
        stopped, running = [], []
        for name, before, status, stop in (
                ("store server", store_before, lambda: store_server.status(settings),
                 lambda: store_server.stop(settings)),
                ("model server", llm_before, lambda: llm_server.status(settings.data_dir),
                 lambda: llm_server.stop(settings.data_dir))):
            if status() is None:
                continue
            if before:
                running.append(name)
            elif stop():
                stopped.append(name)
        if stopped:
            console.print(f"[dim]stopped the {' and the '.join(stopped)} the demo started[/]")
        if running:
            console.print(f"[dim]still running, as before the demo: the {' and the '.join(running)} "
                          "(stop: pathweave db stop / pathweave llm stop)[/]")


def _run(settings: Settings, console) -> None:
    from pathweave_cli.render import print_result
    from pathweave_ingest.console import run_ingest

    documents = package_documents()
    console.print(f"[bold]Pathweave demo[/]: {len(documents)} package READMEs from this machine's site-packages")
    with open_store(settings) as store:
        report = run_ingest(store, settings, documents, [], label="ingest READMEs")
        console.print(f"{report.passages_new} new passages, {report.propositions_new} propositions, "
                      f"{report.entities_new} entities ({report.seconds:.1f} s)")
        retriever = Retriever(store, get_query_embedder(settings), settings)
        answering = _llm_ready(retriever, console)
        for question in QUESTIONS:
            if answering:
                # from a 200-token budgeted context: a short prompt, so a CPU answers in seconds
                print_result(retriever.query(question, "proprag", k=3, token_budget=200, answer=True))
            else:
                print_result(retriever.query(question, mode="proprag", k=3))
            console.print()
        retriever.flush()  # reasoning records in the graph before the store closes


def _llm_ready(retriever: Retriever, console: Console) -> bool:
    """Connect the LLM that answers (the managed local server by default); False, with the
    reason and how to enable answers, when there is none."""
    from pathweave.errors import LLMUnavailable
    from pathweave.llm.client import LLMError
    from pathweave.servers.llm_server import LLMServerError

    console.print("[dim]starting the LLM that writes the answers (PATHWEAVE_LLM_*)...[/]")
    try:
        retriever.resources.llm_client().check()
    except (LLMUnavailable, LLMError, LLMServerError) as exc:
        console.print(f"[yellow]no answers, passages only:[/] {exc}")
        return False
    return True
