"""The service's commands: ``pathweave serve`` (the HTTP API), ``pathweave mcp`` (the MCP
tools over stdio), ``pathweave worker``
(a Celery ingestion worker), ``pathweave keys create|list|revoke`` and ``pathweave
explore`` (the reasoning explorer's URL). :mod:`pathweave_cli.main` mounts them.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Optional

import typer
from rich.table import Table

from pathweave.terminal import console, stdout_console


def _key_store():
    """The keys in the configured store (a context manager; the old key file imported first)."""
    from pathweave.settings import get_settings
    from pathweave_api.keys import open_key_store

    return open_key_store(get_settings())


def serve(
    host: Optional[str] = typer.Option(None, help="Bind address (default PATHWEAVE_API_HOST, 127.0.0.1)."),
    port: Optional[int] = typer.Option(None, help="Port (default PATHWEAVE_API_PORT, 8000)."),
    workers: Optional[int] = typer.Option(None, help="uvicorn worker processes (default PATHWEAVE_API_WORKERS, 1)."),
    log_level: str = typer.Option("info", help="uvicorn log level."),
) -> None:
    """Start the HTTP API (FastAPI on uvicorn). Ingestion goes to the broker when
    PATHWEAVE_WORKER_BROKER_URL is set, else to an in-process queue."""
    import uvicorn

    from pathweave_api.protocols import http_protocol
    from pathweave.settings import get_settings, masked

    api = get_settings().api
    # the store is reached (and a managed one started) by the app's warm-up, not here: keys are
    # in the store, so they are listed by `pathweave keys list`, not before the server listens
    console.print("API keys: `pathweave keys create --tenant NAME` (in the store, valid on every replica)")
    broker = masked(get_settings())["worker"]["broker_url"]  # no password on the screen
    queue = "broker " + broker if broker else "in-process queue"
    console.print(f"serving on http://{host or api.host}:{port or api.port} ({queue})")
    uvicorn.run("pathweave_api.app:create_app", factory=True, host=host or api.host,
                port=port if port is not None else api.port, workers=workers or api.workers,
                log_level=log_level, proxy_headers=False, server_header=False, http=http_protocol())


def mcp() -> None:
    """Serve the MCP tools (search, answer, documents, reasoning records, ingest_text) over
    stdio for a local MCP client, as the API key in PATHWEAVE_API_KEY (its tenant, scope and
    principals). Over HTTP, the API serves the same tools at /mcp."""
    import logging

    from pathweave_api.mcp_server import serve_stdio

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)  # stdout carries the protocol alone
    serve_stdio()


def explore(
    query_id: Optional[str] = typer.Argument(None, help="A query id (32 hex, from POST /v1/query); "
                                                        "none: the list of recent queries."),
    url: Optional[str] = typer.Option(None, help="The service's base URL (default http://HOST:PORT from "
                                                 "PATHWEAVE_API_HOST/PORT)."),
    open_browser: bool = typer.Option(False, "--open", help="Open the page in a web browser."),
) -> None:
    """Print the reasoning explorer's URL for QUERY_ID (or the list of queries); the page
    asks once for an API key and keeps it in the tab's session storage."""
    import re
    import webbrowser

    from pathweave_api.explorer import explorer_path
    from pathweave.settings import get_settings

    if query_id is not None and not re.fullmatch(r"[0-9a-f]{32}", query_id):
        console.print(f"[red]error:[/] {query_id!r} is not a query id (32 lowercase hex characters)")
        raise typer.Exit(2)
    if url is None:
        api = get_settings().api
        host = api.host if api.host not in ("0.0.0.0", "::", "") else "127.0.0.1"
        url = f"http://[{host}]:{api.port}" if ":" in host else f"http://{host}:{api.port}"
    page = url.rstrip("/") + explorer_path(query_id)
    sys.stdout.write(page + "\n")
    if open_browser and not webbrowser.open(page):
        console.print("[yellow]no browser could be opened:[/] open the URL above")


