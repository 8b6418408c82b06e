"""Enterprise documents (issue 13): PDF, HTML and Word in with page/section metadata,
source identity (a changed file replaces its old version), folder sync and the bad
inputs. Fixtures are generated here (reportlab, python-docx), against the real store
server, spaCy and the embedder."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pathweave_ingest.loaders import load_path

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

PAGES = [
    "Acme Corporation was founded by Jane Smith in Boston in 1999. Acme builds rockets.",
    "The Denver office of Acme Corporation designs rocket engines for lunar landers.",
    "Paul Martin directs the Lyon office of Acme Corporation since 2005.",
]
HTML = """<html><head><title>Acme Handbook</title><script>var tracking = "nav-secret";</script></head><body>
<nav><a href='/'>Home</a> | <a href='/about'>About us</a> | <a href='/jobs'>Careers portal</a></nav>
<article><h1>Acme Handbook</h1>
<p>The Acme handbook explains how the company works and where its people sit every day.</p>
<h2>Offices</h2><p>The main office of Acme Corporation is in Denver, Colorado. It employs four hundred
engineers who design engines and test them in the mountains every spring.</p>
<h3>Europe</h3><p>The European office is in Lyon, France. It opened in 2005 under director Paul Martin,
who hired the first thirty engineers of the company outside America.</p></article>
<footer>Copyright 2024 Acme. Privacy policy. Cookie settings.</footer></body></html>"""




def make_docx(path: Path) -> Path:
    import docx

    d = docx.Document()
    d.add_heading("Employee Guide", 0)
    d.add_heading("Benefits", 1)
    d.add_paragraph("Employees of Acme Corporation get thirty days of paid leave every year.")
    d.add_heading("Travel", 1)
    d.add_heading("Europe", 2)
    d.add_paragraph("Trips to the Lyon office need the approval of Paul Martin.")
    d.save(str(path))
    return path


def passages_of(store) -> list[dict]:
    ids = [row["id"] for row in store.run("snapshot_passages")]
    return list(store.run("passage_citations", ids=ids))


def test_pdf_html_docx_and_markdown_land_with_page_and_section(tmp_path, pipeline, store, settings, make_pdf):
    make_pdf(tmp_path / "report.pdf", PAGES)
    (tmp_path / "handbook.html").write_text(HTML)
    make_docx(tmp_path / "guide.docx")
    (tmp_path / "notes.md").write_text("# Notes\n\nIntro line about Acme.\n\n## Launch\n\nThe first launch was in 2001.\n")
    documents, errors = load_path(tmp_path, settings.ingest.max_file_bytes)
    assert errors == []
    report = pipeline.ingest(documents, errors)
    assert report.documents_new == 4 and report.errors == []
    rows = passages_of(store)
    pdf = sorted((r["page"], r["title"]) for r in rows if r["page"] is not None)
    assert pdf == [(1, "Annual Report"), (2, "Annual Report"), (3, "Annual Report")]
    sections = {(r["title"], r["section"]) for r in rows if r["section"]}
    assert {("Acme Handbook", "Offices"), ("Acme Handbook", "Offices > Europe"), ("Employee Guide", "Benefits"),
            ("Employee Guide", "Travel > Europe"), ("Notes", "Launch")} <= sections
    texts = " ".join(r["text"] for r in store.run("snapshot_passages"))
    assert "Lyon" in texts and "Privacy policy" not in texts and "nav-secret" not in texts
    assert "Careers portal" not in texts
    page3 = [r for r in store.run("snapshot_passages") if "Paul Martin directs" in r["text"]]
    assert len(page3) == 1 and "Denver" not in page3[0]["text"]  # no passage crosses a page


def test_a_pdf_without_a_title_is_titled_by_its_file_name(tmp_path, settings, make_pdf):
    # reportlab (like many producers) writes the placeholder "untitled" when a PDF has no
    # title: it was cited as "untitled, p. 2"
    import pypdf

    path = make_pdf(tmp_path / "q3-board-minutes.pdf", PAGES, title=None)
    assert pypdf.PdfReader(str(path)).metadata.title == "untitled"
    (doc,), errors = load_path(path, settings.ingest.max_file_bytes)
    assert errors == [] and doc.title == "q3-board-minutes"
    make_pdf(tmp_path / "titled.pdf", PAGES)
    (doc,), _ = load_path(tmp_path / "titled.pdf", settings.ingest.max_file_bytes)
    assert doc.title == "Annual Report"


def test_a_query_cites_the_page_and_the_record_too(tmp_path, pipeline, store, embedder, settings, make_pdf):
    from pathweave.records.citations import cite_result
    from pathweave.query.retriever import Retriever

    make_pdf(tmp_path / "report.pdf", PAGES)
    make_docx(tmp_path / "guide.docx")
    documents, errors = load_path(tmp_path, settings.ingest.max_file_bytes)
    pipeline.ingest(documents, errors)
    retriever = Retriever(store, embedder, settings.model_copy(update={"tenant": store.tenant}))
    result = retriever.query("Who directs the Lyon office of Acme?", mode="dense", k=2, token_budget=200)
    retriever.flush()
    cite_result(store, result)
    assert result.passages[0].reference == "Annual Report, p. 3" and result.passages[0].page == 3
    assert any(line.reference == "Annual Report, p. 3" for line in result.context.lines)
    record = retriever.read_record(result.query_id)
    refs = {row["reference"] for row in record["selected"]}
    assert "Annual Report, p. 3" in refs
    guide = retriever.query("How many days of paid leave do employees get?", mode="dense", k=1)
    cite_result(store, guide)
    assert guide.passages[0].reference == "Employee Guide > Benefits"


def test_a_changed_source_replaces_its_old_version(tmp_path, pipeline, store, embedder, extractor, settings, make_pdf):
    import uuid

    from pathweave.store.graph_store import GraphStore
    from pathweave_ingest.pipeline import Pipeline

    folder = tmp_path / "docs"
    folder.mkdir()
    make_pdf(folder / "report.pdf", PAGES)
    (folder / "other.txt").write_text("Quillon is a harbour town famous for the Brass Lighthouse.")
    first = pipeline.ingest(*load_path(folder, settings.ingest.max_file_bytes))
    assert first.documents_new == 2
    version, counts = store.graph_version(), store.counts()
    again = pipeline.ingest(*load_path(folder, settings.ingest.max_file_bytes))
    assert again.documents_new == 0 and store.graph_version() == version and store.counts() == counts

    new_pages = [PAGES[0], "The Denver office of Acme Corporation was closed and sold to Zorblat Industries.",
                 PAGES[2]]
    make_pdf(folder / "report.pdf", new_pages)
    changed = pipeline.ingest(*load_path(folder, settings.ingest.max_file_bytes))
    assert changed.documents_replaced == 1 and changed.documents_new == 1
    assert store.graph_version() > version
    assert changed.change.removed_passage_ids and changed.change.added_passage_ids
    texts = [r["text"] for r in store.run("snapshot_passages")] + [r["text"] for r in store.run("snapshot_propositions")]
    assert not any("lunar landers" in t for t in texts)  # nothing of the old version is retrievable
    assert any("Zorblat" in t for t in texts)

    fresh = GraphStore(store.driver, store.database, store.backend, f"t{uuid.uuid4().hex[:10]}",
                       store.batch_size, store.dimensions)
    Pipeline(fresh, embedder, extractor, settings.model_copy(update={"tenant": fresh.tenant})).ingest(
        *load_path(folder, settings.ingest.max_file_bytes))
    ours, theirs = store.counts(), fresh.counts()
    ours.pop("Meta", None), theirs.pop("Meta", None)
    assert ours == theirs


def test_sync_removes_exactly_the_deleted_file(tmp_path, base_store, tenant, settings, make_pdf):
    from pathweave.store.graph_store import GraphStore
    from pathweave_cli.main import app

    runner = CliRunner()
    folder = tmp_path / "sync"
    folder.mkdir()
    make_pdf(folder / "report.pdf", PAGES)
    (folder / "a.txt").write_text("Warsaw is the capital of Poland. The Vistula flows through Warsaw.")
    (folder / "b.md").write_text("# Curie\n\nMarie Curie was born in Warsaw.\n")
    first = runner.invoke(app, ["ingest", str(folder), "--sync", "--tenant", tenant])
    assert first.exit_code == 0, first.output
    store = GraphStore(base_store.driver, base_store.database, base_store.backend, tenant,
                       base_store.batch_size, base_store.dimensions)
    before = {r["source"] for r in store.run("documents_list")}
    assert len(before) == 3
    os.remove(folder / "a.txt")
    counts, version = store.counts(), store.graph_version()
    dry = runner.invoke(app, ["ingest", str(folder), "--sync", "--dry-run", "--tenant", tenant])
    assert dry.exit_code == 0, dry.output
    assert "remove" in dry.stdout and "a.txt" in dry.stdout and "1 to remove" in dry.stdout
    assert store.counts() == counts and store.graph_version() == version
    synced = runner.invoke(app, ["ingest", str(folder), "--sync", "--tenant", tenant])
    assert synced.exit_code == 0 and "documents: 1 removed, 2 unchanged;" in synced.output, synced.output
    after = {r["source"] for r in store.run("documents_list")}
    assert after == before - {str((folder / "a.txt").absolute())}
    assert store.graph_version() == version + 1
    # one file changed, one gone, one new: the summary says what happened to each
    (folder / "b.md").write_text("# Curie\n\nMarie Curie was born in Warsaw in 1867.\n")
    os.remove(folder / "report.pdf")
    (folder / "c.txt").write_text("Krakow lies on the Vistula.")
    mixed = runner.invoke(app, ["ingest", str(folder), "--sync", "--tenant", tenant])
    assert mixed.exit_code == 0 and "documents: 1 added, 1 replaced, 1 removed;" in mixed.output, mixed.output


def test_the_dry_run_says_what_the_sync_then_does(tmp_path, base_store, tenant):
    """On a folder with an added, a changed, a removed file and a changed sidecar, each
    file's line of ``--sync --dry-run`` is what the sync then does to its document (one
    plan: pathweave_ingest.plan), and the counts agree."""
    from pathweave.store.graph_store import GraphStore
    from pathweave_cli.main import app

    runner = CliRunner()
    folder = tmp_path / "tree"
    (folder / "red").mkdir(parents=True)
    (folder / "keep.txt").write_text("Warsaw is the capital of Poland.")
    (folder / "change.md").write_text("# Curie\n\nMarie Curie was born in Warsaw.\n")
    (folder / "gone.txt").write_text("Krakow lies on the Vistula.")
    (folder / "red" / "rule.txt").write_text("Trips to Lyon need approval from Paul Martin.")
    (folder / "red" / ".pathweave-acl.toml").write_text('acl = ["group:red"]\n')
    assert runner.invoke(app, ["ingest", str(folder), "--sync", "--tenant", tenant]).exit_code == 0
    store = GraphStore(base_store.driver, base_store.database, base_store.backend, tenant,
                       base_store.batch_size, base_store.dimensions)

    def stored() -> dict[str, tuple]:
        rows = {r["doc_id"]: r for r in store.run("documents_with_source_prefix",
                                                                  prefix=str(folder.absolute()) + os.sep)}
        acls = {r["id"]: r["acl"] for r in store.run("existing_document_hashes", ids=list(rows))}
        return {Path(r["source"]).name: (r["content_hash"], acls[doc_id]) for doc_id, r in rows.items()}

    (folder / "new.txt").write_text("The Vistula flows through Krakow and Warsaw.")
    (folder / "change.md").write_text("# Curie\n\nMarie Curie was born in Warsaw in 1867.\n")
    os.remove(folder / "gone.txt")
    (folder / "red" / ".pathweave-acl.toml").write_text('acl = ["group:blue"]\n')
    before, version = stored(), store.graph_version()
    dry = runner.invoke(app, ["ingest", str(folder), "--sync", "--dry-run", "--tenant", tenant])
    assert dry.exit_code == 0, dry.output
    assert store.graph_version() == version and stored() == before  # nothing written
    said = {Path(line.split(None, 1)[1]).name: line.split(None, 1)[0] for line in dry.stdout.splitlines()
            if line.split(None, 1)[0] in ("add", "replace", "acl", "keep", "remove")}
    assert said == {"new.txt": "add", "change.md": "replace", "rule.txt": "acl", "keep.txt": "keep",
                    "gone.txt": "remove"}, dry.stdout
    assert "1 to add, 1 to replace, 1 to get a new access list, 1 to remove, 1 unchanged" in dry.stdout

    synced = runner.invoke(app, ["ingest", str(folder), "--sync", "--tenant", tenant])
    assert synced.exit_code == 0, synced.output
    assert "documents: 1 added, 1 replaced, 1 removed, 1 unchanged, 1 with a new access list;" in \
        " ".join(synced.output.split()), synced.output  # (the console wraps long lines)
    after = stored()
    did = {name: "add" if name not in before else "remove" if name not in after else
           "replace" if after[name][0] != before[name][0] else "acl" if after[name][1] != before[name][1] else "keep"
           for name in set(before) | set(after)}
    assert did == said
    assert after["rule.txt"][1] == ["group:blue"]


def _bad(tmp_path: Path, case: str, make_pdf) -> tuple[Path, str]:
    folder = tmp_path / "in"
    folder.mkdir()
    if case == "encrypted":
        return make_pdf(folder / "locked.pdf", PAGES[:1], encrypt="secret"), "encrypted PDF"
    if case == "corrupt":
        (folder / "broken.pdf").write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage")
        return folder / "broken.pdf", "corrupt PDF"
    if case == "images":
        return make_pdf(folder / "scan.pdf", ["", ""], images=True), "no text layer"
    if case == "html":
        (folder / "empty.html").write_text("<html><body><nav><a href='/'>Home</a></nav><footer>Copyright</footer>"
                                           "<script>var x = 1;</script></body></html>")
        return folder / "empty.html", "no main content"
    if case == "docx":
        (folder / "old.docx").write_bytes(b"\xd0\xcf\x11\xe0 an old binary word file")
        return folder / "old.docx", "not a Word .docx file"
    if case == "bomb":  # a file of about 60 kB whose text expands to about 20 MB
        import docx

        d = docx.Document()
        d.add_paragraph("a" * 20_000_000)
        d.save(str(folder / "bomb.docx"))
        return folder / "bomb.docx", "refused before it is unpacked"
    if case == "size":
        make_pdf(folder / "big.pdf", PAGES * 40)
        return folder / "big.pdf", "file too large"
    outside = tmp_path / "secret.txt"
    outside.write_text("Secret text outside the folder.")
    (folder / "link.txt").symlink_to(outside)
    return folder / "link.txt", "symbolic link leading outside"


@pytest.mark.parametrize("case", ["encrypted", "corrupt", "images", "html", "docx", "bomb", "size", "symlink"])
def test_bad_input_gets_its_message_and_writes_nothing(tmp_path, pipeline, store, settings, case, make_pdf):
    path, reason = _bad(tmp_path, case, make_pdf)
    limit = 3000 if case == "size" else settings.ingest.max_file_bytes
    if case == "bomb":  # far within the limit as a file; a real Word file loads
        assert path.stat().st_size < limit / 100 and load_path(make_docx(tmp_path / "guide.docx"), limit)[0]
    documents, errors = load_path(path.parent, limit)
    assert documents == []
    assert len(errors) == 1 and reason in errors[0].reason and path.name in errors[0].source, errors
    report = pipeline.ingest(documents, errors)
    assert report.documents_new == 0 and store.counts() == {} and store.graph_version() == 0


def test_scanned_pages_next_to_text_pages_are_reported(tmp_path, settings):
    from reportlab.lib.pagesizes import letter
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen import canvas
    from PIL import Image

    path = tmp_path / "mixed.pdf"
    c = canvas.Canvas(str(path), pagesize=letter)
    c.drawString(72, 700, PAGES[0])
    c.showPage()
    c.drawImage(ImageReader(Image.new("RGB", (60, 40), (120, 30, 30))), 100, 100, 300, 200)
    c.showPage()
    c.showPage()  # a blank page is neither text nor a scan
    c.save()
    (doc,), errors = load_path(path, settings.ingest.max_file_bytes)
    assert errors == [] and [s.page for s in doc.segments] == [1]
    assert len(doc.warnings) == 1 and "page(s) 2 have no text layer" in doc.warnings[0]
