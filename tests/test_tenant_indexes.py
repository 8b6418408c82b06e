"""Tenant-wide statements seek their tenant's nodes: every named statement that matches a
label by ``tenant`` (not by a node's id) is planned by Neo4j with an index seek, never a
scan of the label across all tenants of the database (the plans read with EXPLAIN, which
runs nothing)."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.neo4j_only

#: ``MATCH (x:Label) WHERE x.tenant = $tenant``: a statement that reads a label by tenant.
TENANT_WIDE = re.compile(r"MATCH \((\w+):(\w+)\)\s*WHERE \1\.tenant = \$tenant")
SCANS = ("NodeByLabelScan", "AllNodesScan", "NodeIndexScan")
#: Labels of the key registry, one tenant of its own by design (cypher/keys.cypher).
REGISTRY_LABELS = {"ApiKey"}


def tenant_wide_statements() -> dict[str, set[str]]:
    """``{statement name: labels it reads by tenant}``."""
    from pathweave.store.statements import load_all

    out: dict[str, set[str]] = {}
    for name, text in load_all().items():
        labels = {label for _, label in TENANT_WIDE.findall(text)} - REGISTRY_LABELS
        if labels:
            out[name] = labels
    return out


def operators(plan) -> list[tuple[str, str]]:
    """``(operator type, details)`` of every operator of an EXPLAIN plan, depth first."""
    found = [(plan["operatorType"].split("@")[0], str(plan.get("args", {}).get("Details", "")))]
    for child in plan.get("children", []):
        found.extend(operators(child))
    return found


def test_the_tenant_wide_statements_are_found():
    statements = tenant_wide_statements()
    assert len(statements) >= 20
    assert {"Passage", "Entity", "Proposition", "Document", "GraphChange"} <= set().union(*statements.values())


def label_scans(store, statements: dict[str, set[str]]) -> dict[str, list[str]]:
    """``{statement name: the scans of its labels}`` in the EXPLAIN plans of ``statements``
    (``{name: labels}``) on ``store``; empty when every one seeks an index."""
    from pathweave.store.statements import statement

    scans = {}
    with store.driver.session(database=store.database) as session:
        for name, labels in sorted(statements.items()):
            summary = session.run("EXPLAIN " + statement(name)).consume()
            scanned = [details for kind, details in operators(summary.plan) if kind in SCANS
                       and any(f":{label}" in details for label in labels)]
            if scanned:
                scans[name] = scanned
    return scans


def test_every_tenant_wide_statement_seeks_the_tenant_index(base_store):
    scans = label_scans(base_store, tenant_wide_statements())
    assert not scans, scans


#: ``(x:Label {key: ...})`` (or an anonymous ``(:Label {key: ...})``): nodes read by a key.
BY_ID = re.compile(r"\((\w*):(\w+)\s*\{\s*(\w+):")
#: ``x.key IN $list``: nodes read by a list of keys (the label from ``(x:Label`` in the statement).
BY_ID_LIST = re.compile(r"\b(\w+)\.(\w+) IN \$\w+")
DECLARED = re.compile(r"\((\w+):(\w+)")


def by_id_statements() -> dict[str, set[str]]:
    """``{statement name: labels it reads by an id}`` (a ``{key: value}`` pattern or ``IN $ids``)."""
    from pathweave.store.statements import load_all

    out: dict[str, set[str]] = {}
    for name, text in load_all().items():
        declared = dict(DECLARED.findall(text))
        labels = {label for _, label, _ in BY_ID.findall(text)}
        labels |= {declared[var] for var, _ in BY_ID_LIST.findall(text) if var in declared}
        if labels - REGISTRY_LABELS:
            out[name] = labels - REGISTRY_LABELS
    return out


def test_every_statement_reading_nodes_by_id_seeks_an_index(base_store):
    """A batch's reads by id (``UNWIND $ids ... {entity_id: id}``, ``IN $ids``) cost the batch,
    not the tenant: no label scan of a label the statement reads by id."""
    statements = by_id_statements()
    assert {"topology_entity_synonyms", "delete_synonyms", "synonym_degrees", "upsert_synonyms"} <= set(statements)
    scans = label_scans(base_store, statements)
    assert not scans, scans
