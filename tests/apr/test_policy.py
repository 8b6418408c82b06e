"""The APR selector policy (spec §3 "Selector policy (DPO)", APR paper §2.8): the DPO loss on
hand-computed numbers, preference pairs from a utility table, real DPO training on a
small synthetic dataset, save/load and the ``unique`` fallback, measured examples as JSONL."""

from __future__ import annotations

import json
import logging
import math

import numpy as np
import pytest
import torch

from pathweave.apr.examples import (
    SelectorQuestion,
    context_recall,
    measure_examples,
    read_examples,
    training_arrays,
)
from pathweave.apr.policy import (
    ACTIONS,
    CHANNELS,
    COMBINATIONS,
    FALLBACK_ACTIONS,
    FixedSelector,
    SelectorPolicy,
    choose_actions,
    dpo_loss,
    feature_vector,
    load_selector,
    preference_pairs,
    train_policy,
    utility,
)
from pathweave.selection.tokens import TokenCounter
from pathweave.settings import SelectorSettings, Settings

BEST_A = {"facts": "not_include", "questions": "unique", "answers": "not_include"}
BEST_B = {"facts": "unique", "questions": "not_include", "answers": "include_all"}


def test_dpo_loss_scales_both_log_ratios_by_beta():
    # one pair: policy log-ratio -1 - (-3) = 2.0, reference log-ratio -2 - (-2.5) = 0.5
    # loss = -log sigmoid(0.1 x (2.0 - 0.5)) = log(1 + e^-0.15) = 0.620957...
    loss = dpo_loss(torch.tensor([-1.0]), torch.tensor([-3.0]), torch.tensor([-2.0]), torch.tensor([-2.5]), 0.1)
    assert float(loss) == pytest.approx(math.log(1 + math.exp(-0.15)), abs=1e-6)
    assert float(loss) == pytest.approx(0.620957, abs=1e-6)
    # the reference code's -log sigmoid(0.1 x 2.0 - 0.5) = log(1 + e^0.3) = 0.854355 is not it
    assert float(loss) != pytest.approx(0.854355, abs=1e-3)
    # a batch is the mean: second pair margin (-2 - -1) - 0 = -1 -> log(1 + e^0.1) = 0.744397
    batch = dpo_loss(torch.tensor([-1.0, -2.0]), torch.tensor([-3.0, -1.0]), torch.tensor([-2.0, -1.0]),
                     torch.tensor([-2.5, -1.0]), 0.1)
    assert float(batch) == pytest.approx((0.620957 + 0.744397) / 2, abs=1e-5)


def test_utility_and_pairs_from_a_small_table():
    settings = SelectorSettings(alpha=1.0, beta_tokens=0.0005, gamma=0.0001, min_margin=0.001)
    # (accuracy, tokens, ms) -> U: 1 - 0.1 - 0.01 = 0.89; 1 - 0.05 - 0.01 = 0.94; same context,
    # 4 ms slower (a tie within the margin): 0.9396; 0.5 - 0.025 - 0.001 = 0.474
    table = [(1.0, 200, 100), (1.0, 100, 100), (1.0, 100, 104), (0.5, 50, 10)]
    utilities = [utility(a, t, ms, settings) for a, t, ms in table]
    assert utilities == pytest.approx([0.89, 0.94, 0.9396, 0.474])
    # best (index 1) against every strictly worse one; index 2 is a tie with it
    assert preference_pairs(utilities, "best", settings.min_margin) == [(1, 0), (1, 3)]
    # the paper's full set: every U+ > U- + margin
    assert sorted(preference_pairs(utilities, "all", settings.min_margin)) == [(0, 3), (1, 0), (1, 3), (2, 0), (2, 3)]
    assert preference_pairs([0.3, 0.3, 0.3], "best", 0.0) == []
    with pytest.raises(ValueError, match="unknown pair mode"):
        preference_pairs(utilities, "some")


