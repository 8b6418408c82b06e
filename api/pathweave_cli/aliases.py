"""``pathweave aliases show|split`` (typer + rich): inspect and undo alias consolidation
(spec §3 "Entity consolidation", :mod:`pathweave_ingest.aliases`). :mod:`pathweave_cli.main`
mounts :data:`aliases_app`."""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from pathweave.terminal import console

aliases_app = typer.Typer(help="Alias groups of entities (ALIAS_OF): show them, undo a merge.", no_args_is_help=True)


def _store(tenant: str | None):
    from pathweave.settings import get_settings
    from pathweave.runtime import open_store

    settings = get_settings()
    return open_store(settings.model_copy(update={"tenant": tenant}) if tenant else settings)


@aliases_app.command("show")
def aliases_show(
    entity: Optional[str] = typer.Argument(None, help="Only the group of this entity (id or name)."),
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
    limit: int = typer.Option(50, min=1, help="Groups to print (largest first)."),
    ids: bool = typer.Option(False, "--ids", help="Also print the entity ids."),
) -> None:
    """Print the alias groups: canonical entity, its aliases with their cosine to it and the
    layer that merged them (knn | kmeans). Exit 2 when ENTITY names no entity."""
    from pathweave_ingest.aliases import describe_groups

    with _store(tenant) as store:
        try:
            groups = describe_groups(store, entity)
        except LookupError as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2)
    if not groups:
        console.print(f"no alias groups{f' for {entity!r}' if entity else ''}")
        return
    table = Table(title=f"{len(groups)} alias group(s), {sum(len(g.aliases) for g in groups)} alias(es)")
    columns = ("canonical", "alias", "cosine", "method") + (("canonical id", "alias id") if ids else ())
    for column in columns:
        table.add_column(column, overflow="fold")
    for group in groups[:limit]:
        for i, (alias_id, name, score, method) in enumerate(group.aliases):
            first = i == 0
            table.add_row(group.name if first else "", name, f"{score:.3f}", method,
                          *((group.canonical if first else "", alias_id) if ids else ()),
                          end_section=i == len(group.aliases) - 1)
    console.print(table)


@aliases_app.command("split")
def aliases_split(
    entity: str = typer.Argument(..., help="An alias (split off alone) or a canonical entity (whole group)."),
    tenant: Optional[str] = typer.Option(None, help="Tenant (default from settings)."),
) -> None:
    """Undo a merge: remove the ALIAS_OF edge of ENTITY, or of its whole group when it is the
    canonical. The entities split off are not merged again by later ingestion. Exit 2 when
    ENTITY names no entity or is in no group (nothing changes)."""
    from pathweave_ingest.aliases import split

    with _store(tenant) as store:
        try:
            off = split(store, entity)
        except (LookupError, ValueError) as exc:
            console.print(f"[red]error:[/] {exc}")
            raise typer.Exit(2)
    console.print(f"split off {len(off)} entit{'y' if len(off) == 1 else 'ies'}: " + ", ".join(off))
