"""Load documents from files: ``.txt``, ``.md``, ``.json`` (a list of
``{title, text}``), ``.jsonl`` (one such object per line), ``.pdf`` (pypdf,
text per page), ``.html``/``.htm`` (trafilatura main content and the page's
title) and ``.docx`` (python-docx, headings as sections).

Every file is validated before anything is written: an empty file, a binary
file, bytes that are not UTF-8, a file over the size limit, invalid JSON, an
item without text, an encrypted, corrupt or image-only PDF, HTML without main
content, a ``.docx`` that is not a Word file, or a symbolic link leading out of
the ingested folder each give a :class:`LoadError` naming the file and the
reason; the other files proceed.

Structure is kept for citations: a document is a sequence of
:class:`Segment` (PDF: one per page with text, ``page`` 1-based; Markdown,
HTML, Word: one per heading, ``section`` the heading path ``"A > B"``).
Files carry their absolute path as ``key``: the document's identity is
tenant + key, so a changed file replaces its earlier version.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from pathweave.text import has_visible_text

SUPPORTED = (".txt", ".md", ".json", ".jsonl", ".pdf", ".html", ".htm", ".docx")
SECTION_SEPARATOR = " > "


@dataclass(frozen=True)
class Segment:
    """A part of a document that chunking does not cross: its text, its 1-based PDF
    ``page`` or its heading path ``section`` (``"Guide > Install"``), else None."""

    text: str
    page: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class SourceDocument:
    """One document: ``source`` (file path, ``#i`` for the i-th JSON item), title, text.

    ``segments``: the text split at page/section boundaries (empty: one segment, the
    whole text). ``key``: the stable source identity (absolute path, URL or the
    caller's external id) or None, in which case the document is identified by its
    content (title and text) as before. ``acl``: its access list (principals,
    :mod:`pathweave.access`); None: the tenant's default (setting
    ``access.private_by_default``).
    """

    source: str
    title: str
    text: str
    segments: tuple[Segment, ...] = ()
    key: str | None = None
    warnings: tuple[str, ...] = ()
    acl: tuple[str, ...] | None = None

    def parts(self) -> tuple[Segment, ...]:
        """The segments, or the whole text as one segment."""
        return self.segments or (Segment(self.text),)


def from_segments(source: str, title: str, segments: list[Segment], key: str | None = None) -> SourceDocument:
    """A document from its non-empty segments (text = segments joined by blank lines)."""
    kept = tuple(s for s in segments if s.text.strip())
    return SourceDocument(source, title, "\n\n".join(s.text for s in kept), kept, key)


@dataclass(frozen=True)
class LoadError:
    """Why a file (or one item of it) was rejected; nothing of it is ingested."""

    source: str
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"



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


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


def heading_sections(lines: list[tuple[int | None, str]], title: str = "",
                     clean=lambda text: text.strip()) -> list[Segment]:
    """Segments of a document given as ``(heading level or None, line)`` pairs: one
    :class:`Segment` per heading with the heading path as ``section`` (``"Install >
    Linux"``; a level-1 heading equal to ``title`` is left out of the path) and
    ``clean(body)`` as text, the heading line first. A heading with no text of its own
    leads the next section's text instead of becoming a passage; text before the first
    heading has section None."""
    segments: list[Segment] = []
    path: list[tuple[int, str]] = []
    section: str | None = None
    heading = ""
    body: list[str] = []
    carried: list[str] = []

    def flush() -> None:
        text = clean("\n".join(body))
        if not text:
            if heading:
                carried.append(heading)
            return
        segments.append(Segment("\n\n".join([*carried, heading, text] if heading else [*carried, text]), section=section))
        carried.clear()

    for level, line in lines:
        if level is None:
            body.append(line)
            continue
        flush()
        heading, body = line.strip(), []
        path = [(lv, nm) for lv, nm in path if lv < level] + [(level, heading)]
        names = [nm for _, nm in path]
        if names and names[0] == title and path[0][0] == 1:
            names = names[1:]
        section = SECTION_SEPARATOR.join(names) or None
    flush()
    if carried and segments:  # trailing headings without text: kept with the last section
        last = segments[-1]
        segments[-1] = Segment("\n\n".join([last.text, *carried]), last.page, last.section)
    elif carried:
        segments.append(Segment("\n\n".join(carried), section=section))
    return segments


def markdown_sections(text: str, title: str = "") -> list[Segment]:
    """Markdown split at its headings (see :func:`heading_sections`), markup removed
    (:func:`markdown_to_text`); headings inside fenced code are not headings."""
    lines: list[tuple[int | None, str]] = []
    fenced = False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading:
            lines.append((len(heading.group(1)), markdown_to_text(heading.group(2)) or heading.group(2).strip()))
        else:
            lines.append((None, line))
    return heading_sections(lines, title, markdown_to_text)


def _check_size(path: Path, max_bytes: int) -> None:
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"file too large ({size} bytes > limit {max_bytes} bytes)")
    if size == 0:
        raise ValueError("empty file")


def _has_images(page) -> bool:
    """Does a PDF page draw images (a page without text but with images is a scan)?"""
    try:
        return len(page.images) > 0
    except Exception:  # noqa: BLE001 - an image pypdf cannot decode is still an image
        return True


def _load_pdf(path: Path, max_bytes: int) -> SourceDocument:
    """PDF text per page (pypdf). Raises ValueError: encrypted, corrupt, no text layer."""
    from pypdf import PdfReader

    _check_size(path, max_bytes)
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception:  # noqa: BLE001 - e.g. an algorithm pypdf cannot open
                opened = 0
            if not opened:
                raise ValueError("encrypted PDF (password-protected): decrypt it before ingesting")
        pages = []
        images_only = []
        for number, page in enumerate(reader.pages, 1):
            text = (page.extract_text() or "").strip()
            text = re.sub(r"[ \t]+", " ", text)
            if text:
                pages.append(Segment(text, page=number))
            elif _has_images(page):
                images_only.append(number)  # a scan: reported, never silently empty
        metadata_title = metadata_title_of(reader.metadata.title if reader.metadata else None)
    except ValueError as exc:
        if str(exc).startswith("encrypted PDF"):
            raise
        raise ValueError(f"corrupt PDF: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - pypdf raises many kinds on broken files
        raise ValueError(f"corrupt PDF ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not pages:
        if not images_only:
            raise ValueError("PDF has no text (its pages are blank)")
        raise ValueError(f"PDF has no text layer ({len(images_only)} page(s) of images only, e.g. a scan): "
                         "run OCR on it first")
    warnings = ()
    if images_only:
        warnings = (f"page(s) {', '.join(map(str, images_only))} have no text layer (images only, e.g. scanned) "
                    "and were not ingested",)
    doc = from_segments(str(path), metadata_title.strip() or path.stem, pages)
    return SourceDocument(doc.source, doc.title, doc.text, doc.segments, doc.key, warnings)


#: Titles that producers write when a document has none (reportlab's default is "untitled").
PLACEHOLDER_TITLES = frozenset({"untitled", "untitled document", "no title", "(untitled)", "(anonymous)"})


def metadata_title_of(value: object) -> str:
    """A file's metadata title, or "" when it has none or only a placeholder
    (:data:`PLACEHOLDER_TITLES`): the loader then takes the file name (a PDF without a title
    was cited as "untitled, p. 2")."""
    title = str(value or "").strip()
    return "" if title.lower() in PLACEHOLDER_TITLES else title


def _load_html(path: Path, max_bytes: int) -> SourceDocument:
    """Main content of an HTML page (trafilatura: navigation, boilerplate and scripts
    dropped), split at its headings; title from the page. Raises ValueError."""
    import trafilatura

    text = _decode(path, max_bytes)
    content = trafilatura.extract(text, output_format="markdown", include_formatting=True,
                                  include_comments=False, include_links=False, include_images=False,
                                  favor_precision=True, fast=True)  # no baseline fallback: nav text is no content
    if not content or not content.strip():
        raise ValueError("no main content found in the HTML page (only navigation, boilerplate or scripts)")
    metadata = trafilatura.extract_metadata(text)
    title = metadata_title_of(metadata.title if metadata is not None else None)
    if not title:
        first = next((m for m in map(_HEADING.match, content.splitlines()) if m), None)
        title = first.group(2).strip() if first else path.stem
    segments = markdown_sections(content, title)
    if not segments:
        raise ValueError("no main content found in the HTML page (only navigation, boilerplate or scripts)")
    return from_segments(str(path), title.strip(), segments)


DOCX_EXPANSION_MAX = 100
"""How many times its own size a ``.docx``'s parts may expand to: deflated WordprocessingML
shrinks to between a fifth and a thirtieth of its size (images not at all), a zip bomb to a
thousandth."""

DOCX_EXPANDED_MAX_FILES = 4
"""How many times the file limit a ``.docx``'s parts may expand to in all (what python-docx
parses into memory, about ten times that)."""


def _load_docx(path: Path, max_bytes: int) -> SourceDocument:
    """Paragraphs of a Word ``.docx`` (python-docx), headings as sections. Raises ValueError."""
    import zipfile

    import docx

    _check_size(path, max_bytes)
    if not zipfile.is_zipfile(path):
        raise ValueError("not a Word .docx file (not a zip archive; old binary .doc files are not supported)")
    try:
        with zipfile.ZipFile(path) as package:  # the sizes its parts declare bound what reading them yields
            expanded = sum(part.file_size for part in package.infolist())
    except zipfile.BadZipFile as exc:
        raise ValueError(f"not a readable Word .docx file (a broken zip archive: {exc})") from None
    size = path.stat().st_size
    if expanded > min(DOCX_EXPANSION_MAX * size, DOCX_EXPANDED_MAX_FILES * max_bytes):
        raise ValueError(f"a .docx of {size} bytes that expands to {expanded} bytes (over {DOCX_EXPANSION_MAX}x "
                         f"its size, as a zip bomb does, or {DOCX_EXPANDED_MAX_FILES}x the file limit): refused "
                         "before it is unpacked")
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # noqa: BLE001 - python-docx raises several kinds on broken packages
        raise ValueError(f"not a readable Word .docx file ({type(exc).__name__}: {str(exc)[:200]})") from None
    title = metadata_title_of(document.core_properties.title)
    lines: list[tuple[int | None, str]] = []
    for paragraph in document.paragraphs:
        text = paragraph.text.strip()
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        level = None
        if style == "Title":
            if not title and text:
                title = text
                continue
            level = 1
        elif style.startswith("Heading"):
            digits = style[len("Heading"):].strip()
            level = int(digits) if digits.isdigit() else 1
        if text:
            lines.append((level, text))
    segments = heading_sections(lines, title, lambda body: "\n".join(x for x in body.splitlines() if x.strip()))
    if not segments:
        raise ValueError("no text in the Word document")
    return from_segments(str(path), title or path.stem, segments)


_BINARY_LOADERS = {".pdf": _load_pdf, ".html": _load_html, ".htm": _load_html, ".docx": _load_docx}


def load_file(path: Path, max_bytes: int) -> tuple[list[SourceDocument], list[LoadError]]:
    """Documents of one file and the errors found in it (never raises for bad content).

    Each document's ``key`` is the file's absolute path (``#i`` for JSON items).
    """
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED:
        return [], [LoadError(str(path), f"unsupported file type {path.suffix or '(none)'}; use {', '.join(SUPPORTED)}")]
    key = str(path.absolute())
    try:
        if suffix in _BINARY_LOADERS:
            doc = _BINARY_LOADERS[suffix](path, max_bytes)
            return [SourceDocument(doc.source, doc.title, doc.text, doc.segments, key, doc.warnings)], []
        text = _decode(path, max_bytes)
        if suffix == ".md":
            title = _title_of(path, text)
            segments = markdown_sections(text, title)
            if not segments or not has_visible_text(" ".join(s.text for s in segments)):
                raise ValueError("no text left after removing Markdown markup")
            return [from_segments(str(path), title, segments, key)], []
        if suffix == ".txt":
            if not has_visible_text(text):
                raise ValueError("no visible text (only whitespace or invisible characters)")
            return [SourceDocument(str(path), _title_of(path, text), text.strip(), key=key)], []
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
        docs.append(SourceDocument(source, title.strip(), item["text"].strip(), key=f"{key}#{index}"))
    if not docs and not errors:
        errors.append(LoadError(str(path), "no documents in file"))
    return docs, errors


def escapes(file: Path, root: Path) -> bool:
    """Is ``file`` (under ``root``) a symbolic link, or inside one, that resolves outside ``root``?"""
    try:
        file.resolve().relative_to(root.resolve())
        return False
    except ValueError:
        return True


def load_path(path: str | Path, max_bytes: int) -> tuple[list[SourceDocument], list[LoadError]]:
    """Documents of a file or of every file under a directory (recursive, sorted; hidden
    files ignored; unsupported types and symbolic links leading out of the directory
    reported as errors).

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
        if root.is_dir() and escapes(file, root):
            errors.append(LoadError(str(file), f"symbolic link leading outside the folder {root} "
                                               f"(to {file.resolve()}): not ingested"))
            continue
        found, failed = load_file(file, max_bytes)
        docs.extend(found)
        errors.extend(failed)
    return docs, errors
