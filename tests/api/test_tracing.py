"""OpenTelemetry traces (issue 47) with the SDK's in-memory exporter, through the real API,
store and models: one trace per query with a span per stage named in the response's
timings (and its store round trips), the trace id in the response header, body and
reasoring record; a span per ingestion batch with its stages; no question text in any
attribute. Without the standard ``OTEL_*`` variables nothing is configured (a fresh
process); with them, spans reach an OTLP/HTTP endpoint (a local one of the test's)."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import CORE_DOCS
from pathweave_bench.tracing import switch_sampler

pytestmark = pytest.mark.arcadedb_only  # the service's interface; the stores are covered by the rest of the suite


_SWITCH = switch_sampler()  # samples every span while on, none otherwise (the rest of the suite runs untraced)
_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def spans():
    """The process's tracer provider (set once: the SDK allows no second one), sampling only
    inside ``with spans():``, which yields the list the spans finished meanwhile fill."""
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)

    class Recording:
        def __enter__(self):
            _EXPORTER.clear()
            _SWITCH.on = True
            self.finished = []
            return self.finished

        def __exit__(self, *exc):
            _SWITCH.on = False
            self.finished.extend(_EXPORTER.get_finished_spans())
            _EXPORTER.clear()

    yield Recording
    _SWITCH.on = False


def _descendants(spans: list, root) -> list:
    children = {}
    for span in spans:
        if span.parent is not None:
            children.setdefault(span.parent.span_id, []).append(span)
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop().context.span_id, []):
            out.append(child)
            todo.append(child)
    return out


def test_a_query_is_one_trace_with_a_span_per_stage_and_an_ingestion_batch_is_a_span(client, new_tenant, spans,
                                                                                       wait):
    _, headers = new_tenant("trace")
    with spans() as ingested:
        job = client.post("/v1/documents", headers=headers, json={"documents": CORE_DOCS}).json()
        assert wait(headers, job["job_id"])["status"] == "done"
    batches = [s for s in ingested if s.name == "pathweave.ingest_batch"]
    assert batches and all(s.attributes["pathweave.job_id"] == job["job_id"] for s in batches)
    stages = {s.name for batch in batches for s in _descendants(ingested, batch)}
    assert {"chunk", "extract", "embed"} <= stages and any(name.startswith("store ") for name in stages)

    question = "Where was the physicist who won the Nobel Prize in 1903 born?"
    for body in ({"question": question, "mode": "proprag", "k": 3, "token_budget": 200},
                 {"question": question, "mode": "dense", "k": 3}):
        with spans() as finished:
            response = client.post("/v1/query", headers=headers, json=body)
        assert response.status_code == 200, response.text
        answer = response.json()
        roots = [s for s in finished if s.name == "pathweave.query"]
        assert len(roots) == 1 and len({s.context.trace_id for s in finished}) == 1  # one trace per query
        root = roots[0]
        trace_id = format(root.context.trace_id, "032x")
        assert answer["trace_id"] == trace_id == response.headers["X-Pathweave-Trace-Id"]
        assert root.attributes["pathweave.mode"] == body["mode"] and root.attributes["pathweave.query_id"] == \
            answer["query_id"]
        below = _descendants(finished, root)
        named = {s.name for s in below}
        assert set(answer["timings_ms"]) - {"total"} <= named, (answer["timings_ms"], named)
        assert any(s.name.startswith("store ") for s in below)
        assert all(question not in str(value) for s in finished for value in s.attributes.values())
        record = client.get(f"/v1/queries/{answer['query_id']}", headers=headers).json()
        assert record["trace_id"] == trace_id

    with spans() as untraced:  # the switch off: no span at all
        pass
    assert untraced == []
    assert client.post("/v1/query", headers=headers, json={"question": question, "mode": "dense", "k": 3}
                       ).json()["trace_id"] is None


def test_a_streamed_answer_is_traced_to_its_last_token(client, new_tenant, spans, wait, runtime, llm_client,
                                                       llm_server, monkeypatch):
    """The query's span lasts until the streamed answer ends: its ``answer`` stage and the
    model's ``llm.chat`` (with its tokens), made in the thread that reads the model, are in
    the query's one trace."""
    monkeypatch.setattr(runtime, "_llm", llm_client)
    _, headers = new_tenant("tracestream")
    job = client.post("/v1/documents", headers=headers, json={"documents": CORE_DOCS}).json()
    assert wait(headers, job["job_id"])["status"] == "done"
    body = {"question": "Where was Marie Curie born?", "k": 3, "answer": True, "stream": True}
    with spans() as finished:
        with client.stream("POST", "/v1/query", headers=headers, json=body) as response:
            assert response.status_code == 200
            text = "".join(response.iter_text())
    final = json.loads(text.split("event: answer")[1].split("data:", 1)[1].split("\n")[0])
    roots = [s for s in finished if s.name == "pathweave.query"]
    assert len(roots) == 1 and roots[0].attributes["pathweave.streamed"] is True
    root = roots[0]
    assert len({s.context.trace_id for s in finished}) == 1
    assert final["trace_id"] == format(root.context.trace_id, "032x") == response.headers["X-Pathweave-Trace-Id"]
    below = {s.name: s for s in _descendants(finished, root)}
    assert set(final["timings_ms"]) - {"total"} <= set(below), (final["timings_ms"], sorted(below))
    chat = below["llm.chat"]
    assert chat.parent.span_id == below["answer"].context.span_id
    assert chat.attributes["gen_ai.usage.output_tokens"] == final["answer"]["completion_tokens"] > 0
    assert root.end_time >= chat.end_time  # the query's span ends after its answer


def _python(code: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)


def test_nothing_is_configured_without_the_variables_and_spans_reach_an_otlp_endpoint_with_them():
    code = ("from opentelemetry import trace\n"
            "from pathweave.telemetry.setup import configure_tracing\n"
            "on = configure_tracing('pathweave-test')\n"
            "with trace.get_tracer('pathweave').start_as_current_span('pathweave.query') as span:\n"
            "    recording = span.is_recording()\n"
            "if on:\n"
            "    trace.get_tracer_provider().force_flush()\n"
            "print(on, recording)\n")
    plain = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = _python(code, plain)
    assert done.returncode == 0 and done.stdout.split() == ["False", "False"], done.stderr

    received: list[tuple[str, bytes]] = []

    class Collector(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            received.append((self.path, self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = _python(code, {**plain, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
                              "OTEL_SERVICE_NAME": "pathweave-otlp-test"})
    finally:
        server.shutdown()
        thread.join(10)
    assert done.returncode == 0 and done.stdout.split() == ["True", "True"], done.stderr
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    assert received and received[0][0] == "/v1/traces"
    exported = ExportTraceServiceRequest.FromString(received[0][1])
    names = [span.name for rs in exported.resource_spans for ss in rs.scope_spans for span in ss.spans]
    service = {a.value.string_value for rs in exported.resource_spans for a in rs.resource.attributes
               if a.key == "service.name"}
    assert names == ["pathweave.query"] and service == {"pathweave-otlp-test"}
