"""``pathweave bench musique --acl-split``: a short run on the suite's backend (a managed
store per tenant), on invented passages in MuSiQue's format: every figure is there, group
A's caller on the shared tenant finds what a tenant of A's documents alone finds, and the
split is reproducible from its seed."""

from __future__ import annotations

import json

from pathweave_bench.acl_split import run_acl_split, split


def _corpus(folder) -> None:
    corpus = [{"title": f"Harbour {i}", "text": f"Harbour {i} in the town of Velmar{i % 7} was built by the engineer "
               f"Orla Dunmore{i % 5} in {1800 + i}."} for i in range(30)]
    questions = [{"id": f"q{i}", "question": f"Who built Harbour {i} and in which town?", "paragraphs": [
        {"title": corpus[j]["title"], "paragraph_text": corpus[j]["text"], "is_supporting": True}
        for j in (i, i + 1)]} for i in (2, 11, 20)]
    (folder / "musique_train_corpus.json").write_text(json.dumps(corpus))
    (folder / "musique_train.json").write_text(json.dumps(questions))


def test_the_split_is_seeded_and_near_its_share():
    documents = list(range(1000))
    assert split(documents, 0.5, 7) == split(documents, 0.5, 7) != split(documents, 0.5, 8)
    assert 440 < sum(split(documents, 0.5, 7)) < 560


def test_a_short_acl_split_run(tmp_path, settings, base_store):
    data = tmp_path / "data"
    data.mkdir()
    _corpus(data)
    results = run_acl_split(data, tmp_path / "out", 0.5, 0, 7, settings.store.backend, ("proprag", "dense"))
    assert json.loads((tmp_path / "out" / "acl_split.json").read_text())["results"] == results["results"]
    assert 0 < results["documents_a"] < results["documents"] == 30
    assert set(results["ingest"]) == {"full", "plain", "a-only"}
    for mode, row in results["results"].items():
        assert row["restricted_recall_at_5"] == row["alone_recall_at_5"] and row["restricted_recall_at_5"] > 0, mode
        assert row["top5_identical"] == 1.0, (mode, row["top5_differing_questions"])
        assert row["restricted_p50_ms"] > 0 and row["unrestricted_p50_ms"] > 0 and row["alone_p50_ms"] > 0
        assert {"embed", "search", "topology", "passages"} <= set(row["stage_p50_ms"])
        assert row["stage_p50_ms"]["search"]["restricted"] > 0 and row["stage_p50_ms"]["search"]["unrestricted"] > 0
