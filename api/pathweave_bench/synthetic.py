"""Synthetic passages for growing a benchmark tenant: real passages with their names
consistently renamed.

Copy ``c`` of a real passage replaces every name word in its title and text (a
capitalized word that is not a common English word, a month or a weekday: "Dana",
"Weiss", "Brannoch", "American") by an invented word derived from the word and ``c``
alone. So within one copy a name is renamed the same way in every passage (passages that
shared an entity still share one: entity overlap and degree distribution follow the
real corpus), different copies never share a name, and the length and shape of the text
stay those of the real passage. The synthetic documents are ingested by the normal
pipeline: the graph holds exactly what ingestion makes of such text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

from pathweave_ingest.loaders import SourceDocument

_WORD = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")
_KEEP = frozenset("""january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday""".split())
_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "tr",
           "v", "w", "z", "th", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")


def _common_words() -> frozenset[str]:
    """Lower-case common English words (spaCy's stop words), never renamed."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | _KEEP


def invented_word(word: str, copy: int) -> str:
    """A pronounceable capitalized word of about ``word``'s length, a pure function of
    ``(word, copy)``: ``invented_word("Weiss", 3)`` is the same in every passage of copy 3."""
    digest = hashlib.blake2b(f"{copy}\x00{word}".encode(), digest_size=16).digest()
    out, i = "", 0
    while len(out) < max(3, len(word)):
        out += _ONSETS[digest[i % 16] % len(_ONSETS)] + _VOWELS[digest[(i + 1) % 16] % len(_VOWELS)]
        i += 2
    return out[:max(3, len(word))].capitalize()


class Renamer:
    """Renames the name words of texts for copy ``copy`` (see the module)."""

    def __init__(self, copy: int, common: frozenset[str] | None = None) -> None:
        self.copy = copy
        self.common = common if common is not None else _common_words()

    def _replace(self, match: re.Match) -> str:
        word = match.group(0)
        stem, suffix = (word[:-2], "'s") if word.endswith("'s") else (word, "")
        if stem.lower() in self.common:
            return word
        return invented_word(stem, self.copy) + suffix

    def rename(self, text: str) -> str:
        """``text`` with its name words renamed."""
        return _WORD.sub(self._replace, text)


def renamed_copies(sources: Sequence[tuple[str, str]], first_copy: int = 1) -> Iterator[SourceDocument]:
    """Endless synthetic documents: copy ``first_copy`` of every ``(title, text)`` of
    ``sources`` in order, then the next copy, and so on. Document sources are
    ``synthetic#<copy>-<index>`` (stable: the n-th document is the same in every run).
    Raises ValueError when ``sources`` is empty."""
    if not sources:
        raise ValueError("no passages to copy")
    common = _common_words()
    copy = first_copy
    while True:
        renamer = Renamer(copy, common)
        for index, (title, text) in enumerate(sources):
            yield SourceDocument(f"synthetic#{copy}-{index}", renamer.rename(title), renamer.rename(text))
        copy += 1
