"""APR pure logic (spec §3): run segmentation on a hand-made triple sequence with known
cuts, fine scores on small matrices computed by hand, per-channel selection and the three
prompt renderings (token-counted with the real default tokenizer)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pathweave.apr.prompt import Payload, PromptRun, compact_prompt, render
from pathweave.apr.runs import segment
from pathweave.apr.scoring import answer_quota, coarse_score, fine_terms, greedy_matching
from pathweave.apr.channel_actions import check_actions, select, unique_medoids
from pathweave.selection import TokenCounter
from pathweave.settings import AprSettings


def unit(*xs: float) -> np.ndarray:
    v = np.asarray(xs, dtype=np.float64)
    return v / np.linalg.norm(v)


def test_segmentation_cuts_where_the_fit_drops_below_tau_and_chains_get_the_bonus():
    # 0, 1: one topic (cos 1) | 2: another topic (cos 0 to the centroid): cut |
    # 3: cos 0.68 to run {2} (< tau 0.7), but tail of 2 == head of 3 (case-insensitive):
    #    +0.05 -> 0.73, joins | 4: cos 0.33 to the centroid of {2, 3}: cut |
    # 5, 6: the sequence of run {0, 1} again: a duplicate run, dropped.
    a, b = unit(1, 0, 0), unit(0, 1, 0)
    c = unit(0, 0.68, np.sqrt(1 - 0.68 ** 2))
    d = unit(0, 0.68, -np.sqrt(1 - 0.68 ** 2))
    triples = [("Curie", "discovered", "polonium"), ("Curie", "discovered", "radium"),
               ("Paris", "capital of", "France"), ("france", "borders", "Spain"),
               ("Lyon", "city in", "Europe"),
               ("Curie", "discovered", "polonium"), ("Curie", "discovered", "radium")]
    runs = segment(triples, np.stack([a, a, b, c, d, a, a]), tau=0.7, bonus=0.05)
    assert runs == [[0, 1], [2, 3], [4]]
    # the same vectors in another order cut elsewhere: the order is the text order
    assert segment([triples[i] for i in (2, 0, 1)], np.stack([b, a, a])) == [[0], [1, 2]]


def test_segmentation_without_the_chain_bonus_cuts_the_chain():
    b = unit(0, 1, 0)
    c = unit(0, 0.68, np.sqrt(1 - 0.68 ** 2))
    triples = [("Paris", "capital of", "France"), ("France", "borders", "Spain")]
    assert segment(triples, np.stack([b, c]), bonus=0.05) == [[0, 1]]
    assert segment(triples, np.stack([b, c]), bonus=0.0) == [[0], [1]]
    assert segment([], np.zeros((0, 3))) == []
    with pytest.raises(ValueError):
        segment(triples, np.stack([b]))


def test_fine_terms_match_the_hand_computation():
    S = np.array([[0.9, 0.2], [0.5, 0.6]])
    terms = fine_terms(S, whole=0.6)
    # RelTopT: mean(0.9, 0.6, 0.5); coverage: both rows reach 0.45 -> 0.10 x 1;
    # many-to-many: sigmoid((S - .55)/.1) = .970688, .029312, .377541, .622459 -> sum 2.0,
    #   / sqrt(4) = 1.0 -> 0.20 x log1p(1) = .138629;
    # 1:1: 0.9 (0,0) then 0.6 (1,1) -> 0.10 x 1.5 / sqrt(2) = .106066;
    # whole: 0.10 x sigmoid(.05/.15) x .6 / sqrt(2) = 0.10 x .582570 x .424264 = .024716
    assert terms["rel_top_t"] == pytest.approx(2.0 / 3.0)
    assert terms["coverage"] == pytest.approx(0.10)
    assert terms["many_to_many"] == pytest.approx(0.138629, abs=1e-6)
    assert terms["matching"] == pytest.approx(0.106066, abs=1e-6)
    assert terms["whole"] == pytest.approx(0.024716, abs=1e-6)
    assert sum(terms.values()) == pytest.approx(1.036078, abs=1e-5)


def test_thresholds_apply_to_S_itself_not_S_over_nq():
    # three query lines each matched at 0.5: coverage counts all three (the reference's
    # S / nq = 0.167 would count none), and the 1:1 matching takes three 0.5 entries
    S = np.full((3, 3), 0.5)
    terms = fine_terms(S, whole=0.0)
    assert terms["coverage"] == pytest.approx(0.10)
    assert greedy_matching(S, 0.5) == [0.5, 0.5, 0.5]
    assert terms["matching"] == pytest.approx(0.10 * 1.5 / np.sqrt(3))
    below = fine_terms(np.full((3, 3), 0.44), whole=0.0)
    assert below["coverage"] == 0.0 and below["matching"] == 0.0
    assert fine_terms(S, 0.0, AprSettings(fine_top_t=1))["rel_top_t"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        fine_terms(np.zeros((0, 2)), 0.0)


def test_coarse_score_and_the_answer_quota():
    q_ent, q_rel = np.stack([unit(1, 0), unit(0, 1)]), np.stack([unit(1, 1)])
    run_ent, run_rel = np.stack([unit(1, 0)]), np.stack([unit(1, 0)])
    assert coarse_score(q_ent, q_rel, run_ent, run_rel) == pytest.approx(1.0 + 0.3 * np.sqrt(0.5))
    assert coarse_score(q_ent, np.zeros((0, 2)), run_ent, run_rel) == pytest.approx(1.0)
    assert [answer_quota(n) for n in (0, 9, 10, 57, 500)] == [1, 1, 1, 5, 20]


def test_unique_keeps_the_medoid_of_each_near_duplicate_group():
    # rows 0, 1, 2 near-duplicates (1 is the medoid: closest to both others), 3 apart
    vectors = np.stack([unit(1, 0.30, 0), unit(1, 0.35, 0), unit(1, 0.40, 0), unit(0, 0, 1)])
    assert unique_medoids(vectors, 0.93) == [1, 3]
    assert select("include_all", vectors) == [0, 1, 2, 3]
    assert select("not_include", vectors) == []
    assert select("unique", vectors) == [1, 3]
    assert check_actions({"facts": "include_all"}) == {"facts": "include_all", "questions": "unique",
                                                       "answers": "unique"}
    with pytest.raises(ValueError, match="unknown channel"):
        check_actions({"passages": "unique"})
    with pytest.raises(ValueError, match="unknown action"):
        check_actions({"facts": "all"})


def test_three_renderings_carry_the_same_payload_and_the_cheapest_is_sent():
    runs = [PromptRun(7, "facts", [("Marie Curie", "married", "Pierre Curie"), ("Pierre Curie", "taught at", "Sorbonne")]),
            PromptRun(9, "facts", [("Marie Curie", "married", "Pierre Curie"), ("Marie Curie", "born in", "Warsaw")]),
            PromptRun(3, "answers", [("Marie Curie", "married", "Pierre Curie")])]
    payload = Payload("Whom did Marie Curie marry?", runs, seen=[4, 2])
    words = json.loads(render(payload, "words"))
    ids = json.loads(render(payload, "id_triples"))
    matrix = json.loads(render(payload, "edge_matrix"))
    assert words["facts"]["7"][1] == ["Pierre Curie", "taught at", "Sorbonne"]
    e, r = ids["e"], ids["r"]
    assert [[e[h], r[p], e[t]] for h, p, t in ids["facts"]["9"]] == [list(x) for x in runs[1].triples]
    edges = matrix["edge_matrix"]
    assert len(edges) == 3  # the repeated edge is one row
    assert [[matrix["e"][edges[i][0]], matrix["r"][edges[i][1]], matrix["e"][edges[i][2]]]
            for i in matrix["given knowledge"]["3"]] == [list(runs[2].triples[0])]
    assert words["seen runs"] == ids["seen runs"] == [2, 4]
    counter = TokenCounter()
    prompt = compact_prompt(payload, counter)
    assert set(prompt.token_counts) == {"words", "id_triples", "edge_matrix"}
    assert prompt.tokens == min(prompt.token_counts.values()) == counter.count(prompt.text)
    with pytest.raises(ValueError):
        render(payload, "xml")
    # a later prompt of a session has the legend from the first: the same payload without it
    later = Payload(payload.question, runs, seen=[4, 2], legend=False)
    for name in ("words", "id_triples", "edge_matrix"):
        assert "rules" in json.loads(render(payload, name))
        assert {k: v for k, v in json.loads(render(payload, name)).items() if k != "rules"} == \
            json.loads(render(later, name))
