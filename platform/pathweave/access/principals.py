"""Who may read what inside a tenant: documents' access lists and callers' principals.

A document carries an access list (``acl``): principals such as ``group:finance`` or
``user:4711``. No access list (None) means the whole tenant may read it; an empty list
means nobody but an unrestricted caller (an administrator) may. A caller carries an
:class:`Access`: unrestricted (every document of the tenant), or a set of principals,
which reads a document whose access list names at least one of them. Reading is
monotone: more principals never read less.

A passage held by several documents (the same title and text) is readable when one of
them is; an entity, triple or proposition only through a readable passage that states or
mentions it (:mod:`pathweave.graph.visibility`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pathweave.errors import BadRequest

PRINCIPAL_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}:[^\x00-\x20,\x7f]{1,200}$")
"""A principal: a kind (``user``, ``group``, ``role`` ...), a colon and a name without
spaces, control characters or commas (``group:finance``, ``user:4711``); the same pattern
in Python and in the API's JSON schema."""

MAX_PRINCIPALS = 1000
"""Most principals in one access list or on one caller."""


def check_principals(values: Iterable[str] | str | None, what: str = "principals") -> tuple[str, ...] | None:
    """``values`` (a list, or one comma-separated string) checked and deduplicated, sorted;
    None stays None (no list given). Raises :class:`~pathweave.errors.BadRequest` naming the
    first malformed principal, or when there are more than :data:`MAX_PRINCIPALS`."""
    if values is None:
        return None
    if isinstance(values, str):
        values = [v for v in (part.strip() for part in values.split(",")) if v]
    out = set()
    for value in values:
        if not isinstance(value, str) or not PRINCIPAL_PATTERN.match(value):
            raise BadRequest(f"{what}: {value!r} is not a principal (kind:name, e.g. group:finance or user:4711)")
        out.add(value)
    if len(out) > MAX_PRINCIPALS:
        raise BadRequest(f"{what}: at most {MAX_PRINCIPALS} principals")
    return tuple(sorted(out))


def passage_acl(document_acls: Iterable[list[str] | None]) -> tuple[str, ...] | None:
    """The access list of a passage held by documents with ``document_acls``: None (the
    whole tenant) when one of them has none, else the union of theirs. A passage no
    document holds (being removed) gets the empty list: nobody restricted reads it."""
    union: set[str] = set()
    for acl in document_acls:
        if acl is None:
            return None
        union.update(acl)
    return tuple(sorted(union))


@dataclass(frozen=True)
class Access:
    """What a caller may read: ``principals`` None is unrestricted (every document of the
    tenant: a key without principals, an administrator, the CLI without ``--as``);
    otherwise the documents whose access list names one of them or that have none."""

    principals: frozenset[str] | None = None

    @classmethod
    def of(cls, principals: Iterable[str] | str | None) -> "Access":
        """The access of ``principals`` (checked, :func:`check_principals`); None: unrestricted."""
        checked = check_principals(principals)
        return cls(None if checked is None else frozenset(checked))

    @property
    def restricted(self) -> bool:
        return self.principals is not None

    def reads(self, acl: Iterable[str] | None) -> bool:
        """Whether this caller may read what has access list ``acl`` (None: the whole tenant)."""
        if self.principals is None or acl is None:
            return True
        return not self.principals.isdisjoint(acl)

    def covers(self, other: "Access") -> bool:
        """Whether this caller reads everything ``other`` reads (reading is monotone in the
        principals): the rule for reading what ``other``'s query wrote (its reasoning record,
        its session's context)."""
        if self.principals is None:
            return True
        return other.principals is not None and other.principals <= self.principals

    def stored(self) -> list[str] | None:
        """The principals as stored beside what this caller's query wrote (None: unrestricted)."""
        return None if self.principals is None else sorted(self.principals)


UNRESTRICTED = Access()
"""The access of an administrator (every document of the tenant)."""
