"""Per-document access lists enforced inside retrieval, on the real store with the real
extractor and embedder: documents with unique marker sentences and unique names, spread over
folders whose ``.pathweave-acl.toml`` sidecars give them access lists, are ingested through
the CLI; then for every ranking mode, with and without a token budget, in a session, and
for several principal sets, nothing a caller may not read reaches any field of the result,
its reasoning record or the CLI's output (the whole response is walked, so a new field is
covered without editing this test). A restricted query equals the same query on a tenant
that holds only the readable documents; a changed access list holds for the next query."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pathweave.access import Access
from pathweave.errors import NotApplicable
from pathweave_cli.main import app

pytestmark = pytest.mark.store_contract  # the store is its subject: it runs on Neo4j too (conftest)

runner = CliRunner()

# folder -> (its sidecar's access list, or None for no sidecar; {file: text})
FOLDERS = {
    "": (None, {
        "caldris.txt": "Caldris is a port city on the eastern coast. Caldris hosts the archives of the Tidewright "
                       "Guild. The Tidewright Guild was founded in Caldris in 1820.",
        "harbor.txt": "The Harbor of Ostrevane lies north of Caldris. The Harbor of Ostrevane is run by the Tidewright "
                      "Guild, which repairs ships there.",
    }),
    "red": (["group:red"], {
        "ossifrage.txt": "Project Ossifrage is led by Ilsabet Quorne. Ilsabet Quorne works at the Tidewright Guild "
                         "in Caldris. The secret budget of Project Ossifrage is MARKERRED4471.",
    }),
    "red/notes": (None, {  # no sidecar: inherits red's
        "followup.txt": "Ilsabet Quorne reported to Fennick Arlowe about the harbor dredging. Fennick Arlowe "
                        "approved code MARKERREDNOTE2290 for the Harbor of Ostrevane.",
    }),
    "blue": (["group:blue"], {
        "sablewind.txt": "The Sablewind merger was negotiated by Dorvan Prell. Dorvan Prell is a partner of the "
                         "Tidewright Guild. The merger value is MARKERBLUE9923.",
    }),
    "board": (["group:red", "user:alice"], {
        "brivault.txt": "The board of Brivault Holdings met in Caldris. Brivault Holdings owns the Harbor of "
                        "Ostrevane. The minutes reference MARKERALICE1150.",
    }),
    "hr": ([], {
        "tolliver.txt": "Wenna Tolliver was dismissed from the Tidewright Guild after an audit in Caldris. The "
                        "file number is MARKERPRIVATE3307.",
    }),
}
SECRETS = {  # folder -> what only its readers may see (besides its documents' and passages' ids)
    "red": ["MARKERRED4471", "Ilsabet", "Quorne", "Ossifrage"],
    "red/notes": ["MARKERREDNOTE2290", "Fennick", "Arlowe"],
    "blue": ["MARKERBLUE9923", "Dorvan", "Prell", "Sablewind"],
    "board": ["MARKERALICE1150", "Brivault"],
    "hr": ["MARKERPRIVATE3307", "Wenna", "Tolliver"],
}
ACL_OF = {"": None, "red": ["group:red"], "red/notes": ["group:red"], "blue": ["group:blue"],
          "board": ["group:red", "user:alice"], "hr": []}
QUESTIONS = ["Who works at the Tidewright Guild?", "Who owns the Harbor of Ostrevane?",
             "What is the secret budget or code?", "Who was dismissed after an audit in Caldris?"]
PRINCIPAL_SETS = [["group:red"], ["group:blue"], ["user:alice"], ["group:blue", "user:alice"], ["user:nobody"]]
MODES = ("proprag", "dense", "hipporag2")


def scoped(base_store, tenant: str):
    """A store handle of ``tenant`` on the suite's server."""
    from pathweave.store.graph_store import GraphStore

    return GraphStore(base_store.driver, base_store.database, base_store.backend, tenant,
                      base_store.batch_size, base_store.dimensions)


def write_folders(root: Path, folders: dict = FOLDERS) -> None:
    for folder, (acl, files) in folders.items():
        target = root / folder
        target.mkdir(parents=True, exist_ok=True)
        if acl is not None:
            (target / ".pathweave-acl.toml").write_text(f"acl = {json.dumps(acl)}\n")
        for name, text in files.items():
            (target / name).write_text(text + "\n")


