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
