"""LLM extraction front end (``--extractor llm``, ``PATHWEAVE_INGEST_EXTRACTOR=llm``): per passage,
one JSON-schema-constrained chat call returns self-contained propositions (PropRAG's
proposition prompt shape, PropRAG §3 and Appendix A.3: atomic statements, pronouns resolved,
each with the entities it mentions, together keeping every fact of the passage) and
subject–relation–object triples.

Coverage is enforced by the schema, not left to the model: the passage is split into
numbered sentences (spaCy's rule-based sentencizer) and the output holds exactly one group
of at least one proposition per sentence (``minItems = maxItems`` = the sentence count). Asked
for a free list, Qwen2.5-Coder-1.5B often stopped after the first sentence and kept fewer
propositions and fewer of the gold hop answers than with the groups (``pathweave bench
extract``, figures in docs/benchmarks-history.md). Each
proposition is then made :func:`.base.self_contained` (a leading pronoun becomes the title; a
statement not naming the title is prefixed with it) and keeps only the entities its text
names; the passage's entities are those of its propositions and triples, typed by spaCy's
labels of the passage.

Batched: a batch's passages are sent ``settings.llm.concurrency`` at a time (on a GPU
endpoint such as vLLM, raise it). Idempotent like the other extractors: greedy decoding,
and the pipeline's ids are content hashes (unchanged documents are not extracted again).
An output that is not the expected JSON (e.g. cut at its completion budget) falls back to
the spaCy extractor for that passage (counted in ``fallbacks``); an unreachable endpoint
raises :class:`~pathweave.llm.client.LLMError`.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from pathweave.llm.confidence import last_json_object
from pathweave.text import normalize
from pathweave.extractors.base import (
    PassageExtraction,
    PassageInput,
    mentioned,
    self_contained,
    split_sentences,
)

PROPOSITION = {"type": "object", "properties": {"text": {"type": "string"},
                                                "entities": {"type": "array", "items": {"type": "string"}}},
               "required": ["text", "entities"]}
TRIPLE = {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}

SYSTEM = """Extract knowledge from a passage whose sentences are numbered. Reply with one JSON object:
{"sentences": [{"propositions": [{"text": "<one atomic, self-contained statement>", "entities": ["<named entity, date or number it mentions>"]}]}],
 "triples": [["<subject entity>", "<relation>", "<object entity>"]]}
"sentences" has one item per numbered sentence, in order: the propositions of that sentence. A proposition
states one fact of its sentence on its own: replace pronouns and vague references ("it", "the journal") by the
full names they refer to (use the title); keep dates and numbers. Together the propositions keep every fact."""

EXAMPLE = (
    "Title: Marie Curie\n1. Marie Curie was born in Warsaw.\n"
    "2. She won the Nobel Prize in Physics in 1903 with Pierre Curie.",
    json.dumps({"sentences": [
        {"propositions": [{"text": "Marie Curie was born in Warsaw.", "entities": ["Marie Curie", "Warsaw"]}]},
        {"propositions": [
            {"text": "Marie Curie won the Nobel Prize in Physics in 1903.",
             "entities": ["Marie Curie", "Nobel Prize in Physics", "1903"]},
            {"text": "Marie Curie shared the 1903 Nobel Prize in Physics with Pierre Curie.",
             "entities": ["Marie Curie", "Pierre Curie", "Nobel Prize in Physics", "1903"]}]}],
        "triples": [["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "Nobel Prize in Physics"],
                    ["Pierre Curie", "won", "Nobel Prize in Physics"]]}),
)

TOKENS_PER_SENTENCE = 128
"""Completion budget per sentence (tokens): its propositions with their entities, and its triples."""
MAX_EXTRACT_TOKENS = 2048
"""Cap of one passage's completion budget (tokens)."""


def extraction_schema(sentences: int) -> dict:
    """The JSON schema of one passage's output: ``sentences`` (exactly ``sentences`` groups,
    each of >= 1 proposition ``{text, entities}``) and ``triples`` (``[s, r, o]``)."""
    group = {"type": "object", "properties": {"propositions": {"type": "array", "minItems": 1, "items": PROPOSITION}},
             "required": ["propositions"]}
    return {"type": "object",
            "properties": {"sentences": {"type": "array", "minItems": sentences, "maxItems": sentences, "items": group},
                           "triples": {"type": "array", "items": TRIPLE}},
            "required": ["sentences", "triples"]}


def completion_budget(sentences: int) -> int:
    """Completion tokens allowed for a passage of ``sentences`` sentences (>= 1)."""
    return min(MAX_EXTRACT_TOKENS, TOKENS_PER_SENTENCE * (max(1, sentences) + 1))


