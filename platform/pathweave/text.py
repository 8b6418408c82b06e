"""Text normalization and stable content-hash ids (spec §0)."""

from __future__ import annotations

import hashlib
import re

_NON_ALNUM = re.compile(r"[^0-9a-z]+")

# A visible character: not whitespace, not a control character, not an invisible format
# character (soft hyphen, zero-width space/joiners, bidi marks, word joiner, BOM, ...).
# The same class is the API schema's ``pattern`` for texts, so schema and check agree.
INVISIBLE_CLASS = ("\\s\\x00-\\x1f\\x7f-\\x9f\\xad\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u180e\\u200b-\\u200f"
                   "\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\ufff9-\\ufffb")
_VISIBLE = re.compile(f"[^{INVISIBLE_CLASS}]")


def has_visible_text(text: str) -> bool:
    """True when ``text`` holds at least one visible character (see ``INVISIBLE_CLASS``):
    a text of only whitespace or zero-width characters would be stored as an empty passage,
    or asked as an empty question."""
    return _VISIBLE.search(text) is not None


def normalize(text: str) -> str:
    """Entity normalization for matching: lower-case, non-alphanumerics to space,
    collapse spaces (as HippoRAG 2; spec §0). ``"U.S. Army"`` -> ``"u s army"``."""
    return _NON_ALNUM.sub(" ", text.lower()).strip()


def fact_text(subject: str, relation: str, obj: str) -> str:
    """The text a triple (fact) is embedded as, by ingestion and by HippoRAG 2's fact
    seeding (spec §2): ``str((s, p, o))`` lower-cased."""
    return str((subject.lower(), relation.lower(), obj.lower()))


def alnum_count(text: str) -> int:
    """Number of alphanumeric characters (synonymy skips entities with <= 2)."""
    return sum(ch.isalnum() for ch in text)


def stable_id(kind: str, tenant: str, *parts: str) -> str:
    """Content-hash id ``kind:<24 hex>`` of tenant + parts: same content, same id."""
    digest = hashlib.sha256("\x1f".join((kind, tenant, *parts)).encode("utf-8")).hexdigest()
    return f"{kind}:{digest[:24]}"
