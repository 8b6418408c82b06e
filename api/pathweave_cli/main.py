"""The ``pathweave`` console script (typer + rich): the top of the dependency graph.

Owns the commands on the store and the documents: ``pathweave db start|stop|status [--all]``,
``pathweave ingest PATH [--extractor llm]``, ``pathweave query "…" [--answer] [--mode
prunerag]``, ``pathweave demo``, ``pathweave config show``; mounts the managed model
server's commands (:mod:`pathweave_cli.llm`: ``llm start|stop|status``), alias
consolidation (:mod:`pathweave_cli.aliases`: ``aliases show|split``), the service
commands (:mod:`pathweave_cli.service`: ``serve``, ``worker``, ``explore``, ``keys``) and
the benchmarks (:mod:`pathweave_bench.cli`: ``bench musique|qa|scale|api|select``) and the
training of learned parts (:mod:`pathweave_cli.train`: ``train selector``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from pathweave.model import MODES
from pathweave_bench.cli import bench_app
from pathweave_cli import service
from pathweave_cli.acl import acl_app
from pathweave_cli.aliases import aliases_app
from pathweave_cli.jobs import jobs_app
from pathweave_cli.llm import llm_app
from pathweave_cli.models import models_app, reembed
from pathweave_cli.train import train_app
from pathweave_cli.render import EventPrinter
from pathweave.terminal import console, stdout_console

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

app = typer.Typer(help="Pathweave: minimal reasoning subgraphs from your documents.", no_args_is_help=True)
db_app = typer.Typer(help="The managed local store server (ArcadeDB, or Neo4j + GDS; Bolt on 127.0.0.1).",
                      no_args_is_help=True)
config_app = typer.Typer(help="The settings (environment PATHWEAVE_* and pathweave.toml).", no_args_is_help=True)
app.add_typer(config_app, name="config")
app.add_typer(db_app, name="db")


def _settings(tenant: str | None = None):
    from pathweave.settings import get_settings

    settings = get_settings()
    return settings.model_copy(update={"tenant": tenant}) if tenant else settings


def toml_lines(values: dict, section: str = "", model: type | None = None) -> list[str]:
    """``values`` (a settings dict) as TOML: plain keys first, then one ``[table]`` per
    nested dict; an unset value (None) as a comment. With ``model`` (the pydantic model the
    values are of), each field's description is a comment line (``# ...``) right above its
    key, and a section's above its ``[table]`` header (the table's model: the field's type)."""
    import json

    fields = getattr(model, "model_fields", {})

    def described(key: str) -> list[str]:
        description = fields[key].description if key in fields else None
        return [f"# {line}".rstrip() for line in description.splitlines()] if description else []

    lines = [f"[{section}]"] if section else []
    tables = {k: v for k, v in values.items() if isinstance(v, dict)}
    for key, value in values.items():
        if key not in tables:
            lines += described(key)
            lines.append(f"# {key} = (unset)" if value is None else f"{key} = {json.dumps(value)}")
    for key, table in tables.items():
        annotation = fields[key].annotation if key in fields else None
        lines += [""] + described(key) + toml_lines(table, f"{section}.{key}" if section else key, annotation)
    return lines


