"""``pathweave models list|fetch`` (the catalog embedders, :mod:`pathweave.embedding.catalog`)
and ``pathweave reembed`` (switch a tenant's vectors to another embedder,
:mod:`pathweave_ingest.reembed`)."""

from __future__ import annotations

from typing import Optional

import typer

from pathweave.terminal import console, progress_bar, stdout_console

models_app = typer.Typer(help="The catalog embedders (ONNX exports from Maven Central), installed by `make install`.",
                         no_args_is_help=True)


@models_app.command("list")
def models_list() -> None:
    """The catalog embedders: name, whether installed, pooling, prefixes, description."""
    from pathweave.embedding.catalog import CATALOG
    from pathweave.settings import get_settings

    settings = get_settings().models
    out = stdout_console()
    for model in CATALOG.values():
        mark = "installed" if model.installed(settings.models_path) else "missing"
        default = " (configured)" if model.name == settings.embedder else ""
        out.print(f"{model.name:15} {mark:9} {model.pooling:4} {model.coordinates}  {model.description}{default}",
                  markup=False, soft_wrap=True)


@models_app.command("fetch")
def models_fetch(names: Optional[list[str]] = typer.Argument(None, help="Catalog names (default: all).")) -> None:
    """Fetch catalog embedders into the models directory (checksum verified; once)."""
    from pathweave.embedding.catalog import CATALOG, UnknownEmbedder, fetch
    from pathweave.settings import get_settings

    settings = get_settings().models
    for name in names or list(CATALOG):
        try:
            path = fetch(name, settings.models_path, settings.maven_repository)
        except (UnknownEmbedder, RuntimeError) as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2)
        console.print(f"{name}: {path}")


def reembed(
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
    to: Optional[str] = typer.Option(None, help="The embedder to switch to (default: PATHWEAVE_MODELS_EMBEDDER)."),
) -> None:
    """Re-embed a tenant's vectors with another embedder, in place (resumable: run it again
    after an interruption). Queries and ingestion of the tenant wait meanwhile (503)."""
    from pathweave.embedding.embedder_record import EmbedderMismatch
    from pathweave.embedding.catalog import ModelNotInstalled, UnknownEmbedder
    from pathweave.embedding.embedders import get_embedder
    from pathweave.settings import get_settings
    from pathweave.runtime import open_store
    from pathweave_ingest.reembed import reembed as run

    settings = get_settings()
    settings = settings.with_embedder(to) if to else settings
    if tenant:
        settings = settings.model_copy(update={"tenant": tenant})
    try:
        embedder = get_embedder(settings)
    except (UnknownEmbedder, ModelNotInstalled) as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2)
    with open_store(settings) as store, progress_bar() as bar:
        task = bar.add_task(f"re-embed {settings.tenant} with {embedder.name}", total=None, rate="")
        try:
            report = run(store, embedder, settings,
                         on_progress=lambda label, done: bar.update(task, advance=1, rate=f"{label} {done}"))
        except (EmbedderMismatch, ValueError) as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2)
    done = ", ".join(f"{n} {label}" for label, n in report.vectors.items() if n)
    console.print(f"tenant {settings.tenant}: {report.source} -> {report.target}; re-embedded {done or 'nothing'}; "
                  f"{report.synonyms} synonym pairs, {report.aliases} alias changes"
                  + (f" (resumed at {report.resumed_from})" if report.resumed_from else ""))
