"""An index knows its embedder: the tenant's store records the embedder its
vectors came from (name, dimension, identity: :mod:`cypher/embedder.cypher`, on the tenant's
Meta node), and a process with another embedder is refused before it writes or searches.

- Ingestion calls :func:`claim` before its first write: a tenant without a record gets the
  ingesting embedder's; a tenant with another one is refused (:class:`EmbedderMismatch`).
- Queries call :func:`check` (once per graph version a query process sees: re-embedding
  bumps the version).
- A tenant written before embedders were recorded holds vectors of all-MiniLM-L6-v2, the
  only embedder then: it reads as ``minilm``.
- While ``pathweave reembed`` rewrites a tenant's vectors (``reembed_to`` set), queries and
  ingestion get :class:`ReembedInProgress` (the API answers 503 with Retry-After; a worker
  fails the batch with that reason), since the tenant's vectors are of two models; each
  ingestion group checks the record inside its write transaction (:func:`guard`).
"""

from __future__ import annotations

from dataclasses import dataclass

from pathweave.errors import PathweaveError

LEGACY = "minilm"
"""What a tenant without a record was embedded with."""


class EmbedderMismatch(PathweaveError, ValueError):
    """The process's embedder is not the one the tenant's vectors came from (API 409)."""


class ReembedInProgress(PathweaveError, RuntimeError):
    """The tenant's vectors are being re-embedded: retry when ``pathweave reembed`` is done (API
    503 ``reembed-in-progress`` with Retry-After; not a lost store, so nothing reconnects)."""


@dataclass(frozen=True)
class EmbedderRecord:
    """A tenant's recorded embedder: ``name``, ``dim`` (vector size), ``identity`` (artifact
    and version, or the model's name), and ``reembed_to`` while being re-embedded."""

    name: str
    dim: int
    identity: str
    reembed_to: str | None = None
    reembed_cursor: str | None = None
    recorded: bool = True  # False: a tenant from before records (read as MiniLM)


def read(store) -> EmbedderRecord | None:
    """The tenant's record (a legacy tenant with passages: :data:`LEGACY`; None: nothing
    ingested yet)."""
    rows = store.run("embedder_record", meta_id=store.meta_id)
    row = rows[0] if rows else None
    if row is None:  # no Meta node: nothing was ever ingested (ingestion creates it first)
        return None
    if row["name"]:
        return EmbedderRecord(row["name"], int(row["dim"] or 0), row["identity"] or row["name"], row["reembed_to"],
                              row["reembed_cursor"])
    if store.run("tenant_any_passage"):
        return EmbedderRecord(LEGACY, 384, "all-MiniLM-L6-v2", row["reembed_to"], row["reembed_cursor"],
                              recorded=False)
    return None


def _refuse(store, record: EmbedderRecord, embedder) -> None:
    if record.reembed_to is not None:
        raise ReembedInProgress(f"tenant {store.tenant!r} is being re-embedded from {record.name} to "
                                f"{record.reembed_to}: retry when `pathweave reembed` is done")
    identity = getattr(embedder, "identity", embedder.name)
    catalog = hasattr(embedder, "catalog_model") and ":" in record.identity  # both a catalog export
    if record.name != embedder.name or (record.dim and record.dim != embedder.dim) or (
            catalog and record.identity != identity):
        assumed = "" if record.recorded else " (no record: a tenant from before records, assumed MiniLM)"
        raise EmbedderMismatch(
            f"tenant {store.tenant!r} holds vectors of embedder {record.name}{assumed} [{record.identity}, "
            f"{record.dim}-d], but this process embeds with {embedder.name} [{identity}, {embedder.dim}-d]: "
            f"set PATHWEAVE_MODELS_EMBEDDER={record.name}, or "
            f"switch the tenant with `pathweave reembed --tenant {store.tenant}` (to {embedder.name})")


def claim(store, embedder) -> EmbedderRecord:
    """Before ingestion writes vectors: record ``embedder`` (``name``, ``dim``, ``identity``) for
    a tenant that has none (atomically: of two first ingestions with different embedders, the
    second is refused), or check it against the record. Raises :class:`EmbedderMismatch`,
    :class:`ReembedInProgress`."""
    record = read(store)
    if record is not None and not record.recorded:  # a tenant from before records: MiniLM's
        _refuse(store, record, embedder)
    if record is None or not record.recorded:
        row = store.run("claim_embedder", meta_id=store.meta_id, embedder=embedder.name, dim=int(embedder.dim),
                        identity=getattr(embedder, "identity", embedder.name))[0]
        record = EmbedderRecord(row["name"], int(row["dim"] or 0), row["identity"] or row["name"], row["reembed_to"])
    _refuse(store, record, embedder)
    return record


def guard(run, store, embedder) -> None:
    """Inside an ingestion group's write transaction (``run``: the transaction's statement
    runner, :meth:`pathweave.store.graph_store.GraphStore.execute_write`): refuse the group when the tenant
    is no longer on ``embedder`` or is being re-embedded, so the transaction writes nothing.
    The record stays locked until the transaction commits (a re-embedding that starts
    meanwhile waits for it). Raises :class:`EmbedderMismatch` / :class:`ReembedInProgress`."""
    if not run("embedder_guard", meta_id=store.meta_id, embedder=embedder.name):
        record = read(store)
        if record is not None:
            _refuse(store, record, embedder)
        raise EmbedderMismatch(f"tenant {store.tenant!r} has no embedder record any more; ingest again")


def check(store, embedder) -> None:
    """Before a query searches: the tenant's vectors must be ``embedder``'s (a tenant with no
    record has nothing to search and passes). Raises :class:`EmbedderMismatch`,
    :class:`ReembedInProgress`."""
    record = read(store)
    if record is not None:
        _refuse(store, record, embedder)