def _synthetic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Two kinds of queries (embeddings near +a or -a); kind 0's best combination is BEST_A,
    kind 1's BEST_B; utility drops 0.2 per channel that differs from the best."""
    rng = np.random.default_rng(seed)
    direction = np.random.default_rng(7).normal(size=384)
    kinds = [i % 2 for i in range(n)]
    features, utilities = [], []
    for kind in kinds:
        vector = (direction if kind == 0 else -direction) + rng.normal(size=384) * 0.7
        features.append(feature_vector(vector / np.linalg.norm(vector), int(rng.integers(5, 30)), 0))
        best = BEST_A if kind == 0 else BEST_B
        utilities.append([1.0 - 0.2 * sum(a != best[c] for c, a in zip(CHANNELS, combo)) for combo in COMBINATIONS])
    return np.stack(features), np.array(utilities), kinds


def test_training_moves_the_choice_to_the_best_actions():
    features, utilities, _ = _synthetic(40, seed=1)
    settings = SelectorSettings()  # spec: beta 0.1, AdamW 3e-4, 5 epochs
    fresh = SelectorPolicy(features.shape[1], settings.hidden, settings.seed)
    # the fresh policy (and the reference) is uniform: every action 1/3
    assert all(p == pytest.approx(1 / 3) for channel in fresh.probabilities(features[0]).values()
               for p in channel.values())
    policy, report = train_policy(features, utilities, settings)
    assert report.pairs == 40 * 26 and len(report.loss) == 5
    assert report.loss[-1] < report.loss[0] < math.log(2) + 1e-6
    held_out, _, kinds = _synthetic(20, seed=2)  # new queries of both kinds
    for x, kind in zip(held_out, kinds):
        assert policy.choose(x) == (BEST_A if kind == 0 else BEST_B)
        assert policy.probabilities(x)["facts"][(BEST_A if kind == 0 else BEST_B)["facts"]] > 0.9
    # deterministic with the seed
    again, _ = train_policy(features, utilities, settings)
    for name, tensor in policy.network.state_dict().items():
        assert torch.equal(tensor, again.network.state_dict()[name])


def test_training_on_from_a_policy_keeps_it_as_reference():
    features, utilities, _ = _synthetic(20, seed=3)
    settings = SelectorSettings()
    first, _ = train_policy(features, utilities, settings)
    # everything prefers the kind-0 best now; starting from `first` the reference is `first`
    flipped = np.array([[1.0 - 0.2 * sum(a != BEST_A[c] for c, a in zip(CHANNELS, combo)) for combo in COMBINATIONS]
                        for _ in range(len(features))])
    second, report = train_policy(features, flipped, settings, initial=first)
    assert report.pairs == 20 * 26
    # pairs where `first` already agrees start near the reference: the loss starts at log 2
    assert report.loss[0] == pytest.approx(math.log(2), abs=0.05)
    with pytest.raises(ValueError, match="no preference pairs"):
        train_policy(features, np.zeros_like(utilities), settings)
    with pytest.raises(ValueError, match="utilities"):
        train_policy(features, utilities[:, :5], settings)


