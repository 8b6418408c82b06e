"""``pathweave acl set`` (typer + rich): change documents' access lists
without re-ingesting them (:func:`pathweave_ingest.lifecycle.set_acl`; effective for the
next query). :mod:`pathweave_cli.main` mounts :data:`acl_app`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from pathweave.terminal import console

acl_app = typer.Typer(help="Documents' access lists: who may read them.", no_args_is_help=True)


def _doc_id(tenant: str, document: str) -> str:
    """A document id as given (``doc:...``), or the id of the document of a file path."""
    from pathweave_ingest.documents import source_doc_id

    if document.startswith("doc:"):
        return document
    return source_doc_id(tenant, str(Path(document).absolute()))


@acl_app.command("set")
def acl_set(
    document: str = typer.Argument(..., help="A document id (doc:...) or the path of an ingested file."),
    acl: Optional[str] = typer.Option(None, "--acl", help="Principals, comma-separated (group:finance,user:4711)."),
    public: bool = typer.Option(False, "--public", help="Readable by the whole tenant (no access list)."),
    private: bool = typer.Option(False, "--private", help="Readable only by callers without principals."),
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
) -> None:
    """Set a document's access list (exactly one of --acl, --public, --private). Exit 2 on a
    malformed principal or an unknown document (nothing changed)."""
    from pathweave.access import check_principals
    from pathweave.errors import BadRequest
    from pathweave.runtime import open_store
    from pathweave.settings import get_settings
    from pathweave_ingest.lifecycle import NoSuchDocument, set_acl

    if sum((acl is not None, public, private)) != 1:
        console.print("[red]error:[/] give exactly one of --acl, --public, --private")
        raise typer.Exit(2)
    try:
        principals = None if public else ([] if private else list(check_principals(acl, "--acl") or ()))
    except BadRequest as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    settings = get_settings()
    settings = settings.model_copy(update={"tenant": tenant}) if tenant else settings
    with open_store(settings) as store:
        doc_id = _doc_id(store.tenant, document)
        try:
            done = set_acl(store, doc_id, principals)
        except NoSuchDocument:
            console.print(f"[red]error:[/] no document {document!r} in tenant {store.tenant!r}")
            raise typer.Exit(2)
    shown = "the whole tenant" if done["acl"] is None else (", ".join(done["acl"]) or "unrestricted callers only")
    sys.stdout.write(f"{doc_id}: readable by {shown} (graph version {done['version']})\n")
