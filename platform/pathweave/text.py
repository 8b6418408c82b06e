"""Text normalization and stable content-hash ids (spec §0)."""

from __future__ import annotations

import hashlib
import re

_NON_ALNUM = re.compile(r"[^0-9a-z]+")


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