@config_app.command("show")
def config_show() -> None:
    """Print the effective configuration as TOML, each setting under a comment describing it
    (passwords, secrets, API keys and the passwords in URLs masked); exit 2 on a setting that
    does not exist."""
    from pydantic import ValidationError

    from pathweave.settings import Settings, masked

    try:
        values = masked(_settings())
    except (ValueError, ValidationError, FileNotFoundError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    sys.stdout.write("\n".join(toml_lines(values, model=Settings)) + "\n")


@config_app.command("table")
def config_table() -> None:
    """Print the configuration reference (every setting's variable, default and meaning,
    from the settings' descriptions) as Markdown: docs/configuration.md."""
    from pathweave_cli.config_table import settings_table

    sys.stdout.write(settings_table())


BackendOption = typer.Option(
    None, "--backend",
    help="arcadedb or neo4j (Neo4j 5.26 + GDS 2.13, built with Maven on first use); "
         "default: the setting store.backend (PATHWEAVE_STORE_BACKEND)")


def _store_settings(backend: Optional[str]):
    settings = _settings()
    if backend is None:
        return settings
    if backend not in ("arcadedb", "neo4j"):
        console.print(f"[red]error:[/] --backend must be arcadedb or neo4j, not {backend!r}")
        raise typer.Exit(2)
    return settings.model_copy(update={"store": settings.store.model_copy(update={"backend": backend})})


def _describe(info) -> str:
    where = f"pid {info.pid}, bolt {info.bolt_uri}, user {info.user}, database {info.database}"
    if info.backend == "neo4j":
        where += f", Browser {info.http_url}/browser/"
    return f"{info.backend} {where}"


@db_app.command("start")
def db_start(backend: Optional[str] = BackendOption) -> None:
    """Start the managed store server for the configured data directory; it runs until
    ``pathweave db stop``. Use it with ``PATHWEAVE_STORE_BACKEND`` set to the same backend."""
    from pathweave.servers import store_server

    settings = _store_settings(backend)
    info = store_server.start(settings)
    console.print(f"store running: {_describe(info)}")
    if info.backend == "neo4j":
        password = Path(settings.data_dir) / "neo4j" / "password"
        console.print(f"password in {password}; use it with PATHWEAVE_STORE_BACKEND=neo4j")


@db_app.command("stop")
def db_stop(backend: Optional[str] = BackendOption) -> None:
    """Stop the managed store server."""
    from pathweave.servers import store_server

    console.print("stopped" if store_server.stop(_store_settings(backend)) else "no server was running")


@db_app.command("backup")
def db_backup(path: Path = typer.Argument(..., help="The backup file to write (never overwritten): ArcadeDB's zip "
                                                     "or Neo4j's dump."),
              backend: Optional[str] = BackendOption) -> None:
    """Back up the managed store's database into PATH: ArcadeDB online (BACKUP DATABASE:
    queries and ingestion go on); Neo4j with neo4j-admin database dump, the server stopped
    meanwhile (Community has no online backup: queries get 503 with Retry-After)."""
    from pathweave.servers import store_server
    from pathweave.servers.processes import ServerError

    try:
        written = store_server.backup(_store_settings(backend), path)
    except (ValueError, ServerError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    console.print(f"backup written: {written} ({written.stat().st_size / 2**20:.1f} MiB)")


@db_app.command("restore")
def db_restore(path: Path = typer.Argument(..., help="A backup file from `pathweave db backup`."),
               backend: Optional[str] = BackendOption) -> None:
    """Replace the managed store's database with the backup PATH (checked first: a file
    that is no backup changes nothing). Running API processes and workers catch up."""
    from pathweave.servers import store_server
    from pathweave.servers.processes import ServerError

    try:
        store_server.restore(_store_settings(backend), path)
    except (ValueError, ServerError) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    console.print(f"restored from {path}")


@db_app.command("status")
def db_status(backend: Optional[str] = BackendOption,
              all_servers: bool = typer.Option(False, "--all", help="Every managed server on this machine (ArcadeDB, "
                                               "Neo4j, model servers; any data directory) with its owner and RSS.")
              ) -> None:
    """Print whether the managed store server runs (exit 1 if not); with ``--all``, a table of
    every managed server running on this machine (exit 1 if none)."""
    if all_servers:
        _print_managed_servers()
        return
    from pathweave.servers import store_server

    info = store_server.status(_store_settings(backend))
    if info is None:
        console.print("not running")
        raise typer.Exit(1)
    console.print(f"running: {_describe(info)}")


def _print_managed_servers() -> None:
    """``db status --all``: the table of :func:`pathweave.servers.processes.managed_servers`."""
    from rich.table import Table

    from pathweave.servers.processes import managed_servers

    servers = managed_servers()
    if not servers:
        console.print("no managed servers running")
        raise typer.Exit(1)
    table = Table("pid", "kind", "data dir", "ports", "owner", "RSS MiB", title=f"{len(servers)} managed server(s)")
    for server in servers:
        pid = f"{server.pid} (supervisor {server.supervisor})" if server.supervisor not in (None, server.pid) \
            else str(server.pid)
        ports = ", ".join(f"{name} {port}" for name, port in (("bolt", server.bolt_port), ("http", server.http_port),
                                                              ("http", server.port)) if port)
        owner = "none (until stop)" if not server.owner else \
            f"{server.owner} ({'running' if server.owner_alive else 'exited'})"
        where = str(server.data_dir) + ("" if server.directory_exists else " (deleted)")
        table.add_row(pid, server.kind, where, ports or "?", owner, f"{server.rss_mib:.0f}")
    stdout_console().print(table)


@app.command()
def ingest(
    path: Path = typer.Argument(..., help="A .txt/.md/.json/.jsonl/.pdf/.html/.docx file or a directory (recursive)."),
    extraction: Optional[Path] = typer.Option(None, help="Precomputed OpenIE extraction JSON (HippoRAG format)."),
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
    sync: bool = typer.Option(False, "--sync", help="Folder sync: add new files, replace changed ones and remove "
                                                    "the documents whose files are gone from PATH."),
    dry_run: bool = typer.Option(False, "--dry-run", help="With --sync: list what would be added, replaced and "
                                                          "removed; change nothing."),
    extractor: Optional[str] = typer.Option(None, help="spacy (default) | llm (PATHWEAVE_LLM_*: entities, triples, "
                                                       "propositions by the model)."),
    acl: Optional[str] = typer.Option(None, "--acl", help="Access list of the documents no "
                                      ".pathweave-acl.toml sidecar covers: principals, comma-separated "
                                      "(group:finance,user:4711); default: the whole tenant."),
) -> None:
    """Ingest documents: load -> chunk -> extract -> embed -> write (idempotent; a changed file
    replaces its earlier version). A folder's .pathweave-acl.toml (acl = ["group:..."]) sets
    the access list of its files and subfolders."""
    from pathweave.embedding.embedder_record import EmbedderMismatch
    from pathweave.embedding.embedders import get_query_embedder
    from pathweave.runtime import open_store
    from pathweave.access import check_principals
    from pathweave.errors import BadRequest
    from pathweave_ingest.acl_sidecars import with_sidecars
    from pathweave_ingest.console import run_ingest
    from pathweave_ingest.loaders import load_path
    from pathweave_ingest.plan import sync_plan

    settings = _settings(tenant)
    if extractor:
        settings = settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"extractor": extractor})})
    if dry_run and not sync:
        console.print("[red]error:[/] --dry-run needs --sync")
        raise typer.Exit(2)
    if sync and not path.is_dir():
        console.print(f"[red]error:[/] --sync needs a directory, got {path}")
        raise typer.Exit(2)
    try:
        documents, errors = load_path(path, settings.ingest.max_file_bytes)
        documents = with_sidecars(path, documents, check_principals(acl, "--acl"))
    except (FileNotFoundError, BadRequest) as exc:
        console.print(f"[red]error:[/] {exc}", soft_wrap=True)  # a long path must not split the reason
        raise typer.Exit(2)
    with open_store(settings) as store:
        remove = None
        if sync:
            plan = sync_plan(store, path, documents, errors)
            if dry_run:
                out = stdout_console()
                for label, part in (("add", plan.new), ("replace", plan.changed), ("acl", plan.acl),
                                    ("keep", plan.unchanged)):
                    for _, doc in part:
                        out.print(f"{label:8} {doc.key or doc.source}", soft_wrap=True, markup=False)
                for row in plan.removed:
                    out.print(f"{'remove':8} {row['source']}", soft_wrap=True, markup=False)
                for error in errors:
                    console.print(f"[yellow]skip[/]     {error}", soft_wrap=True)
                out.print(f"dry run: {len(plan.new)} to add, {len(plan.changed)} to replace, "
                          f"{len(plan.acl)} to get a new access list, "
                          f"{len(plan.removed)} to remove, {len(plan.unchanged)} unchanged; nothing written")
                return
            remove = [row["doc_id"] for row in plan.removed]
        try:
            report = run_ingest(store, settings, documents, errors, extraction, remove=remove)
        except EmbedderMismatch as exc:  # nothing was written
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2)
    get_query_embedder(settings)  # exports the query embedder once (ONNX): the first query is as quick as the next
    for error in report.errors:
        console.print(f"[yellow]skipped[/] {error}", soft_wrap=True)  # a long path must not split the reason
    for warning in report.warnings:
        console.print(f"[yellow]warning[/] {warning}", soft_wrap=True)
    console.print(
        f"documents: {report.outcome()}; {report.passages_new} new passages, "
        f"{report.propositions_new} propositions, {report.entities_new} entities, {report.triples} triples, "
        f"{report.synonym_edges} synonym edges, {report.alias_changes} alias changes in {report.seconds:.1f} s "
        f"({report.passages_per_s:.1f} passages/s)"
    )
    if report.errors and not report.documents_new and not report.documents:
        raise typer.Exit(1)


