"""Synthetic passages for growing a benchmark tenant: real passages with their names
consistently renamed.

Copy ``c`` of a real passage replaces every name word in its title and text (a word that
starts with a capital and is not a common English word, a month or a weekday: "Dana",
"Weiss", "McAllister", "USA", "Émile", "American") by an invented word. One
:class:`Names` registry hands them out: the same word in the same copy always gets the same
invented word (passages that shared an entity still share one: entity overlap and degree
distribution follow the real corpus), and no invented word is handed out twice (copies
never share a name, and two names of one copy never merge). The length and shape of the
text stay those of the real passage. The synthetic documents are ingested by the normal
pipeline: the graph holds exactly what ingestion makes of such text.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence

from pathweave_ingest.loaders import SourceDocument

_WORD = re.compile(r"\b[^\W\d_][^\W_]*(?:'s)?")
_KEEP = frozenset("""january february march april may june july august september october november december
monday tuesday wednesday thursday friday saturday sunday""".split())
_ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "tr",
           "v", "w", "z", "th", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "ou")


def _common_words() -> frozenset[str]:
    """Lower-case common English words (spaCy's stop words), never renamed."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | _KEEP


def invented_word(word: str, copy: int, attempt: int = 0) -> str:
    """A pronounceable capitalized word of about ``word``'s length (at least 4 letters),
    a pure function of its arguments; ``attempt`` > 0 gives other candidates (longer by
    a syllable each) where the first is taken."""
    digest = hashlib.blake2b(f"{copy}\x00{attempt}\x00{word}".encode(), digest_size=32).digest()
    length = max(4, len(word)) + 2 * attempt
    out, i = "", 0
    while len(out) < length:
        out += _ONSETS[digest[i % 32] % len(_ONSETS)] + _VOWELS[digest[(i + 1) % 32] % len(_VOWELS)]
        i += 2
    return out[:length].capitalize()


class Names:
    """The registry of invented words: ``(copy, word) -> invented``, each invented word
    handed out once (see the module)."""

    def __init__(self, common: frozenset[str] | None = None) -> None:
        self.common = common if common is not None else _common_words()
        self._given: dict[tuple[int, str], str] = {}
        self._taken: set[str] = set()

    def invented(self, copy: int, word: str) -> str:
        """The invented word for ``word`` in copy ``copy`` (the same one every time)."""
        if (copy, word) not in self._given:
            attempt = 0
            name = invented_word(word, copy)
            while name.lower() in self._taken or name.lower() in self.common:
                attempt += 1
                name = invented_word(word, copy, attempt)
            self._taken.add(name.lower())
            self._given[(copy, word)] = name
        return self._given[(copy, word)]


class Renamer:
    """Renames the name words of texts for copy ``copy`` through ``names`` (a registry of
    its own when not given)."""

    def __init__(self, copy: int, names: Names | None = None) -> None:
        self.copy = copy
        self.names = names or Names()

    def _replace(self, match: re.Match) -> str:
        word = match.group(0)
        stem, suffix = (word[:-2], "'s") if word.endswith("'s") else (word, "")
        if not stem[0].isupper() or stem.lower() in self.names.common:
            return word
        name = self.names.invented(self.copy, stem)
        return (name.upper() if len(stem) > 1 and stem.isupper() else name) + suffix

    def rename(self, text: str) -> str:
        """``text`` with its name words renamed."""
        return _WORD.sub(self._replace, text)


def renamed_copies(sources: Sequence[tuple[str, str]], first_copy: int = 1) -> Iterator[SourceDocument]:
    """Endless synthetic documents: copy ``first_copy`` of every ``(title, text)`` of
    ``sources`` in order, then the next copy, and so on, all through one :class:`Names`.
    Document sources are ``synthetic#<copy>-<index>``; the n-th document is the same in
    every run. Raises ValueError when ``sources`` is empty."""
    if not sources:
        raise ValueError("no passages to copy")
    names = Names()
    copy = first_copy
    while True:
        renamer = Renamer(copy, names)
        for index, (title, text) in enumerate(sources):
            yield SourceDocument(f"synthetic#{copy}-{index}", renamer.rename(title), renamer.rename(text))
        copy += 1
