"""Extraction data shared by the extractors, and proposition building.

A proposition is one sentence of a passage, made self-contained where cheap
(a sentence-initial pronoun is replaced by the document title's entity), and
linked to every entity it mentions: it is the hyper-edge over them (spec §0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from pathweave.text import normalize

_SUBJECT_PRONOUNS = {"he", "she", "it", "they"}
_POSSESSIVE_PRONOUNS = {"his", "her", "its", "their"}
_FIRST_WORD = re.compile(r"^(\W*)(\w+)(.*)$", re.DOTALL)


@dataclass(frozen=True)
class PassageInput:
    """A passage to extract from: the document title, the passage text and the whole document text."""

    title: str
    text: str
    doc_text: str


@dataclass
class PassageExtraction:
    """What an extractor found in one passage.

    ``entities``: surface name -> type; ``propositions``: ``(text, [entity names])``;
    ``triples``: ``(subject, relation, object)`` surface strings.
    """

    entities: dict[str, str] = field(default_factory=dict)
    propositions: list[tuple[str, list[str]]] = field(default_factory=list)
    triples: list[tuple[str, str, str]] = field(default_factory=list)


def decontextualize(sentence: str, title: str) -> tuple[str, bool]:
    """Replace a sentence-initial pronoun by ``title``: ``("It won.", "X")`` -> ``("X won.", True)``."""
    match = _FIRST_WORD.match(sentence)
    if not title or not match:
        return sentence, False
    lead, word, rest = match.groups()
    if lead.strip():
        return sentence, False
    lower = word.lower()
    if lower in _SUBJECT_PRONOUNS:
        return f"{title}{rest}", True
    if lower in _POSSESSIVE_PRONOUNS:
        return f"{title}'s{rest}", True
    return sentence, False


def mentioned(entity_names: list[str], text: str) -> list[str]:
    """The names among ``entity_names`` whose normalized form occurs in ``text`` on word boundaries."""
    haystack = f" {normalize(text)} "
    out = []
    for name in entity_names:
        norm = normalize(name)
        if norm and f" {norm} " in haystack:
            out.append(name)
    return out


def self_contained(title: str, statement: str) -> str:
    """Cheap decontextualization of one statement of a passage titled ``title``: a leading
    pronoun is replaced by the title (:func:`decontextualize`); a statement that still does
    not name the title gets it as a prefix (``"Warsaw: The city lies on the Vistula."``).
    Whitespace is collapsed. Unchanged when ``title`` is empty."""
    text, _ = decontextualize(" ".join(statement.split()), title)
    if title and not mentioned([title], text):
        text = f"{title}: {text}"
    return text


@lru_cache(maxsize=1)
def _sentencizer():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(texts: list[str]) -> list[list[str]]:
    """The sentences of each text (spaCy's rule-based sentencizer, no model), stripped and
    non-empty, in order: ``len(result) == len(texts)``."""
    return [[s.text.strip() for s in doc.sents if s.text.strip()] for doc in _sentencizer().pipe(texts)]


def build_propositions(title: str, sentences: list[str], entity_names: list[str]) -> list[tuple[str, list[str]]]:
    """Propositions of a passage from its sentences: ``[(text, [entity names])]``.

    Each sentence is made :func:`self_contained`, so every proposition names its subject
    and mentions the title entity. Sentences shorter than three words are dropped.
    """
    propositions = []
    for sentence in sentences:
        if len(sentence.split()) < 3:
            continue
        text = self_contained(title, sentence)
        names = mentioned(entity_names, text)
        if title and title not in names:
            names.append(title)
        propositions.append((text, names))
    return propositions