@app.command()
def query(
    question: str = typer.Argument(..., help="The question."),
    mode: str = typer.Option(MODES[0], help=" | ".join(MODES) + " (prunerag: an LLM decomposition tree)"),
    k: int = typer.Option(5, min=1, max=100, help="Passages to return."),
    as_json: bool = typer.Option(False, "--json", help="Print the full result as JSON."),
    budget: Optional[int] = typer.Option(None, min=0, help="Token budget: also select the best connected context."),
    select: Optional[str] = typer.Option(None, help="Context selection, with --budget: ilp | greedy | auto (default)."),
    style: Optional[str] = typer.Option(None, help="Context rendering, with --budget: bullets (default) | triples."),
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
    answer: bool = typer.Option(False, "--answer", help="Also generate an answer with the LLM (PATHWEAVE_LLM_*), "
                                                        "citing the passages (or budgeted context) it used: printed "
                                                        "as the model writes it (with --json: the short answer)."),
    session_id: Optional[str] = typer.Option(None, "--session-id",
                                             help="A session: evidence it was already sent is referenced by code, not "
                                                  "re-sent (with --budget; mode apr: its runs)."),
    as_principals: Optional[str] = typer.Option(None, "--as", help="Answer as a caller with these principals, "
                                                "comma-separated (group:finance,user:4711): only the documents they "
                                                "may read take part; default: every document of the tenant."),
) -> None:
    """Answer a question with ranked passages and the proposition paths that connect them."""
    from pathweave.embedding.embedder_record import EmbedderMismatch, ReembedInProgress
    from pathweave.access import Access
    from pathweave.errors import BadRequest, LLMUnavailable
    from pathweave.query.modes import needs_llm
    from pathweave.retrieval.request import QueryRequest
    from pathweave.runtime import QueryRuntime

    try:  # checked before the store opens: a bad request fails fast and changes nothing
        request = QueryRequest.of(question, mode=mode, k=k, token_budget=budget, selection_method=select,
                                  context_style=style, session_id=session_id, answer=answer)
        access = Access.of(as_principals)
        if as_principals is not None and not access.restricted:
            access = Access(frozenset())
    except BadRequest as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    settings = _settings(tenant)
    runtime = QueryRuntime(settings)  # what the API keeps per process, for one question
    try:
        try:
            if needs_llm(request):
                runtime.llm_client()  # the model first: one that cannot be had is said before the store opens
            retriever = runtime.retriever(settings.tenant)
            # each event printed as it happens (the answer as the model writes it), or the whole result as JSON
            result = retriever.query(request, access=access, on_event=None if as_json else EventPrinter())
        except (BadRequest, LLMUnavailable, EmbedderMismatch, ReembedInProgress) as exc:  # bad input; no model;
            # another embedder's tenant, or one being re-embedded
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2)
    finally:
        runtime.close()  # the reasoning record is in the graph before the store closes
    if as_json:
        sys.stdout.write(result.model_dump_json(indent=2) + "\n")


@app.command()
def demo(tenant: str = typer.Option("demo", help="Tenant for the demo documents.")) -> None:
    """Ingest the READMEs of installed packages and answer multi-hop questions about them."""
    from pathweave_cli.demo import run_demo

    run_demo(_settings(tenant))


app.command("serve")(service.serve)
app.command("mcp")(service.mcp)
app.command("worker")(service.worker)
app.command("explore")(service.explore)
app.add_typer(service.keys_app, name="keys")
app.add_typer(llm_app, name="llm")
app.add_typer(bench_app, name="bench")
app.add_typer(aliases_app, name="aliases")
app.add_typer(acl_app, name="acl")
app.add_typer(jobs_app, name="jobs")
app.add_typer(train_app, name="train")
app.add_typer(models_app, name="models")
app.command("reembed")(reembed)

if __name__ == "__main__":
    app()