def parse_extraction(text: str, title: str = "") -> PassageExtraction:
    """A :class:`PassageExtraction` from the model's JSON output (``{"sentences":
    [{"propositions": [...]}], "triples": [...]}``) for a passage titled ``title``.

    Propositions are flattened in sentence order, made :func:`.base.self_contained`, and keep
    those of their listed entities, and the title, that their text names; propositions under
    three words, repeated propositions and triples whose subject is their object are dropped;
    the entities (type ``OTHER``) are those of the propositions and triples. Raises ValueError
    when the output has no JSON object with the two lists.
    """
    found = last_json_object(text)
    if found is None:
        raise ValueError(f"no JSON object in the extraction output: {text[:200]!r}")
    obj = found[0]
    if not isinstance(obj.get("sentences"), list) or not isinstance(obj.get("triples"), list):
        raise ValueError(f"extraction output lacks sentences/triples: {text[:200]!r}")
    out, seen = PassageExtraction(), set()
    for group in obj["sentences"]:
        for prop in (group.get("propositions") if isinstance(group, dict) else None) or []:
            if not isinstance(prop, dict) or len(str(prop.get("text", "")).split()) < 3:
                continue
            statement = self_contained(title, str(prop["text"]))
            if statement in seen:
                continue
            seen.add(statement)
            listed = [str(n).strip() for n in prop.get("entities") or [] if str(n).strip()]
            names = mentioned(list(dict.fromkeys(listed + ([title] if title else []))), statement)
            for name in names:
                out.entities.setdefault(name, "OTHER")
            out.propositions.append((statement, names))
    for triple in obj["triples"]:
        if isinstance(triple, list) and len(triple) == 3 and all(str(x).strip() for x in triple):
            subject, relation, obj_ = (str(x).strip() for x in triple)
            if subject != obj_:
                out.triples.append((subject, relation, obj_))
                out.entities.setdefault(subject, "OTHER")
                out.entities.setdefault(obj_, "OTHER")
    out.triples = list(dict.fromkeys(out.triples))
    return out


class LLMExtractor:
    """``extract(passages)`` -> one :class:`PassageExtraction` each (same order), one LLM
    call per passage through ``client`` (an :class:`~pathweave.llm.client.LLMClient`)."""

    name = "llm"

    def __init__(self, client, concurrency: int = 1, fallback=None) -> None:
        self.client = client
        self.concurrency = max(1, concurrency)
        self._fallback = fallback
        self.fallbacks = 0

    def messages(self, passage: PassageInput, sentences: list[str]) -> list[dict]:
        """The extraction prompt of one passage (system, one worked example, the title and the
        passage's ``sentences`` numbered from 1)."""
        numbered = "\n".join(f"{i}. {' '.join(s.split())}" for i, s in enumerate(sentences, 1))
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": EXAMPLE[0]},
                {"role": "assistant", "content": EXAMPLE[1]},
                {"role": "user", "content": f"Title: {passage.title}\n{numbered}"}]

    def extract(self, passages: list[PassageInput]) -> list[PassageExtraction]:
        """Entities, propositions and triples of each passage. Raises LLMError when the
        endpoint fails.

        Entity types come from spaCy's labels of the same passage, matched by normalized name
        (``OTHER`` where spaCy has none): alias consolidation never merges ``DATE``/``TIME``
        entities (``ALIAS_SKIP_TYPES``), and the LLM is not asked for types, which would cost
        output tokens on every passage."""
        labelled = self.fallback.extract(passages)  # one spaCy pass: the types, and the fallback outputs
        work = list(zip(passages, split_sentences([p.text for p in passages]), labelled))
        if self.concurrency == 1 or len(passages) < 2:
            extractions = [self._one(*item) for item in work]
        else:
            with ThreadPoolExecutor(self.concurrency, thread_name_prefix="llm-extract") as pool:
                extractions = list(pool.map(lambda item: self._one(*item), work))
        for extraction, spacy_extraction in zip(extractions, labelled):
            labels = {normalize(name): kind for name, kind in spacy_extraction.entities.items()}
            extraction.entities = {name: labels.get(normalize(name), kind)
                                   for name, kind in extraction.entities.items()}
        return extractions

    def _one(self, passage: PassageInput, sentences: list[str],
             spacy_extraction: PassageExtraction) -> PassageExtraction:
        """The LLM's extraction of ``passage``, or ``spacy_extraction`` when its output does not parse."""
        sentences = sentences or [passage.text]
        completion = self.client.chat(self.messages(passage, sentences), schema=extraction_schema(len(sentences)),
                                      max_tokens=completion_budget(len(sentences)))
        try:
            return parse_extraction(completion.text, passage.title)
        except ValueError:
            self.fallbacks += 1
            return spacy_extraction

    @property
    def fallback(self):
        if self._fallback is None:
            from pathweave.extractors.spacy_extractor import SpacyExtractor

            self._fallback = SpacyExtractor()
        return self._fallback
