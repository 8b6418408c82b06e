// Pathweave reasoning explorer: draws a query's stored reasoning record (GET /v1/queries/{id})
// with Cytoscape.js, and lists the tenant's recent queries (GET /v1/queries).
// The page holds no tenant data: everything comes from the authenticated API, with the key
// the user enters once (kept in sessionStorage). Stored text is only ever set with
// textContent or as a Cytoscape label (drawn on a canvas), never parsed as HTML.
"use strict";

(function () {
  const KEY = "pathweave.apiKey";
  const HEX32 = /^[0-9a-f]{32}$/;
  const $ = (id) => document.getElementById(id);

  function setStatus(text) { $("status").textContent = text; }
  function setState(state) { document.body.dataset.state = state; }

  function apiKey() { return sessionStorage.getItem(KEY); }

  async function api(path) {
    const response = await fetch(path, {
      headers: { "Authorization": "Bearer " + apiKey(), "Accept": "application/json" },
      credentials: "omit", cache: "no-store", redirect: "error",
    });
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const error = new Error((body && (body.detail || body.title)) || ("HTTP " + response.status));
      error.status = response.status;
      throw error;
    }
    return body;
  }

  function askForKey(message) {
    $("key-form").hidden = false;
    $("forget").hidden = true;
    setStatus(message || "Enter an API key to read this tenant's queries.");
    setState("key");
    $("key").focus();
  }

  // ------------------------------------------------------------------ the record as a graph

  function short(text, n) {
    if (text == null) return "";
    text = String(text);
    return text.length > n ? text.slice(0, n - 1) + "…" : text;
  }

  // The graph of a record: node and edge ids follow fixed rules (tests rebuild them from the record).
  function recordElements(record) {
    const nodes = new Map();
    const edges = new Map();
    const node = (id, kind, label, data) => {
      if (!nodes.has(id)) nodes.set(id, { data: Object.assign({ id: id, kind: kind, label: label }, data || {}) });
      return id;
    };
    const edge = (kind, source, target, label) => {
      const id = kind + ":" + source + "->" + target;
      if (!edges.has(id)) edges.set(id, { data: { id: id, kind: kind, source: source, target: target, label: label || "" } });
    };
    const texts = {};
    for (const row of record.selected || []) if (row.id && row.text != null) texts[row.id] = row.text;
    for (const path of record.paths || []) for (const step of path.steps) texts[step.prop_id] = step.text;

    const q = node("query", "query", short(record.text, 80), { text: record.text, ref: record.query_id, mode: record.mode });
    for (const path of record.paths || []) {
      const p = node("path:" + path.path_id, "path", "path " + path.rank,
        { text: (path.steps || []).map((s) => s.text).join(" → "), ref: path.path_id, score: path.score });
      edge("found", q, p, "#" + path.rank + (path.score != null ? " " + Number(path.score).toFixed(3) : ""));
      let previous = null;
      for (const step of path.steps || []) {
        const x = node("prop:" + step.prop_id, "prop", short(step.text, 60), { text: step.text, ref: step.prop_id });
        if (previous === null) {
          edge("step", p, x, "1");
        } else if (step.via) {
          const v = node("via:" + step.via, "via", short(step.via, 40), { text: step.via, ref: step.via });
          edge("via", previous, v, "");
          edge("via", v, x, "");
        } else {
          edge("jump", previous, x, "jump");
        }
        previous = x;
      }
    }
    const passages = {};
    for (const passage of record.passages || []) {
      passages[passage.passage_id] = passage;
      const id = node("passage:" + passage.passage_id, "passage", short(passage.title || passage.text, 40),
        { text: passage.text, ref: passage.passage_id, doc_id: passage.doc_id, doc_title: passage.doc_title,
          source: passage.source });
      for (const prop of passage.states || []) {
        edge("states", id, node("prop:" + prop, "prop", short(texts[prop], 60), { text: texts[prop], ref: prop }), "states");
      }
    }
    for (const row of record.selected || []) {
      if (!row.id) continue;
      let id;
      if (row.label === "Passage") {
        const passage = passages[row.id] || {};
        id = node("passage:" + row.id, "passage", short(passage.title || row.text, 40),
          { text: row.text, ref: row.id, doc_id: passage.doc_id, doc_title: passage.doc_title, source: passage.source });
      } else if (row.label === "Proposition") {
        id = node("prop:" + row.id, "prop", short(row.text, 60), { text: row.text, ref: row.id });
      } else {
        id = node("entity:" + row.id, "entity", short(row.text || row.id, 40), { text: row.text, ref: row.id });
      }
      nodes.get(id).data.selected_rank = row.rank;
      nodes.get(id).data.selected_weight = row.weight;
      edge("selected", q, id, "selected " + row.rank);
    }
    const passageNode = (passageId, title) => {
      const passage = passages[passageId] || {};
      return node("passage:" + passageId, "passage", short(passage.title || title || passageId, 40),
        { text: passage.text, ref: passageId, doc_id: passage.doc_id, doc_title: passage.doc_title, source: passage.source });
    };
    const tree = record.tree;  // PruneRAG (spec §4): sub-questions and entities, pruned by confidence
    if (tree && tree.nodes && tree.nodes.length) {
      for (const n of tree.nodes) {
        const outcome = n.decision + (n.confidence != null ? " " + Number(n.confidence).toFixed(2) : "");
        node("tree:" + n.node_id, "tree", short(n.text, 50) + " [" + outcome + "]",
          { text: n.text + (n.answer ? "\n→ " + n.answer : "") + (n.error ? "\n(" + n.error + ")" : ""),
            ref: n.node_id, decision: n.decision, confidence: n.confidence });
        for (const hit of n.passages || []) edge("retrieved", "tree:" + n.node_id, passageNode(hit.passage_id, hit.title), "#" + hit.rank);
      }
      edge("tree", q, "tree:" + tree.nodes[0].node_id, "tree");
      for (const n of tree.nodes) for (const child of n.children || []) edge("child", "tree:" + n.node_id, "tree:" + child, "");
    }
    const answer = record.answer;
    if (answer) {
      const a = node("answer", "answer", answer.text ? short(answer.text, 60) : "(no answer)",
        { text: answer.text || ("no answer: " + (answer.error || "")), ref: answer.source,
          extra: answer.llm_calls + " LLM calls · " + answer.prompt_tokens + " prompt tokens · " + answer.model });
      edge("answered", q, a, "answer");
      for (const cited of answer.cited || []) {
        const target = cited.label === "Proposition"
          ? node("prop:" + cited.id, "prop", short(texts[cited.id] || cited.id, 60), { text: texts[cited.id], ref: cited.id })
          : passageNode(cited.id);
        edge("cites", a, target, "cites");
      }
    }
    return { nodes: Array.from(nodes.values()), edges: Array.from(edges.values()) };
  }

  const STYLE = [
    { selector: "node", style: { "label": "data(label)", "font-size": 9, "text-wrap": "wrap", "text-max-width": 140,
      "text-valign": "bottom", "text-margin-y": 3, "width": 18, "height": 18, "color": "#222" } },
    { selector: "node[kind = 'query']", style: { "background-color": "#24364b", "shape": "star", "width": 30, "height": 30, "font-weight": "bold" } },
    { selector: "node[kind = 'path']", style: { "background-color": "#8e44ad", "shape": "diamond" } },
    { selector: "node[kind = 'prop']", style: { "background-color": "#2e86c1", "shape": "round-rectangle" } },
    { selector: "node[kind = 'via']", style: { "background-color": "#d68910", "shape": "ellipse", "width": 12, "height": 12 } },
    { selector: "node[kind = 'passage']", style: { "background-color": "#229954", "shape": "rectangle" } },
    { selector: "node[kind = 'entity']", style: { "background-color": "#c0392b", "shape": "ellipse" } },
    { selector: "node[kind = 'answer']", style: { "background-color": "#f1c40f", "shape": "hexagon", "width": 26, "height": 26 } },
    { selector: "node[kind = 'tree']", style: { "background-color": "#5d6d7e", "shape": "vee" } },
    { selector: "node[decision = 'dead'], node[decision = 'low_confidence']", style: { "opacity": 0.55 } },
    { selector: "node:selected", style: { "border-width": 3, "border-color": "#f1c40f" } },
    { selector: "edge", style: { "width": 1.5, "curve-style": "bezier", "target-arrow-shape": "triangle", "label": "data(label)",
      "font-size": 7, "line-color": "#999", "target-arrow-color": "#999", "text-rotation": "autorotate" } },
    { selector: "edge[kind = 'selected']", style: { "line-style": "dashed", "line-color": "#c7c7c7", "target-arrow-color": "#c7c7c7" } },
    { selector: "edge[kind = 'states']", style: { "line-color": "#7dcea0", "target-arrow-color": "#7dcea0" } },
    { selector: "edge[kind = 'via']", style: { "line-color": "#f0b27a", "target-arrow-color": "#f0b27a" } },
  ];

  const KINDS = { query: "Query", path: "Path", prop: "Proposition", via: "Linking entity", passage: "Passage", entity: "Entity",
    answer: "Answer", tree: "PruneRAG node" };

  function showNode(data) {
    $("panel-kind").textContent = KINDS[data.kind] || data.kind;
    $("panel-id").textContent = data.ref || data.id;
    $("panel-text").textContent = data.text == null ? "" : String(data.text);
    const extra = [];
    if (data.mode) extra.push("mode " + data.mode);
    if (data.extra) extra.push(data.extra);
    if (data.decision) extra.push(data.decision + (data.confidence != null ? " (confidence " + Number(data.confidence).toFixed(3) + ")" : ""));
    if (data.score != null) extra.push("score " + Number(data.score).toFixed(4));
    if (data.selected_rank != null) extra.push("selected #" + data.selected_rank + " (weight " + Number(data.selected_weight).toFixed(4) + ")");
    $("panel-extra").textContent = extra.join(" · ");
    const doc = $("panel-doc");
    doc.hidden = !data.doc_id;
    if (data.doc_id) {
      const link = $("panel-doc-link");
      link.textContent = data.doc_title || data.source || data.doc_id;
      // the passage's document: its source when that is a web address, else the API's document list entry
      const source = data.source ? String(data.source) : "";
      link.href = /^https?:\/\//i.test(source) ? source
        : "/ui/documents/" + encodeURIComponent(data.doc_id) + "#" + encodeURIComponent(data.ref);
      $("panel-doc-id").textContent = " " + data.doc_id + (source ? " · " + source : "");
    }
  }

  async function showRecord(queryId) {
    $("graph-view").hidden = false;
    setStatus("loading record " + queryId + "…");
    const record = await api("/v1/queries/" + queryId);
    $("question").textContent = record.text == null ? queryId : String(record.text);
    document.title = "Pathweave · " + short(record.text || queryId, 60);
    const elements = recordElements(record);
    const cy = window.cytoscape({
      container: $("cy"), elements: elements, style: STYLE, wheelSensitivity: 0.3,
      // a breadthfirst placement from the query, then spread out force-directed (both built in)
      layout: { name: "breadthfirst", directed: true, roots: ["query"], animate: false },
    });
    cy.layout({ name: "cose", randomize: false, animate: false, nodeRepulsion: () => 60000, idealEdgeLength: () => 90,
      nodeOverlap: 20, gravity: 0.25, numIter: 1500, padding: 20 }).run();
    cy.fit(undefined, 20);
    window.cy = cy;
    cy.on("tap", "node", (event) => showNode(event.target.data()));
    showNode(cy.getElementById("query").data());
    setStatus((record.mode || "") + " · " + (record.paths || []).length + " paths · " + (record.selected || []).length +
      " selected" + (record.tree ? " · " + record.tree.nodes.length + " tree nodes, " + record.tree.llm_calls + " LLM calls" : "") +
      " · " + cy.nodes().length + " nodes · " + cy.edges().length + " edges");
    setState("ready");
  }

  // ------------------------------------------------------------------ the list of queries

  async function showList() {
    $("list-view").hidden = false;
    setStatus("loading queries…");
    const body = await api("/v1/queries?limit=100");
    const tbody = $("queries").querySelector("tbody");
    tbody.replaceChildren();
    for (const q of body.queries) {
      const tr = document.createElement("tr");
      const when = document.createElement("td");
      when.textContent = (q.created_at || "").slice(0, 19).replace("T", " ");
      const mode = document.createElement("td");
      mode.textContent = q.mode || "";
      const text = document.createElement("td");
      const a = document.createElement("a");
      a.textContent = q.text || q.query_id;
      if (HEX32.test(q.query_id)) a.href = "/ui/queries/" + q.query_id;
      text.appendChild(a);
      tr.append(when, mode, text);
      tbody.appendChild(tr);
    }
    setStatus(body.queries.length + " queries");
    setState("ready");
  }

  // ------------------------------------------------------------------ a document (linked from passages)

  async function showDocument(docId) {
    $("doc-view").hidden = false;
    setStatus("loading document " + docId + "…");
    const doc = await api("/v1/documents/" + encodeURIComponent(docId));
    $("doc-title").textContent = doc.title || doc.doc_id;
    $("doc-meta").textContent = doc.doc_id + (doc.source ? " · " + doc.source : "") +
      (doc.ingested_at ? " · ingested " + doc.ingested_at.slice(0, 19).replace("T", " ") : "");
    const wanted = decodeURIComponent(location.hash.slice(1));
    const box = $("doc-passages");
    box.replaceChildren();
    for (const passage of doc.passages) {
      const p = document.createElement("p");
      p.textContent = passage.text == null ? "" : String(passage.text);
      p.dataset.passageId = passage.passage_id;
      if (passage.passage_id === wanted) p.className = "hit";
      box.appendChild(p);
    }
    const hit = box.querySelector("p.hit");
    if (hit) hit.scrollIntoView();
    setStatus(doc.passages.length + " passages");
    setState("ready");
  }

  async function start() {
    if (!apiKey()) { askForKey(); return; }
    $("key-form").hidden = true;
    $("forget").hidden = false;
    const match = location.pathname.match(/^\/ui\/queries\/([0-9a-f]{32})$/);
    const doc = decodeURIComponent(location.pathname).match(/^\/ui\/documents\/(doc:[0-9a-f]{24})$/);
    try {
      if (match) await showRecord(match[1]); else if (doc) await showDocument(doc[1]); else await showList();
    } catch (error) {
      if (error.status === 401) {
        sessionStorage.removeItem(KEY);
        askForKey("That key was refused (" + error.message + "); enter another.");
      } else {
        setStatus("error: " + error.message);
        setState("error");
      }
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    $("key-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = $("key").value.trim();
      if (!value) return;
      sessionStorage.setItem(KEY, value);
      $("key").value = "";
      start();
    });
    $("forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); location.reload(); });
    start();
  });
})();
