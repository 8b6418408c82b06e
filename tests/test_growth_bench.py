"""``pathweave bench scale --passages``: the synthetic passages, the fits, and a short run
on the real store (steps of tens of passages), continued from a kept store."""

from __future__ import annotations

import json

import pytest

from pathweave_bench.common import with_backend
from pathweave_bench.growth import LARGE, corpus_in_order, parse_steps, real_documents, run_growth
from pathweave_bench.growth_report import fit
from pathweave_bench.synthetic import Names, Renamer, renamed_copies


def test_a_copy_renames_each_name_the_same_way_everywhere_and_leaves_common_words():
    names = Names()
    one, two = Renamer(1, names), Renamer(2, names)
    a = one.rename("Dana Weiss approved the Brannoch Viaduct in March 1871.")
    b = one.rename("The viaduct that Weiss approved crosses the Ulvre.")
    weiss = names.invented(1, "Weiss")
    assert weiss in a and weiss in b and "Weiss" not in a + b
    assert a.startswith(names.invented(1, "Dana")) and "in March 1871." in a and b.startswith("The viaduct that")
    assert two.rename("Weiss") != one.rename("Weiss")  # copies never share a name
    assert one.rename("Weiss's plan") == weiss + "'s plan"
    assert one.rename("the USA and Émile McAllister").split()[1].isupper()
    assert "Émile" not in one.rename("Émile McAllister") and "McAllister" not in one.rename("Émile McAllister")
    assert len(a) == pytest.approx(len("Dana Weiss approved the Brannoch Viaduct in March 1871."), abs=8)


def test_no_invented_word_is_handed_out_twice():
    """Short names have few pronounceable stand-ins: the registry still gives each (copy,
    word) its own, so distinct entities never merge into one."""
    names = Names()
    words = [a + b + c for a in "BDKT" for b in "aeio" for c in "lnrs"]  # 64 three-letter names
    given = {(copy, w): names.invented(copy, w) for copy in (1, 2, 3) for w in words}
    assert len(set(given.values())) == len(given)
    assert all(names.invented(c, w) == name for (c, w), name in given.items())  # and the same again


def test_renamed_copies_follow_the_sources_copy_after_copy_with_stable_sources():
    sources = [("Alpha Tower", "Alpha Tower stands in Brill."), ("Brill", "Brill is a town.")]
    docs = [d for d, _ in zip(renamed_copies(sources), range(5))]
    again = [d for d, _ in zip(renamed_copies(sources), range(5))]
    assert [d.source for d in docs] == ["synthetic#1-0", "synthetic#1-1", "synthetic#2-0", "synthetic#2-1",
                                        "synthetic#3-0"]
    assert docs == again  # the n-th document is the same in every run: a kept store continues
    assert docs[0].text.endswith(f"in {docs[1].title}.")  # a shared entity stays shared
    assert docs[2].title != docs[0].title
    with pytest.raises(ValueError):
        next(renamed_copies([]))


def test_parse_steps_refuses_what_it_cannot_run():
    assert parse_steps("30000, 10000,10000") == [10000, 30000]
    for bad in ("", "10k", "500,20000"):
        with pytest.raises(ValueError):
            parse_steps(bad)


def test_fits_recover_a_base_and_a_cost_per_passage_and_a_growth_exponent():
    linear = fit([(10_000, 1_100.0), (30_000, 1_300.0), (100_000, 2_000.0)], "linear")
    assert linear["a"] == pytest.approx(1_000) and linear["b"] == pytest.approx(0.01)
    assert linear["at_target"] == pytest.approx(11_000)
    power = fit([(10_000, 2 * 10_000 ** 0.5), (100_000, 2 * 100_000 ** 0.5)], "power")
    assert power["b"] == pytest.approx(0.5) and power["at_target"] == pytest.approx(2_000)
    assert fit([(10_000, 5.0)], "power") is None and fit([(10_000, 5.0), (20_000, None)], "linear") is None


