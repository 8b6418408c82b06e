"""LLM extraction front end (``--extractor llm``, ``PATHWEAVE_EXTRACTOR=llm``): per passage,
one JSON-schema-constrained chat call returns named entities, subject–relation–object
triples and self-contained propositions (PropRAG's proposition prompt shape: atomic
statements, pronouns resolved, each with the entities it mentions).

Batched: a batch's passages are sent ``settings.llm.concurrency`` at a time (on a GPU
endpoint such as vLLM, raise it). Idempotent like the other extractors: greedy decoding,
and the pipeline's ids are content hashes (unchanged documents are not extracted again).
An output that is not the expected JSON (e.g. cut at ``max_tokens``) falls back to the
spaCy extractor for that passage (counted in ``fallbacks``); an unreachable endpoint
raises :class:`~pathweave.llm.client.LLMError`.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pathweave.llm.confidence import last_json_object
from pathweave_ingest.extractors.base import PassageExtraction, PassageInput

SCHEMA = {
    "type": "object",
    "properties": {
        "entities": {"type": "array", "items": {
            "type": "object", "properties": {"name": {"type": "string"}, "type": {"type": "string"}},
            "required": ["name", "type"]}},
        "triples": {"type": "array", "items": {"type": "array", "items": {"type": "string"},
                                               "minItems": 3, "maxItems": 3}},
        "propositions": {"type": "array", "items": {
            "type": "object", "properties": {"text": {"type": "string"},
                                             "entities": {"type": "array", "items": {"type": "string"}}},
            "required": ["text", "entities"]}},
    },
    "required": ["entities", "triples", "propositions"],
}

SYSTEM = """Extract knowledge from a passage. Reply with one JSON object:
{"entities": [{"name": "<named entity>", "type": "<PERSON|ORG|PLACE|DATE|WORK|EVENT|OTHER>"}],
 "triples": [["<subject entity>", "<relation>", "<object entity>"]],
 "propositions": [{"text": "<one atomic, self-contained statement>", "entities": ["<entity it mentions>"]}]}
Propositions: split the passage into the smallest statements that keep their meaning on their own; replace
pronouns and vague references by the full names they refer to (use the title); keep dates and numbers."""

EXAMPLE = (
    "Title: Marie Curie\nPassage: Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903.",
    '{"entities": [{"name": "Marie Curie", "type": "PERSON"}, {"name": "Warsaw", "type": "PLACE"}, '
    '{"name": "Nobel Prize in Physics", "type": "OTHER"}], "triples": [["Marie Curie", "born in", "Warsaw"], '
    '["Marie Curie", "won", "Nobel Prize in Physics"]], "propositions": [{"text": "Marie Curie was born in '
    'Warsaw.", "entities": ["Marie Curie", "Warsaw"]}, {"text": "Marie Curie won the Nobel Prize in Physics in '
    '1903.", "entities": ["Marie Curie", "Nobel Prize in Physics"]}]}',
)

EXTRACT_TOKENS = 768
"""Completion budget per passage (tokens): ~10 propositions with their entities and triples."""


def parse_extraction(text: str) -> PassageExtraction:
    """A :class:`PassageExtraction` from the model's JSON output; ValueError when the output
    has no JSON object with the three lists."""
    found = last_json_object(text)
    if found is None:
        raise ValueError(f"no JSON object in the extraction output: {text[:200]!r}")
    obj = found[0]
    if not all(isinstance(obj.get(key), list) for key in ("entities", "triples", "propositions")):
        raise ValueError(f"extraction output lacks entities/triples/propositions: {text[:200]!r}")
    out = PassageExtraction()
    for item in obj["entities"]:
        if isinstance(item, dict) and str(item.get("name", "")).strip():
            out.entities.setdefault(str(item["name"]).strip(), str(item.get("type") or "OTHER").strip().upper())
    for triple in obj["triples"]:
        if isinstance(triple, list) and len(triple) == 3 and all(str(x).strip() for x in triple):
            subject, relation, obj_ = (str(x).strip() for x in triple)
            if subject != obj_:
                out.triples.append((subject, relation, obj_))
                out.entities.setdefault(subject, "OTHER")
                out.entities.setdefault(obj_, "OTHER")
    for prop in obj["propositions"]:
        if not isinstance(prop, dict) or len(str(prop.get("text", "")).split()) < 3:
            continue
        names = [str(n).strip() for n in prop.get("entities") or [] if str(n).strip()]
        for name in names:
            out.entities.setdefault(name, "OTHER")
        out.propositions.append((" ".join(str(prop["text"]).split()), list(dict.fromkeys(names))))
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

    def messages(self, passage: PassageInput) -> list[dict]:
        """The extraction prompt of one passage (system, one worked example, the passage)."""
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": EXAMPLE[0]},
                {"role": "assistant", "content": EXAMPLE[1]},
                {"role": "user", "content": f"Title: {passage.title}\nPassage: {' '.join(passage.text.split())}"}]

    def extract(self, passages: list[PassageInput]) -> list[PassageExtraction]:
        """Entities, propositions and triples of each passage. Raises LLMError when the
        endpoint fails."""
        if self.concurrency == 1 or len(passages) < 2:
            return [self._one(p) for p in passages]
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix="llm-extract") as pool:
            return list(pool.map(self._one, passages))

    def _one(self, passage: PassageInput) -> PassageExtraction:
        completion = self.client.chat(self.messages(passage), schema=SCHEMA, max_tokens=EXTRACT_TOKENS)
        try:
            return parse_extraction(completion.text)
        except ValueError:
            self.fallbacks += 1
            return self.fallback.extract([passage])[0]

    @property
    def fallback(self):
        if self._fallback is None:
            from pathweave_ingest.extractors.spacy_extractor import SpacyExtractor

            self._fallback = SpacyExtractor()
        return self._fallback