def test_save_load_round_trip_and_fallback(tmp_path, caplog):
    features, utilities, _ = _synthetic(20, seed=4)
    policy, _ = train_policy(features, utilities, SelectorSettings(), meta={"embedder": "all-MiniLM-L6-v2"})
    path = policy.save(tmp_path / "policies" / "selector.safetensors")
    loaded = SelectorPolicy.load(path)
    assert loaded.meta["embedder"] == "all-MiniLM-L6-v2" and loaded.meta["pairs"] == 20 * 26
    for x in features[:5]:
        assert loaded.choose(x) == policy.choose(x)
        assert loaded.probabilities(x) == policy.probabilities(x)
    with pytest.raises(ValueError, match="shape"):
        loaded.choose(features[0][:10])

    settings = Settings(selector={"policy_path": path})
    assert isinstance(load_selector(settings, embedding_dim=384), SelectorPolicy)
    assert load_selector(settings).choose(features[0]) == policy.choose(features[0])
    query, tokens = features[1][:384], 12
    assert choose_actions(settings, query, tokens) == policy.choose(feature_vector(query, tokens, 0))
    assert choose_actions(Settings(), query, tokens) == FALLBACK_ACTIONS

    # no policy configured: unique everywhere, silently
    assert load_selector(Settings()).choose(features[0]) == FALLBACK_ACTIONS == {c: "unique" for c in CHANNELS}
    # a missing file, a damaged file, a policy for another embedder: unique, with a warning
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"not a policy")
    cases = [(Settings(selector={"policy_path": tmp_path / "missing.safetensors"}), None),
             (Settings(selector={"policy_path": garbage}), None), (settings, 768)]
    for case, dim in cases:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="pathweave.apr.policy"):
            selector = load_selector(case, embedding_dim=dim)
        assert isinstance(selector, FixedSelector)
        assert selector.choose(features[0]) == FALLBACK_ACTIONS
        assert "using 'unique' on every channel" in caplog.text


def test_measured_examples_round_trip_and_resume(tmp_path, embedder):
    counter = TokenCounter()
    questions = [SelectorQuestion("q1", "Who founded the company that makes the iPhone?", frozenset({"d1", "d2"})),
                 SelectorQuestion("q2", "Where was the author of Dune born?", frozenset({"d3"}))]
    calls = []

    def evaluator(question, actions):  # pure bookkeeping around the measured examples
        calls.append((question.id, tuple(actions.values())))
        covered = {"d1"} if actions["facts"] == "not_include" else {"d1", "d2", "d3"}
        tokens = {"include_all": 300, "unique": 120, "not_include": 0}
        return (context_recall(covered, question.gold), sum(tokens[a] for a in actions.values()) + 20,
                1.0 + ACTIONS.index(actions["facts"]))

    path = tmp_path / "examples.jsonl"
    examples = measure_examples(questions[:1], evaluator, embedder.encode, counter.count, token_budget=400, path=path)
    assert len(calls) == 27 and len(set(calls)) == 27
    examples = measure_examples(questions, evaluator, embedder.encode, counter.count, token_budget=400, path=path)
    assert len(calls) == 54  # q1 read back from the file, only q2 measured
    assert [e.id for e in examples] == ["q1", "q2"]
    again = read_examples(path)
    assert [e.outcomes for e in again] == [e.outcomes for e in examples]
    first = again[0]
    assert first.query_tokens == counter.count(questions[0].text) and first.token_budget == 400
    assert len(first.embedding) == 384
    np.testing.assert_allclose(first.embedding, embedder.encode_one(questions[0].text), atol=1e-6)
    assert first.outcomes[0].accuracy == 1.0 and first.outcomes[0].prompt_tokens == 920  # include_all x 3
    # q1: facts must be included for full recall; the cheapest such: facts unique, the rest dropped
    assert first.best(SelectorSettings()) == {"facts": "unique", "questions": "not_include", "answers": "not_include"}
    features, utilities = training_arrays(again, SelectorSettings())
    assert features.shape == (2, 386) and utilities.shape == (2, 27)

    path.write_text(path.read_text() + '{"id": "broken"}\n')
    with pytest.raises(ValueError, match=r"examples.jsonl:3"):
        read_examples(path)


