"""Named Cypher statements, loaded by name from the ``*.cypher`` files.

File format: each statement starts with a header comment ``// name: NAME``,
followed by ``//`` comment lines that document it, then the statement itself
(parameters only as ``$name``; values are never formatted into the text).
Statements end at the next header or the end of the file. A trailing ``;``
is stripped.

The files are the repository's ``cypher/`` folder, which the store package links as
``pathweave/store/cypher`` and every wheel ships as package data, so an installed Pathweave
finds them with no setting.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

_HEADER = re.compile(r"^//\s*name:\s*([A-Za-z0-9_]+)\s*$", re.MULTILINE)
_WRITES = re.compile(r"\b(CREATE|MERGE|SET|DELETE|REMOVE|DROP|DETACH)\b", re.IGNORECASE)
_OWN_TRANSACTIONS = re.compile(r"\bIN\s+TRANSACTIONS\b", re.IGNORECASE)


def cypher_dir() -> Path:
    """The folder holding ``*.cypher`` files (raises FileNotFoundError if the installation
    lacks it)."""
    path = Path(__file__).resolve().parent / "cypher"
    if not path.is_dir():
        raise FileNotFoundError(f"cypher folder not found at {path}: the installation lacks its package data")
    return path


class Statement(NamedTuple):
    """One named statement of a ``.cypher`` file: ``name``; ``title``, the comment line just
    above its header (a saved Browser query's name), else ``""``; ``doc``, the comment lines
    under its header (without ``//``); ``body``, the statement without comments or ``;``."""

    name: str
    title: str
    doc: str
    body: str


def documented(text: str, source: str = "<text>") -> list[Statement]:
    """Split one ``.cypher`` file into its statements in file order, with their comments.

    Raises ValueError on a duplicate name or a statement with no body.
    """
    statements: list[Statement] = []
    matches = list(_HEADER.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        before = text[matches[index - 1].end() if index else 0:match.start()].rstrip().splitlines()
        title = before[-1].strip()[2:].strip() if before and before[-1].strip().startswith("//") else ""
        lines = [line.strip() for line in text[match.end():end].splitlines() if line.strip()]
        doc = []
        for line in lines:
            if not line.startswith("//"):
                break
            doc.append(line[2:].strip())
        body = "\n".join(line for line in text[match.end():end].splitlines()
                         if line.strip() and not line.strip().startswith("//")).strip().rstrip(";").strip()
        name = match.group(1)
        if not body:
            raise ValueError(f"{source}: statement {name!r} has no body")
        if any(s.name == name for s in statements):
            raise ValueError(f"{source}: duplicate statement name {name!r}")
        statements.append(Statement(name, title, "\n".join(doc), body))
    return statements


def parse(text: str, source: str = "<text>") -> dict[str, str]:
    """Split one ``.cypher`` file into ``{name: statement}`` (comments removed).

    Raises ValueError on a duplicate name or a statement with no body.
    """
    return {s.name: s.body for s in documented(text, source)}


@lru_cache(maxsize=4)
def load_all(directory: str | None = None) -> dict[str, str]:
    """All statements of every ``*.cypher`` file directly in the folder, by name.

    Sub-folders (e.g. ``cypher/browser/`` saved queries) are not loaded.
    Raises ValueError when two files define the same name.
    """
    folder = Path(directory) if directory else cypher_dir()
    statements: dict[str, str] = {}
    for path in sorted(folder.glob("*.cypher")):
        for name, body in parse(path.read_text(encoding="utf-8"), str(path)).items():
            if name in statements:
                raise ValueError(f"{path}: statement {name!r} already defined in another file")
            statements[name] = body
    return statements


@lru_cache(maxsize=1024)
def access_mode(name: str) -> str:
    """How statement ``name`` runs: ``"read"`` (no clause that writes: a managed read
    transaction, which a cluster may serve from a follower), ``"write"`` (CREATE, MERGE, SET,
    DELETE, REMOVE, DROP: a managed write transaction on the leader) or ``"auto"`` (``CALL {…}
    IN TRANSACTIONS`` commits its own batches: an auto-commit transaction). KeyError as
    :func:`statement`."""
    text = statement(name)
    if _OWN_TRANSACTIONS.search(text):
        return "auto"
    return "write" if _WRITES.search(text) else "read"


#: The test suite's record of the statements run (``PATHWEAVE_TEST_CYPHER_TRACE``: a file
#: every process appends each name it runs to, once), so the Neo4j run can check that
#: every statement of ``cypher/`` was executed there.
_TRACE = os.environ.get("PATHWEAVE_TEST_CYPHER_TRACE")
_traced: set[str] = set()


def statement(name: str) -> str:
    """The Cypher text of statement ``name`` (KeyError with the known names if absent)."""
    statements = load_all()
    try:
        text = statements[name]
    except KeyError:
        raise KeyError(f"no Cypher statement named {name!r} in {cypher_dir()}") from None
    if _TRACE and name not in _traced:
        _traced.add(name)
        with open(_TRACE, "a", encoding="utf-8") as handle:
            handle.write(name + "\n")
    return text