def worker(
    pool: Optional[str] = typer.Option(None, help="solo | prefork | threads (default PATHWEAVE_WORKER_POOL, solo)."),
    concurrency: Optional[int] = typer.Option(None, help="Processes/threads of the pool (default 1)."),
    prefetch: Optional[int] = typer.Option(None, help="Messages reserved ahead per process (default 1)."),
    hostname: Optional[str] = typer.Option(None, help="Celery node name (default celery@host)."),
    loglevel: str = typer.Option("INFO", help="Log level."),
) -> None:
    """Start a Celery ingestion worker (needs PATHWEAVE_WORKER_BROKER_URL, e.g. redis://127.0.0.1:6379/0)."""
    for name, value in (("PATHWEAVE_WORKER_POOL", pool), ("PATHWEAVE_WORKER_CONCURRENCY", concurrency),
                        ("PATHWEAVE_WORKER_PREFETCH_MULTIPLIER", prefetch)):
        if value is not None:
            os.environ[name] = str(value)
    from pathweave.settings import get_settings

    get_settings.cache_clear()
    from pathweave_ingest.worker import main

    main(loglevel=loglevel, hostname=hostname)


keys_app = typer.Typer(help="API keys (each bound to one tenant; stored argon2-hashed in the graph store, shared by "
                            "every API replica).", no_args_is_help=True)


@keys_app.command("create")
def keys_create(
    tenant: str = typer.Option(..., help="The tenant the key can read and write."),
    name: str = typer.Option("", help="A label (who or what uses the key)."),
    rate_limit: Optional[float] = typer.Option(None, help="Requests/s for this key (0 = unlimited; "
                                                           "default PATHWEAVE_API_RATE_LIMIT_PER_S)."),
    scope: str = typer.Option("admin", help="query (query and read records) | ingest (also submit, replace, "
                                             "delete documents) | admin (everything)."),
    principals: Optional[str] = typer.Option(None, "--principals", help="What its callers may read: principals, "
                                             "comma-separated (group:finance,user:4711); default: the whole tenant."),
    delegate: bool = typer.Option(False, "--delegate", help="It may ask on behalf of an end user (headers "
                                  "X-Pathweave-On-Behalf-Of or X-Pathweave-Id-Token)."),
    as_json: bool = typer.Option(False, "--json", help="Print {token, key_id, tenant, scope} as JSON."),
) -> None:
    """Create a key and print its token (shown once: it is stored only as a hash)."""
    from pathweave.access import check_principals
    from pathweave_api.keys import check_new_key

    try:
        check_new_key(tenant, rate_limit, scope)  # before the store is opened (or started)
        checked = check_principals(principals, "--principals")
    except ValueError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    with _key_store() as store:
        token, record = store.create(tenant, name, rate_limit, scope, None if checked is None else list(checked),
                                     delegate)
    if as_json:
        sys.stdout.write(json.dumps({"token": token, "key_id": record.key_id, "tenant": record.tenant,
                                     "name": record.name, "scope": record.scope,
                                     "principals": None if record.principals is None else list(record.principals),
                                     "delegate": record.delegate}) + "\n")
        return
    console.print(f"key {record.key_id} for tenant {record.tenant!r} (scope {record.scope}) created; "
                  "the token is shown only now:")
    sys.stdout.write(token + "\n")


@keys_app.command("list")
def keys_list(
    all_keys: bool = typer.Option(False, "--all", help="Include revoked keys."),
    tenant: Optional[str] = typer.Option(None, help="Only this tenant's keys."),
    as_json: bool = typer.Option(False, "--json", help="JSON lines."),
) -> None:
    """List keys (ids, tenants, names; never tokens or hashes)."""
    with _key_store() as store:
        keys = [key for key in store.list(include_revoked=all_keys) if tenant is None or key.tenant == tenant]
    if as_json:
        for key in keys:
            sys.stdout.write(json.dumps({"key_id": key.key_id, "tenant": key.tenant, "name": key.name,
                                         "created_at": key.created_at, "revoked_at": key.revoked_at,
                                         "rate_limit_per_s": key.rate_limit_per_s, "scope": key.scope}) + "\n")
        return
    table = Table("key id", "tenant", "scope", "name", "created", "revoked", "rate limit/s")
    for key in keys:
        table.add_row(key.key_id, key.tenant, key.scope, key.name, key.created_at[:19], (key.revoked_at or "")[:19],
                      "default" if key.rate_limit_per_s is None else f"{key.rate_limit_per_s:g}")
    stdout_console().print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: str = typer.Argument(..., help="The key id (from `keys list`).")) -> None:
    """Revoke a key: every API process refuses it from the next request on."""
    with _key_store() as store:
        revoked = store.revoke(key_id)
    if not revoked:
        console.print(f"[red]error:[/] no active key {key_id}")
        raise typer.Exit(1)
    console.print(f"revoked {key_id}")