def strings(value) -> list[str]:
    """Every string anywhere in ``value`` (keys and values of nested dicts and lists)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in strings(k) + strings(v)]
    if isinstance(value, (list, tuple)):
        return [s for v in value for s in strings(v)]
    return []


@pytest.fixture(scope="module")
def corpus(base_store, tmp_path_factory):
    """The folders ingested through the CLI into a new tenant: ``(tenant, root, {folder: [doc ids]},
    {folder: [passage ids]})``."""
    from pathweave_ingest.documents import source_doc_id

    root = tmp_path_factory.mktemp("acl-corpus")
    write_folders(root)
    tenant = f"acl{uuid.uuid4().hex[:10]}"
    done = runner.invoke(app, ["ingest", str(root), "--sync", "--tenant", tenant])
    assert done.exit_code == 0, done.output
    store = scoped(base_store, tenant)
    docs = {folder: [source_doc_id(tenant, str((root / folder / name).absolute())) for name in files]
            for folder, (_, files) in FOLDERS.items()}
    passages = {folder: [r["passage_id"] for d in ids for r in store.run("api_document_get", doc_id=d)]
                for folder, ids in docs.items()}
    return tenant, root, docs, passages


@pytest.fixture(scope="module")
def retriever(base_store, embedder, settings, corpus):
    from pathweave.query.retriever import Retriever

    return Retriever(scoped(base_store, corpus[0]), embedder, settings)


def forbidden(access: Access, docs: dict, passages: dict) -> list[str]:
    """What ``access`` may not see: the secrets, document ids and passage ids of the folders it may not read."""
    out = []
    for folder, acl in ACL_OF.items():
        if not access.reads(acl):
            out += SECRETS.get(folder, []) + docs[folder] + passages[folder]
    return out


def test_the_sidecars_gave_each_document_its_access_list(base_store, corpus):
    tenant, _, docs, passages = corpus
    store = scoped(base_store, tenant)
    for folder, ids in docs.items():
        for row in store.run("existing_document_hashes", ids=ids):
            assert (None if row["acl"] is None else sorted(row["acl"])) == ACL_OF[folder], folder
    assert all(passages.values())


def test_no_mode_budget_or_session_shows_a_caller_what_it_may_not_read(retriever, corpus):
    _, _, docs, passages = corpus
    seen_everything = " ".join(s for q in QUESTIONS for s in strings(
        retriever.query(q, "proprag", k=10, token_budget=400).model_dump(mode="json")))
    assert "MARKERPRIVATE3307" in seen_everything and "Quorne" in seen_everything  # the unrestricted caller
    for principals in PRINCIPAL_SETS:
        access = Access.of(principals)
        hidden = forbidden(access, docs, passages)
        shown = []
        for mode in MODES:
            for budget in (None, 400):
                for question in QUESTIONS:
                    options = {"token_budget": budget} if budget else {}
                    if budget and mode == "proprag":
                        options["session_id"] = "shared-session"  # every caller asks in the same session
                    result = retriever.query(question, mode, k=10, access=access, **options)
                    record = retriever.read_record(result.query_id, access)
                    text = strings(result.model_dump(mode="json")) + strings(record)
                    leaked = [h for h in hidden if any(h.lower() in s.lower() for s in text)]
                    assert not leaked, (principals, mode, budget, question, leaked)
                    shown += text
                    with pytest.raises(KeyError):  # a restricted caller reads no unrestricted record
                        retriever.read_record(retriever.query(question, mode, k=3).query_id, access)
        readable = [m for folder, acl in ACL_OF.items() if access.reads(acl) and acl
                    for m in SECRETS[folder][:1]]
        assert all(any(m in s for s in shown) for m in readable), (principals, readable)  # and it does see its own


def test_mode_apr_refuses_a_restricted_caller(retriever):
    with pytest.raises(NotApplicable):
        retriever.query("Who works at the Tidewright Guild?", "apr", access=Access.of(["group:red"]))


def test_a_restricted_query_equals_the_query_on_a_tenant_of_the_readable_documents(base_store, embedder, settings,
                                                                                    corpus, tmp_path):
    from pathweave.query.retriever import Retriever

    _, _, docs, _ = corpus
    access = Access.of(["group:red"])
    readable = {folder: (None, files) for folder, (_, files) in FOLDERS.items() if access.reads(ACL_OF[folder])}
    write_folders(tmp_path, readable)
    alone_tenant = f"acla{uuid.uuid4().hex[:10]}"
    assert runner.invoke(app, ["ingest", str(tmp_path), "--tenant", alone_tenant]).exit_code == 0
    restricted = Retriever(scoped(base_store, corpus[0]), embedder, settings)
    alone = Retriever(scoped(base_store, alone_tenant), embedder, settings)
    for mode in MODES:
        for question in QUESTIONS:
            mine = restricted.query(question, mode, k=5, access=access, write_record=False)
            theirs = alone.query(question, mode, k=5, write_record=False)
            assert [p.text for p in mine.passages] == [p.text for p in theirs.passages], (mode, question)
            assert [round(p.score, 5) for p in mine.passages] == [round(p.score, 5) for p in theirs.passages]


def test_a_changed_access_list_holds_for_the_next_query(base_store, retriever, corpus):
    from pathweave_ingest.lifecycle import NoSuchDocument, set_acl

    tenant, _, docs, _ = corpus
    store = scoped(base_store, tenant)
    blue = Access.of(["group:blue"])
    question = "Who owns the Harbor of Ostrevane?"

    def sees_board() -> bool:
        result = retriever.query(question, "dense", k=10, access=blue, write_record=False)
        return any("MARKERALICE1150" in p.text for p in result.passages)

    assert not sees_board()
    set_acl(store, docs["board"][0], ["group:red", "group:blue"])
    try:
        assert sees_board()
        assert not retriever.query(question, "dense", k=10, access=Access.of(["user:alice"]),
                                   write_record=False).passages[0].text.count("MARKERALICE1150")
    finally:
        set_acl(store, docs["board"][0], ["group:red", "user:alice"])
    assert not sees_board()
    with pytest.raises(NoSuchDocument):
        set_acl(store, "doc:000000000000000000000000", None)


def test_a_record_read_after_an_access_list_changed_leaves_out_what_its_reader_no_longer_reads(
        base_store, retriever, corpus):
    """A restricted caller's record, read after a PATCH took a document away from it: the
    paths, statements and passages of that document are left out, ``withheld`` says so and
    the answer-bearing parts are gone; before the change, and for an unrestricted reader, the
    record is whole."""
    from pathweave_ingest.lifecycle import set_acl

    tenant, _, docs, _ = corpus
    store = scoped(base_store, tenant)
    blue = Access.of(["group:blue"])
    result = retriever.query("Who negotiated the Sablewind merger, and what is its value?", "proprag", k=5,
                             access=blue, token_budget=400)
    before = retriever.read_record(result.query_id, blue)
    assert before["withheld"] is False and any("MARKERBLUE9923" in s or "Dorvan" in s for s in strings(before))
    set_acl(store, docs["blue"][0], [])
    try:
        after = retriever.read_record(result.query_id, blue)
        leaked = [s for s in strings({k: v for k, v in after.items() if k != "text"})  # not the question itself
                  for secret in SECRETS["blue"] if secret.lower() in s.lower()]
        assert after["withheld"] is True and not leaked, leaked
        assert after["answer"] is None and after["tree"] is None
        assert [row for row in after["selected"] if row["label"] not in ("Passage", "Proposition")] == []
        assert retriever.read_record(result.query_id)["withheld"] is False  # the unrestricted reader reads it whole
    finally:
        set_acl(store, docs["blue"][0], ["group:blue"])
    assert retriever.read_record(result.query_id, blue)["withheld"] is False


def test_the_cli_query_as_principals_and_a_folder_sync_of_changed_sidecars(base_store, corpus, tmp_path):
    tenant, root, docs, passages = corpus
    for principals in (["group:blue"], ["user:alice"]):
        out = runner.invoke(app, ["query", "Who works at the Tidewright Guild?", "--tenant", tenant, "--json",
                                  "--as", ",".join(principals), "--k", "10"])
        assert out.exit_code == 0, out.output
        hidden = forbidden(Access.of(principals), docs, passages)
        assert not [h for h in hidden if h.lower() in out.stdout.lower()]
    bad = runner.invoke(app, ["query", "x", "--tenant", tenant, "--as", "finance"])
    assert bad.exit_code == 2 and "principal" in bad.output

    # a folder sync applies a changed sidecar without re-ingesting: a copy of the corpus in its own tenant
    write_folders(tmp_path)
    synced = f"acls{uuid.uuid4().hex[:10]}"
    assert runner.invoke(app, ["ingest", str(tmp_path), "--sync", "--tenant", synced]).exit_code == 0
    (tmp_path / "blue" / ".pathweave-acl.toml").write_text('acl = ["group:red"]\n')
    plan = runner.invoke(app, ["ingest", str(tmp_path), "--sync", "--dry-run", "--tenant", synced])
    assert plan.exit_code == 0 and "acl " in plan.stdout and "sablewind.txt" in plan.stdout, plan.stdout
    store = scoped(base_store, synced)
    counts = store.document_counts()
    again = runner.invoke(app, ["ingest", str(tmp_path), "--sync", "--tenant", synced])
    assert again.exit_code == 0 and "1 with a new access list" in again.output, again.output
    assert store.document_counts() == counts  # nothing re-ingested
    from pathweave_ingest.documents import source_doc_id

    row = store.run("existing_document_hashes",
                    ids=[source_doc_id(synced, str((tmp_path / "blue" / "sablewind.txt").absolute()))])[0]
    assert row["acl"] == ["group:red"]
    (tmp_path / "red" / ".pathweave-acl.toml").write_text('acl = "group:red"\n')
    broken = runner.invoke(app, ["ingest", str(tmp_path), "--sync", "--tenant", synced])
    assert broken.exit_code == 2 and ".pathweave-acl.toml" in broken.output  # a bad sidecar changes nothing
    assert store.document_counts() == counts


def test_a_passage_two_documents_hold_is_cited_by_the_one_the_caller_may_read(base_store, embedder, settings,
                                                                              tmp_path):
    """The same text in a red document and in a public one is one passage: a blue caller
    gets it cited by the public document even where the red one comes first (by id), a red
    caller by the first, and a passage one document holds by that document; also where the
    red document came to hold it after queries had built their views."""
    from pathweave.query.retriever import Retriever
    from pathweave_ingest.documents import source_doc_id

    tenant = f"acls{uuid.uuid4().hex[:10]}"
    # one title (a passage's id is its document title's and its text's): the file names differ
    text = ("# Varnholm lighthouse\n\n"
            "The lighthouse of Varnholm was rebuilt by Oskaria Venn in 1911 after the winter storm.")
    (tmp_path / "red").mkdir()
    (tmp_path / "open").mkdir()
    (tmp_path / "red" / ".pathweave-acl.toml").write_text('acl = ["group:red"]\n')
    public = source_doc_id(tenant, str((tmp_path / "open" / "copy.md").absolute()))
    name = next(f"copy{i}.md" for i in range(1000)
                if source_doc_id(tenant, str((tmp_path / "red" / f"copy{i}.md").absolute())) < public)
    secret = source_doc_id(tenant, str((tmp_path / "red" / name).absolute()))
    (tmp_path / "open" / "copy.md").write_text(text + "\n")
    (tmp_path / "open" / "other.txt").write_text("The ferry to Varnholm leaves twice a day from the old pier.\n")
    assert runner.invoke(app, ["ingest", str(tmp_path / "open"), "--tenant", tenant]).exit_code == 0
    retriever = Retriever(scoped(base_store, tenant), embedder, settings)
    question = "Who rebuilt the lighthouse of Varnholm?"
    for mode in MODES:  # views built while the public document alone holds the passage
        retriever.query(question, mode, k=5, access=Access.of(["group:red"]), write_record=False)
    (tmp_path / "red" / name).write_text(text + "\n")  # the same passage, now held by two documents
    assert runner.invoke(app, ["ingest", str(tmp_path), "--tenant", tenant]).exit_code == 0
    seen_other = 0
    for mode in MODES:
        for principals, cited in ((["group:blue"], public), (["group:red"], secret), (None, secret)):
            hits = retriever.query(question, mode, k=5, access=Access.of(principals), write_record=False).passages
            assert sum("Oskaria" in hit.text for hit in hits) == 1, hits  # one passage
            top = next(hit for hit in hits if "Oskaria" in hit.text)
            assert top.doc_id == cited and ("/red/" in (top.source or "")) == (cited == secret), (mode, principals, top)
            for other in (hit for hit in hits if "ferry" in hit.text):  # one document holds it
                seen_other += 1
                assert other.doc_id == source_doc_id(tenant, str((tmp_path / "open" / "other.txt").absolute()))
    assert seen_other
