"""``pathweave bench musique --tracing``: what OpenTelemetry tracing costs a query.

A fresh store (temporary data directory) ingests the MuSiQue corpus with the default
extractor. Each question then runs in each ranking mode (k = 20, as ``bench musique``):

1. **untraced**: no SDK in the process, the OpenTelemetry API's no-op tracer (what a
   service without ``OTEL_*`` variables runs), every question once, after an untimed pass
   over every question (the first pass over the questions warms caches: timed, it would
   make the untraced block the slower one by order alone);
2. then the SDK is installed as a service installs it
   (:func:`pathweave.telemetry.setup.configure_tracing`: a batching OTLP/HTTP exporter) to a
   collector of the benchmark's (a separate process that accepts and drops what it gets),
   with a sampler the benchmark switches; every question runs twice, **off** (sampled out:
   no span records) and **on** (every span recorded and exported), in alternating order.

Reported per mode: the p50 of each, the paired per-question difference on - off (ms, with
its standard error) and on / off of the p50s; untraced vs off (not interleaved: separate
blocks, so drift counts too). Writes ``tracing.json`` to ``--out``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.table import Table

from pathweave.embedding.embedders import get_query_embedder
from pathweave.evaluation import paired_difference, percentile_ms
from pathweave.query.retriever import Retriever
from pathweave.runtime import open_store
from pathweave.servers import store_server
from pathweave.servers.processes import free_port
from pathweave.settings import get_settings
from pathweave.terminal import progress_bar, stdout_console
from pathweave_bench.common import (
    default_data_dir, git_commit, machine_info, publish_results, wait_for_idle_store, with_backend,
)
from pathweave_bench.musique import load_musique

MODES = ("proprag", "dense", "hipporag2")

# the collector: accepts OTLP/HTTP posts and drops them (a process of its own, as a real one is)
_COLLECTOR = """
import http.server, sys
class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
"""


def switch_sampler():
    """A sampler that samples every span while its ``on`` is True, none otherwise."""
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    class Switch(Sampler):
        on = False

        def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                          trace_state=None) -> SamplingResult:
            return SamplingResult(Decision.RECORD_AND_SAMPLE if self.on else Decision.DROP, attributes)

        def get_description(self) -> str:
            return "bench switch"

    return Switch()


def _timed(retriever: Retriever, question: str, mode: str) -> float:
    started = time.perf_counter()
    retriever.query(question, mode=mode, k=20)
    return (time.perf_counter() - started) * 1000


def run_tracing(data: Path | None, out: Path, limit: int = 0, backend: str = "arcadedb",
                modes: tuple[str, ...] = MODES) -> dict:
    """Run the benchmark (see the module); returns (and writes ``out/tracing.json``) the
    results. Raises RuntimeError when this process has a tracer provider already (the SDK
    allows one per process: one backend per run)."""
    from opentelemetry import trace

    from pathweave.telemetry.setup import configure_tracing
    from pathweave_ingest.console import run_ingest

    if type(trace.get_tracer_provider()).__name__ != "ProxyTracerProvider":
        raise RuntimeError("the process traces already: run the benchmark without OTEL_* variables")
    console = stdout_console()
    questions, documents = load_musique(Path(data) if data else default_data_dir(), limit)
    workdir = Path(tempfile.mkdtemp(prefix="pathweave-bench-tracing-"))
    settings = with_backend(get_settings().model_copy(update={"data_dir": workdir, "tenant": "bench-tracing"}),
                            backend)
    results: dict = {"machine": machine_info(), "commit": git_commit(), "backend": backend,
                     "questions": len(questions), "passages": len(documents), "modes": {}}
    times: dict[str, dict[str, list[float]]] = {mode: {"untraced": [], "off": [], "on": []} for mode in modes}
    port = free_port()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    collector = subprocess.Popen([sys.executable, "-c", _COLLECTOR, str(port)], stdin=subprocess.DEVNULL)
    try:
        with open_store(settings) as store:
            report = run_ingest(store, settings, documents, [], None, label="ingest MuSiQue corpus")
            results["ingest_s"] = round(report.seconds, 1)
            info = store_server.status(settings)
            wait_for_idle_store(info.pid if info else None)
            retriever = Retriever(store, get_query_embedder(settings), settings)
            retriever.warm_up()
            with progress_bar() as bar:
                task = bar.add_task("warm (untimed)", total=len(questions) * len(modes), rate="")
                for question in questions:  # every question once before any clock: caches as warm as later
                    for mode in modes:
                        _timed(retriever, question["question"], mode)
                        bar.advance(task)
                task = bar.add_task("untraced", total=len(questions) * len(modes), rate="")
                for question in questions:
                    for mode in modes:
                        times[mode]["untraced"].append(_timed(retriever, question["question"], mode))
                        bar.advance(task)
                switch = switch_sampler()
                os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"http://127.0.0.1:{port}/v1/traces"
                if not configure_tracing("pathweave-bench", sampler=switch):
                    raise RuntimeError("the SDK was not installed (OTEL_SDK_DISABLED or OTEL_TRACES_EXPORTER=none?)")
                task = bar.add_task("off / on", total=len(questions) * len(modes), rate="")
                for index, question in enumerate(questions):
                    for mode in modes:
                        for on in ((False, True) if index % 2 == 0 else (True, False)):
                            switch.on = on
                            times[mode]["on" if on else "off"].append(_timed(retriever, question["question"], mode))
                        switch.on = False
                        bar.advance(task)
            trace.get_tracer_provider().force_flush()
            retriever.flush()
    finally:
        if endpoint is None:
            os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        else:
            os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
        collector.kill()  # it holds nothing
        collector.wait()
        store_server.stop(settings)
        shutil.rmtree(workdir, ignore_errors=True)
    for mode, t in times.items():
        on_off = paired_difference(t["on"], t["off"]).as_dict()
        results["modes"][mode] = {
            "p50_untraced_ms": round(percentile_ms(t["untraced"], 50), 1),
            "p50_off_ms": round(percentile_ms(t["off"], 50), 1), "p50_on_ms": round(percentile_ms(t["on"], 50), 1),
            "on_minus_off_ms": on_off, "off_minus_untraced_ms": paired_difference(t["off"], t["untraced"]).as_dict()}
        m = results["modes"][mode]
        m["p50_on_over_off"] = round(m["p50_on_ms"] / m["p50_off_ms"], 4)
    return publish_results(out, "tracing.json", results, print_tracing_table, console)


def print_tracing_table(results: dict, console) -> None:
    """One row per mode: p50 untraced, off and on; on - off and off - untraced (mean +- SE)."""
    machine = results["machine"]
    table = Table(title=f"Tracing cost on MuSiQue ({results['questions']} questions, k=20, {results['backend']}), "
                        f"{machine['cores']} cores {machine['cpu']}")
    for column in ("mode", "p50 untraced ms", "p50 off ms", "p50 on ms", "on / off", "on - off ms (SE)",
                   "off - untraced ms (SE)"):
        table.add_column(column)
    for mode, m in results["modes"].items():
        d, u = m["on_minus_off_ms"], m["off_minus_untraced_ms"]
        table.add_row(mode, f"{m['p50_untraced_ms']:.1f}", f"{m['p50_off_ms']:.1f}", f"{m['p50_on_ms']:.1f}",
                      f"{m['p50_on_over_off']:.3f}", f"{d['mean']:+.1f} ({d['se']:.1f})",
                      f"{u['mean']:+.1f} ({u['se']:.1f})")
    console.print(table)