def _musique_dir(tmp_path):
    """A MuSiQue-layout folder: 4 questions, 2 paragraphs each (one supporting)."""
    tmp_path.mkdir()
    questions, corpus = [], []
    for i, (question, answer) in enumerate([("Who founded the maker of the iPhone?", "Steve Jobs"),
                                            ("Where was the author of Dune born?", "Tacoma"),
                                            ("What river flows through the capital of Austria?", "Danube"),
                                            ("Which team did the 1998 MVP play for?", "Chicago Bulls")]):
        paragraphs = [{"idx": j, "title": f"T{i}{j}", "paragraph_text": f"Passage {j} about {answer}.",
                       "is_supporting": j == 0} for j in range(2)]
        corpus += [{"title": p["title"], "text": p["paragraph_text"]} for p in paragraphs]
        questions.append({"id": f"2hop__{i}", "question": question, "answer": answer, "answer_aliases": [],
                          "paragraphs": paragraphs, "question_decomposition": []})
    (tmp_path / "musique_train.json").write_text(json.dumps(questions))
    (tmp_path / "musique_train_corpus.json").write_text(json.dumps(corpus))
    return tmp_path


def test_train_selector_command_trains_from_measured_examples(tmp_path, embedder):
    from typer.testing import CliRunner

    from pathweave_cli.main import app
    from pathweave_cli.train import context_evaluator, musique_questions

    data = _musique_dir(tmp_path / "musique")
    questions, documents, prior = musique_questions(data, 4, "musique")
    assert len(questions) == 4 and len(documents) == 8 and all(len(q.gold) == 1 for q in questions)
    gold_of = {q.text: q.gold for q in questions}
    tokens = {"include_all": 300, "unique": 120, "not_include": 0}

    def select_context(question, actions):  # scripted APR selection: facts carry the gold passage
        docs = set() if actions["facts"] == "not_include" else set(gold_of[question])
        return "prompt", sum(tokens[a] for a in actions.values()), docs

    examples = tmp_path / "examples.jsonl"
    measure_examples(questions, context_evaluator(select_context), embedder.encode, TokenCounter().count,
                     path=examples)
    best = {"facts": "unique", "questions": "not_include", "answers": "not_include"}
    out = tmp_path / "policy.safetensors"
    result = CliRunner().invoke(app, ["train", "selector", "--data", str(data), "--limit", "4", "--examples",
                                      str(examples), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "104 preference pairs from 4 questions" in result.output and "dpo" in result.output
    policy = SelectorPolicy.load(out)
    for example in read_examples(examples):
        assert example.best(SelectorSettings()) == best
        assert policy.choose(example.features()) == best  # moved off the uniform start (include_all first)
    held = CliRunner().invoke(app, ["train", "selector", "--data", str(data), "--limit", "4", "--examples",
                                    str(examples), "--out", str(tmp_path / "p2.safetensors"), "--holdout", "1"])
    assert held.exit_code == 0, held.output
    assert "78 preference pairs from 3 questions" in held.output and "held_out" in held.output
    bad = CliRunner().invoke(app, ["train", "selector", "--data", str(data), "--accuracy", "f1"])
    assert bad.exit_code == 2 and "recall or em" in bad.output
    bad = CliRunner().invoke(app, ["train", "selector", "--data", str(data), "--limit", "2", "--holdout", "2"])
    assert bad.exit_code == 2 and "leaves no question" in bad.output


def test_decomposition_fills_in_the_gold_sub_answers():
    from pathweave_cli.train import decomposition

    question = {"question_decomposition": [
        {"question": "Dune >> author", "answer": "Frank Herbert"},
        {"question": "#1 >> place of birth", "answer": "Tacoma"},
        {"question": "When was #2 founded by #1?", "answer": "1872"}]}
    assert decomposition(question) == ["Dune >> author", "Frank Herbert >> place of birth",
                                       "When was Tacoma founded by Frank Herbert?"]
    assert decomposition({"question": "x"}) == []


def test_apr_mode_uses_the_configured_policy(pipeline, store, embedder, extractor, settings, tmp_path, caplog):
    """On the real store: mode apr without explicit actions takes the policy's choice for the
    question; explicit actions win; a policy file that fails to load gives unique everywhere."""
    from pathweave.apr import retrieve
    from pathweave.query.retriever import Retriever
    from pathweave.extractors import question_parser
    from pathweave_ingest.loaders import SourceDocument

    pipeline.ingest([SourceDocument("curie.txt", "Marie Curie", "Marie Curie discovered polonium. Marie Curie "
                                    "married Pierre Curie. Pierre Curie taught physics at the Sorbonne.")])
    features, _, _ = _synthetic(40, seed=5)
    # every question prefers BEST_B: the policy learns it for any query
    prefer_b = np.array([[1.0 - 0.2 * sum(a != BEST_B[c] for c, a in zip(CHANNELS, combo)) for combo in COMBINATIONS]
                         for _ in range(len(features))])
    policy, _ = train_policy(features, prefer_b, SelectorSettings())
    path = policy.save(tmp_path / "policy.safetensors")

    def apr(policy_path, actions=None):
        configured = settings.model_copy(update={"tenant": store.tenant, "selector": SelectorSettings(
            policy_path=policy_path)})
        retriever = Retriever(store, embedder, configured)
        retriever.resources.question_parser = question_parser(extractor)
        return retrieve(retriever.resources, "Who did Marie Curie marry?", actions=actions)

    question = "Who did Marie Curie marry?"
    outcome = apr(path)
    expected = choose_actions(settings.model_copy(update={"selector": SelectorSettings(policy_path=path)}),
                              embedder.encode_one(question), TokenCounter().count(question))
    assert outcome.context.actions == expected == BEST_B
    assert any(run.channel == "facts" for run in outcome.context.runs)  # facts: unique
    explicit = {"facts": "not_include", "questions": "unique", "answers": "not_include"}
    dropped = apr(path, explicit).context
    assert dropped.actions == explicit and not any(run.channel == "facts" for run in dropped.runs)
    with caplog.at_level(logging.WARNING, logger="pathweave.apr.policy"):
        assert apr(tmp_path / "missing.safetensors").context.actions == FALLBACK_ACTIONS
    assert "using 'unique' on every channel" in caplog.text


MULTI_HOP = [  # (question, answer, [(sub-question, sub-answer)], [(title, text, supporting)])
    ("Who is the spouse of the discoverer of polonium?", "Pierre Curie",
     [("polonium >> discoverer", "Marie Curie"), ("#1 >> spouse", "Pierre Curie")],
     [("Polonium", "Polonium was discovered by Marie Curie in 1898.", True),
      ("Marie Curie", "Marie Curie married Pierre Curie in 1895.", True),
      ("Albert Einstein", "Albert Einstein developed the theory of relativity.", False)]),
    ("In which city is the university where Pierre Curie taught?", "Paris",
     [("Pierre Curie >> employer", "Sorbonne"), ("#1 >> located in", "Paris")],
     [("Pierre Curie", "Pierre Curie taught physics at the Sorbonne.", True),
      ("Sorbonne", "The Sorbonne is located in Paris.", True),
      ("Danube", "The Danube flows through Vienna.", False)]),
    ("Which country borders the country polonium was named after?", "Germany",
     [("polonium >> named after", "Poland"), ("#1 >> shares border with", "Germany")],
     [("Polonium name", "Polonium was named after Poland.", True),
      ("Poland", "Poland borders Germany.", True),
      ("Chicago Bulls", "The Chicago Bulls won the 1998 championship.", False)]),
]


def test_train_selector_measures_apr_on_the_real_store(base_store, tenant, tmp_path):
    """``pathweave train selector --limit 3`` end to end: the passages ingested into the tenant,
    the decompositions asked and recorded, 27 APR runs per question measured, a policy trained."""
    from typer.testing import CliRunner

    from pathweave_cli.main import app

    data = tmp_path / "musique"
    data.mkdir()
    questions, corpus = [], []
    for i, (question, answer, steps, paragraphs) in enumerate(MULTI_HOP):
        corpus += [{"title": t, "text": x} for t, x, _ in paragraphs]
        questions.append({"id": f"2hop__{i}", "question": question, "answer": answer, "answer_aliases": [],
                          "question_decomposition": [{"question": q, "answer": a} for q, a in steps],
                          "paragraphs": [{"idx": j, "title": t, "paragraph_text": x, "is_supporting": s}
                                         for j, (t, x, s) in enumerate(paragraphs)]})
    (data / "musique_train.json").write_text(json.dumps(questions))
    (data / "musique_train_corpus.json").write_text(json.dumps(corpus))
    examples, out = tmp_path / "examples.jsonl", tmp_path / "policy.safetensors"
    result = CliRunner().invoke(app, ["train", "selector", "--data", str(data), "--limit", "3", "--tenant", tenant,
                                      "--examples", str(examples), "--out", str(out)])
    assert result.exit_code == 0, result.output
    measured = read_examples(examples)
    assert [e.id for e in measured] == ["2hop__0", "2hop__1", "2hop__2"]
    index = {combo: k for k, combo in enumerate(COMBINATIONS)}
    for example in measured:
        outcomes = {tuple(o.actions.values()): o for o in example.outcomes}
        nothing = outcomes[("not_include",) * 3]
        assert nothing.accuracy == 0.0  # no runs: no gold passage covered
        assert nothing.prompt_tokens == min(o.prompt_tokens for o in example.outcomes) > 0  # the question only
        for combo, o in outcomes.items():  # include_all never sends less than unique
            for c in range(3):
                if combo[c] == "unique":
                    wider = list(combo)
                    wider[c] = "include_all"
                    assert example.outcomes[index[tuple(wider)]].prompt_tokens >= o.prompt_tokens
    # the facts reach gold passages, and the recorded decompositions fill the other channels
    assert max(o.accuracy for e in measured for o in e.outcomes) > 0
    assert any(e.outcomes[index[("not_include", "include_all", "not_include")]].prompt_tokens
               > e.outcomes[index[("not_include",) * 3]].prompt_tokens for e in measured)
    policy = SelectorPolicy.load(out)
    assert policy.meta["examples"] == 3
    assert set(policy.choose(measured[0].features())) == set(CHANNELS)
    # a second run measures nothing again (no store needed): same examples, same policy
    again = CliRunner().invoke(app, ["train", "selector", "--data", str(data), "--limit", "3", "--tenant", tenant,
                                     "--examples", str(examples), "--out", str(tmp_path / "again.safetensors")])
    assert again.exit_code == 0, again.output
    assert len(read_examples(examples)) == 3
    second = SelectorPolicy.load(tmp_path / "again.safetensors")
    for name, tensor in policy.network.state_dict().items():
        assert torch.equal(tensor, second.network.state_dict()[name])


def test_context_evaluator_scores_recall_or_exact_match():
    from pathweave_cli.train import context_evaluator

    question = SelectorQuestion("q", "Who did Marie Curie marry?", frozenset({"d1", "d2"}), ("Pierre Curie",))
    contexts = {"unique": ("facts: Marie Curie married Pierre Curie", 40, {"d1"}), "not_include": ("", 5, set())}

    def select_context(text, actions):  # the APR selection, scripted
        return contexts[actions["facts"]]

    recall = context_evaluator(select_context)
    accuracy, tokens, ms = recall(question, {"facts": "unique"})
    assert (accuracy, tokens) == (0.5, 40) and ms >= 0
    # EM: the answer function (the LLM in `train selector --accuracy em`) reads the prompt
    em = context_evaluator(select_context, "em", lambda q, prompt: "pierre curie" if "Pierre" in prompt else "")
    assert em(question, {"facts": "unique"})[:2] == (1.0, 40)
    assert em(question, {"facts": "not_include"})[:2] == (0.0, 5)
    with pytest.raises(ValueError, match="em needs an answer"):
        context_evaluator(select_context, "em")
