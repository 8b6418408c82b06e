"""Load documents from files: ``.txt``, ``.md``, ``.json`` (a list of
``{title, text}``), ``.jsonl`` (one such object per line).

Every file is validated before anything is written: an empty file, a binary
file, bytes that are not UTF-8, a file over the size limit, invalid JSON or
an item without text each give a :class:`LoadError` naming the file and the
reason; the other files proceed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

SUPPORTED = (".txt", ".md", ".json", ".jsonl")


@dataclass(frozen=True)
class SourceDocument:
    """One document: ``source`` (file path, ``#i`` for the i-th JSON item), title, text."""

    source: str
    title: str
    text: str


@dataclass(frozen=True)
class LoadError:
    """Why a file (or one item of it) was rejected; nothing of it is ingested."""

    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


# A visible character: not whitespace, not a control character, not an invisible format
# character (soft hyphen, zero-width space/joiners, bidi marks, word joiner, BOM, ...).
# The same class is the API schema's ``pattern`` for texts, so schema and check agree.
INVISIBLE_CLASS = ("\\s\\x00-\\x1f\\x7f-\\x9f\\xad\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u180e\\u200b-\\u200f"
                   "\\u2028-\\u202e\\u2060-\\u2064\\u2066-\\u206f\\ufeff\\ufff9-\\ufffb")
_VISIBLE = re.compile(f"[^{INVISIBLE_CLASS}]")


def has_visible_text(text: str) -> bool:
    """True when ``text`` holds at least one visible character (see ``INVISIBLE_CLASS``):
    a text of only whitespace or zero-width characters would be stored as an empty passage."""
    return _VISIBLE.search(text) is not None


def unicode_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as UTF-8 (a lone surrogate, e.g. from a JSON
    ``"\\ud800"`` escape), or None when it can."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"not valid Unicode: lone surrogate {text[exc.start]!r} at character {exc.start}"
    return None


def text_problem(text: str, what: str = "text") -> str | None:
    """Why a document's ``text`` (or title) is unusable: a lone surrogate, NUL characters,
    or nothing visible in it (only whitespace or zero-width characters); None when fine."""
    problem = unicode_problem(text)
    if problem:
        return f"{what} is {problem}"
    if "\x00" in text:
        return f"{what} contains NUL characters (binary data is not text)"
    if what == "text" and not has_visible_text(text):
        return "text is empty (only whitespace or invisible characters)"
    return None


def _decode(path: Path, max_bytes: int) -> str:
    """File text, or ValueError with the reason (size, empty, binary, not UTF-8)."""
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"file too large ({size} bytes > limit {max_bytes} bytes)")
    data = path.read_bytes()
    if not data.strip():
        raise ValueError("empty file")
    if b"\x00" in data[:8192]:
        raise ValueError("binary file (NUL bytes), not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (invalid byte at offset {exc.start})") from None
    return text


def _items(path: Path, text: str) -> list[dict]:
    if path.suffix == ".jsonl":
        items = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"invalid JSON on line {number}: {exc.msg}") from None
        return items
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ValueError("JSON must be a list of {title, text} objects")
    return data


_MD_RULES = (
    (re.compile(r"```.*?```", re.DOTALL), " "),          # fenced code
    (re.compile(r"<!--.*?-->", re.DOTALL), " "),          # comments
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), " "),             # images
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),          # links -> their text
    (re.compile(r"<[^>\n]{1,200}>"), " "),                  # HTML tags
    (re.compile(r"^\s{0,3}(#{1,6}|>|[-*+]|\d+\.)\s+", re.MULTILINE), ""),  # heading/quote/list marks
    (re.compile(r"^\s*([-*_=|: ]{3,})\s*$", re.MULTILINE), ""),  # rules, table rulers
    (re.compile(r"[*_`]{1,3}"), ""),                       # emphasis and code marks
    (re.compile(r"[ \t]+"), " "),
)


def markdown_to_text(text: str) -> str:
    """Plain text of a Markdown document (code, images, HTML and markup removed;
    link texts kept), so passages and propositions carry prose, not syntax."""
    for pattern, replacement in _MD_RULES:
        text = pattern.sub(replacement, text)
    text = "\n".join(line.strip() for line in text.splitlines())
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def _title_of(path: Path, text: str) -> str:
    if path.suffix == ".md":
        for line in text.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem


def load_file(path: Path, max_bytes: int) -> tuple[list[SourceDocument], list[LoadError]]:
    """Documents of one file and the errors found in it."""
    if path.suffix.lower() not in SUPPORTED:
        return [], [LoadError(str(path), f"unsupported file type {path.suffix or '(none)'}; use {', '.join(SUPPORTED)}")]
    try:
        text = _decode(path, max_bytes)
        if path.suffix.lower() == ".md":
            body = markdown_to_text(text)
            if not has_visible_text(body):
                raise ValueError("no text left after removing Markdown markup")
            return [SourceDocument(str(path), _title_of(path, text), body)], []
        if path.suffix.lower() == ".txt":
            if not has_visible_text(text):
                raise ValueError("no visible text (only whitespace or invisible characters)")
            return [SourceDocument(str(path), _title_of(path, text), text.strip())], []
        items = _items(path, text)
    except (OSError, ValueError) as exc:
        return [], [LoadError(str(path), str(exc))]
    docs, errors = [], []
    for index, item in enumerate(items):
        source = f"{path}#{index}"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
            errors.append(LoadError(source, "item needs a non-empty string 'text'"))
            continue
        title = item.get("title") if isinstance(item.get("title"), str) else ""
        problem = text_problem(item["text"]) or text_problem(title, "title")
        if problem:
            errors.append(LoadError(source, problem))
            continue
        docs.append(SourceDocument(source, title.strip(), item["text"].strip()))
    if not docs and not errors:
        errors.append(LoadError(str(path), "no documents in file"))
    return docs, errors


def load_path(path: str | Path, max_bytes: int) -> tuple[list[SourceDocument], list[LoadError]]:
    """Documents of a file or of every file under a directory (recursive, sorted; hidden
    files ignored; unsupported types reported as errors).

    Raises FileNotFoundError when ``path`` does not exist.
    """
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no such file or directory: {root}")
    files = [root] if root.is_file() else sorted(
        p for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")
    )
    docs: list[SourceDocument] = []
    errors: list[LoadError] = []
    for file in files:
        found, failed = load_file(file, max_bytes)
        docs.extend(found)
        errors.extend(failed)
    return docs, errors
