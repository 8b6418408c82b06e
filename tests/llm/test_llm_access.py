"""Access lists with the real local model: a restricted caller's answer (``answer: true``,
with and without a token budget) and PruneRAG's tree (its sub-questions and sub-answers)
are written only from what it may read; its records hold nothing else either. The corpus and
the walk over the whole response are those of ``tests/test_access.py``."""

from __future__ import annotations

import uuid

from typer.testing import CliRunner

from pathweave.access import Access
from pathweave_cli.main import app
from test_access import ACL_OF, FOLDERS, SECRETS, scoped, strings, write_folders

runner = CliRunner()


def test_answers_and_prunerag_trees_only_from_what_the_caller_may_read(base_store, embedder, settings, llm_client,
                                                                      tmp_path):
    from pathweave.query.retriever import Retriever

    write_folders(tmp_path)
    tenant = f"acll{uuid.uuid4().hex[:10]}"
    assert runner.invoke(app, ["ingest", str(tmp_path), "--tenant", tenant]).exit_code == 0
    retriever = Retriever(scoped(base_store, tenant), embedder, settings, llm=llm_client)
    question = "What is the secret budget of the project led by the Tidewright Guild member?"
    assert FOLDERS  # the corpus of tests/test_access.py
    # a caller reading part of the corpus, and one reading only its public part
    for principals, mode, options in ((["group:blue"], "proprag", {"answer": True}),
                                      (["user:nobody"], "dense", {"answer": True, "token_budget": 300}),
                                      (["group:blue"], "prunerag", {})):
        access = Access.of(principals)
        hidden = [s for folder, acl in ACL_OF.items() if not access.reads(acl) for s in SECRETS.get(folder, [])]
        result = retriever.query(question, mode, k=5, access=access, **options)
        text = strings(result.model_dump(mode="json")) + strings(retriever.read_record(result.query_id, access))
        assert result.answer is not None
        leaked = [h for h in hidden if any(h.lower() in s.lower() for s in text)]
        assert not leaked, (principals, mode, leaked)
