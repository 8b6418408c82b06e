"""Access control inside a tenant: the vocabulary of who may read what — documents' access
lists, callers' principals and :class:`Access` (:mod:`pathweave.access.principals`). The
restricted topology a caller's query runs on is :mod:`pathweave.graph.visibility`; where
each check sits is in ``docs/access.md``."""

from pathweave.access.principals import (
    MAX_PRINCIPALS,
    PRINCIPAL_PATTERN,
    UNRESTRICTED,
    Access,
    check_principals,
    passage_acl,
)

__all__ = ["MAX_PRINCIPALS", "PRINCIPAL_PATTERN", "UNRESTRICTED", "Access", "check_principals", "passage_acl"]