def _fixture_corpus(folder):
    """Sixty invented passages in MuSiQue's format and three questions over them."""
    corpus = [{"title": f"Harbour {i}", "text": f"Harbour {i} in the town of Velmar{i % 7} was built by the engineer "
               f"Orla Dunmore{i % 5} in {1800 + i}."} for i in range(60)]
    questions = [{"question": f"Who built Harbour {i}?", "paragraphs": [
        {"title": corpus[i]["title"], "paragraph_text": corpus[i]["text"], "is_supporting": True}]} for i in (3, 17, 41)]
    (folder / "musique_train_corpus.json").write_text(json.dumps(corpus))
    (folder / "musique_train.json").write_text(json.dumps(questions))
    extra = folder / "extra.json"
    extra.write_text(json.dumps([{"title": "Quay", "text": "The quay of Velmar0 was paved in 1901."}]))
    return extra


def test_a_short_growth_run_measures_each_step_and_a_kept_store_continues(tmp_path, settings, base_store):
    """One step (40 passages), ten passages timed, a 20-passage second tenant; then the kept
    store grown on to 70 (beyond the 61 real ones: renamed copies) measures only the new step,
    and ``remeasure`` measures the step it holds again without growing it.
    On the suite's backend, in a managed store of the run's own (the full-length run is
    ``pathweave bench scale --passages 10000,30000,100000 --keep DIR``)."""
    data = tmp_path / "data"
    data.mkdir()
    extra = _fixture_corpus(data)
    keep = tmp_path / "kept"
    results = run_growth([40], data, [extra], tmp_path / "out", keep=keep, small=20, timed=10,
                         backends=[settings.store.backend])
    run = results["backends"][next(iter(results["backends"]))]
    assert [s["passages"] for s in run["steps"]] == [40]
    assert run["small_alone"]["recall_at_5"] > 0
    for step in run["steps"]:
        assert set(step["modes"]) == {"proprag", "dense", "hipporag2", "proprag_exact"}
        assert set(step["modes"]["proprag"]["vs_exact"]) == {"recall_at_2", "recall_at_5"}  # paired, with SE
        assert step["fresh"]["rank"] == 1  # the new document answers its question at once
        assert step["ingest_passages_per_s"] > 0 and step["store_disk_mb"] > 0 and step["query_rss_mb"] > 0
        assert step["tenth_query_after_restart_ms"] > 0
        assert 0 < step["caches"]["passages"] <= step["passages"]  # the replica holds what its queries read
        assert step["small"]["recall_at_5"] > 0
    again = run_growth([40, 70], data, [extra], tmp_path / "out2", keep=keep, small=20, timed=10,
                       backends=[settings.store.backend])
    run = again["backends"][settings.store.backend]
    assert [s["passages"] for s in run["steps"]] == [40, 70]  # the kept store's earlier step, then 70
    for step in run["steps"]:
        assert step["fresh"]["rank"] == 1 and 0 < step["caches"]["passages"] <= step["passages"]
    page = (tmp_path / "out2" / "bench.html").read_text()
    assert page.count("<svg") >= 5 and page.count("stroke-dasharray") >= 5  # curves and their fits
    assert run["small_alone"] == results["backends"][settings.store.backend]["small_alone"]
    assert json.loads((tmp_path / "out2" / "growth.json").read_text())["backends"] == again["backends"]
    measured = run_growth([70], data, [extra], tmp_path / "out3", keep=keep, small=20, timed=10,
                          backends=[settings.store.backend], remeasure=True)["backends"][settings.store.backend]
    assert [s["passages"] for s in measured["steps"]] == [40, 70]  # the step it holds, measured again
    earlier, now = run["steps"][1], measured["steps"][1]
    assert now["ingest_passages_per_s"] == earlier["ingest_passages_per_s"] and now["commit"]
    assert now["fresh"]["rank"] == 1 and now["first_query_after_restart_ms"] != earlier["first_query_after_restart_ms"]
    from pathweave.runtime import open_store
    from pathweave.servers import store_server

    kept = with_backend(settings.model_copy(update={"data_dir": keep}), settings.store.backend)
    try:
        with open_store(kept, tenant=LARGE) as store:
            stored = {row["source"] for row in store.run("documents_list")}
    finally:
        store_server.stop(kept)
    # exactly the corpus's first 70 documents: nothing skipped or fed twice, the fresh one gone
    assert stored == {d.source for d, _ in zip(corpus_in_order(real_documents(data, [extra])), range(70))}
