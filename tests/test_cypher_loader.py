"""Named Cypher statements: parsing and loading of cypher/*.cypher."""

import pytest

from pathweave.store.statements import load_all, parse, statement


def test_parse_named_statements_strips_comments_and_semicolons():
    text = "// name: a\n// does a\nMATCH (n) RETURN n;\n\n// name: b\nRETURN $x AS x\n"
    assert parse(text) == {"a": "MATCH (n) RETURN n", "b": "RETURN $x AS x"}


def test_duplicate_and_empty_statements_are_errors():
    with pytest.raises(ValueError, match="duplicate"):
        parse("// name: a\nRETURN 1\n// name: a\nRETURN 2\n")
    with pytest.raises(ValueError, match="no body"):
        parse("// name: a\n// only a comment\n")


def test_every_repository_statement_is_parameterized_and_loadable():
    statements = load_all()
    assert {"upsert_passages", "snapshot_passages", "write_query", "record_graph_change"} <= set(statements)
    assert statement("graph_version").startswith("MATCH (m:Meta")
    with pytest.raises(KeyError, match="no Cypher statement"):
        statement("drop_everything")


def test_each_statement_runs_in_the_transaction_its_clauses_need():
    """Reads (a cluster may serve them from a follower), writes (the leader) and the two
    statements that commit their own batches (auto-commit): a statement that writes is never
    taken for a read (the Neo4j run also fails such a statement: a read transaction refuses
    writes)."""
    from pathweave.store.statements import access_mode, load_all

    modes = {name: access_mode(name) for name in load_all()}
    assert {name for name, mode in modes.items() if mode == "auto"} == {"neo4j_import_synonyms", "neo4j_drop_tenant"}
    assert [modes[n] for n in ("doc_claim", "api_key_create", "record_graph_change", "constraint_api_key",
                               "reembed_write_passages")] == ["write"] * 5
    assert [modes[n] for n in ("api_key_get", "vector_search", "fulltext_search", "graph_version", "job_get",
                               "doc_status_get")] == ["read"] * 6
    assert [modes[n] for n in ("doc_status_done", "doc_status_retry", "doc_status_failed", "doc_accept",
                               "doc_lease_renew", "api_key_revoke", "api_key_import")] == ["write"] * 7


def test_every_statement_that_counts_says_how_a_replay_is_recognized():
    """The store's retry policy runs a transaction again after a commit whose outcome the
    store did not tell (``pathweave.store.retry``): a writing statement that adds to a stored
    number (a version, an attempt, a count) must say under ``// replay:`` why a second run
    after its own commit is safe, and the statements known to count are found (the check can fail)."""
    import re

    from pathweave.store.statements import access_mode, cypher_dir, documented

    counting = re.compile(r"(coalesce\(\s*\w+\.\w+\s*,\s*0\s*\)|\b[a-z]\w*\.\w+)\s*\+\s*(\d|row\.|CASE)", re.I)
    found, silent = set(), []
    for path in sorted(cypher_dir().glob("*.cypher")):
        for st in documented(path.read_text(encoding="utf-8"), str(path)):
            if access_mode(st.name) != "read" and counting.search(st.body):
                found.add(st.name)
                if not re.search(r"^replay:", st.doc, re.M):
                    silent.append(st.name)
    assert {"doc_accept", "doc_claim", "doc_applied", "doc_mark_deleted", "record_graph_change"} <= found
    assert not silent, f"statements that count without a '// replay:' line: {silent}"
