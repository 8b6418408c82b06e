"""Access lists of files from sidecars: a folder's ``.pathweave-acl.toml`` sets the access
list of the documents of its files and of its subfolders' (the nearest sidecar up to the
ingested root wins), so a folder sync keeps documents' access lists as the sidecars say.

The sidecar holds one key, ``acl``: a list of principals (:mod:`pathweave.access`), for
example ``acl = ["group:finance", "user:4711"]``; ``acl = []`` makes the folder's documents
readable only by unrestricted callers. A file no sidecar covers gets the default given (the
CLI's ``--acl``), else none (the tenant's default).
"""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

from pathweave.access import check_principals
from pathweave.errors import BadRequest
from pathweave_ingest.loaders import SourceDocument

SIDECAR = ".pathweave-acl.toml"
"""The sidecar's file name (a hidden file: never ingested itself)."""


def read_sidecar(path: Path) -> tuple[str, ...]:
    """The access list of the sidecar file ``path``. Raises
    :class:`~pathweave.errors.BadRequest` naming the file when it is not TOML, has other
    keys than ``acl``, or names a malformed principal."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise BadRequest(f"{path}: not a readable TOML file ({exc})") from None
    if set(data) != {"acl"} or not isinstance(data["acl"], list):
        raise BadRequest(f"{path}: must hold exactly one key, acl = [\"group:...\", ...]")
    return check_principals(data["acl"], f"{path}: acl") or ()


def with_sidecars(root: Path, documents: list[SourceDocument],
                  default: tuple[str, ...] | None = None) -> list[SourceDocument]:
    """``documents`` (loaded from ``root``, a file or folder) with the access list of the
    nearest sidecar between each file's folder and ``root``, else ``default``. Every
    sidecar is checked before anything is returned (:func:`read_sidecar` raises)."""
    root = root.absolute()
    top = root if root.is_dir() else root.parent
    cache: dict[Path, tuple[str, ...] | None] = {}

    def acl_of(folder: Path) -> tuple[str, ...] | None:
        if folder not in cache:
            sidecar = folder / SIDECAR
            if sidecar.is_file():
                cache[folder] = read_sidecar(sidecar)
            elif folder == top or top not in folder.parents:
                cache[folder] = default
            else:
                cache[folder] = acl_of(folder.parent)
        return cache[folder]

    out = []
    for doc in documents:
        source = Path((doc.key or doc.source).split("#", 1)[0])
        out.append(dataclasses.replace(doc, acl=acl_of(source.absolute().parent)))
    return out
