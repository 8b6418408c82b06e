"""The growth benchmark's report: a fit per metric against passages, its extrapolation to
1,000,000 passages, and ``bench.html`` (one curve per metric and backend, passages on a log
scale, inline SVG: the page needs nothing but a browser).

Two models, chosen by what the metric is: memory and disk grow with what is stored, so
``a + b * N`` (least squares: a base and a cost per passage); latencies and rates follow
``a * N ** b`` (least squares on logarithms: ``b`` is the growth exponent, 0 = flat,
1 = linear). Each fit names the measured points it rests on; with fewer than two points
there is no fit.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

TARGET = 1_000_000
"""Passages per tenant the fits are extrapolated to."""

METRICS: dict[str, tuple[str, str]] = {
    # name -> (what, model): "linear" (memory, disk) or "power" (times, rates)
    "proprag_p50_ms": ("proprag p50, ms", "power"),
    "dense_p50_ms": ("dense p50, ms", "power"),
    "hipporag2_p50_ms": ("hipporag2 p50, ms", "power"),
    "first_query_after_restart_ms": ("first query after a restart, ms", "power"),
    "tenth_query_after_restart_ms": ("tenth query after a restart, ms", "power"),
    "query_rss_mb": ("API (query process) RSS, MiB", "linear"),
    "store_rss_mb": ("store server RSS, MiB", "linear"),
    "store_disk_mb": ("store disk, MiB", "linear"),
    "ingest_passages_per_s": ("ingestion of 1,000 passages, passages/s", "power"),
    "small_p50_ms": ("small tenant's proprag p50, ms", "power"),
}


def metric_values(step: dict) -> dict[str, float | None]:
    """The step's value of each of :data:`METRICS` (None where it was not measured)."""
    modes = step.get("modes", {})
    return {"proprag_p50_ms": modes.get("proprag", {}).get("p50_ms"),
            "dense_p50_ms": modes.get("dense", {}).get("p50_ms"),
            "hipporag2_p50_ms": modes.get("hipporag2", {}).get("p50_ms"),
            "first_query_after_restart_ms": step.get("first_query_after_restart_ms"),
            "tenth_query_after_restart_ms": step.get("tenth_query_after_restart_ms"),
            "query_rss_mb": step.get("query_rss_mb"), "store_rss_mb": step.get("store_rss_mb"),
            "store_disk_mb": step.get("store_disk_mb"), "ingest_passages_per_s": step.get("ingest_passages_per_s"),
            "small_p50_ms": step.get("small", {}).get("p50_ms")}


def fit(points: list[tuple[float, float]], model: str) -> dict | None:
    """Fit ``model`` ("linear": y = a + b N; "power": y = a N^b) to ``(N, y)`` points
    (positive y for "power"); returns ``{a, b, at_target, points}`` or None with fewer than
    two usable points."""
    usable = [(n, y) for n, y in points if y is not None and (model == "linear" or y > 0)]
    if len({n for n, _ in usable}) < 2:
        return None
    n = np.array([p[0] for p in usable], dtype=float)
    y = np.array([p[1] for p in usable], dtype=float)
    if model == "linear":
        b, a = np.polyfit(n, y, 1)
    else:
        b, log_a = np.polyfit(np.log(n), np.log(y), 1)
        a = math.exp(log_a)
    fitted = {"a": float(a), "b": float(b), "points": [int(p[0]) for p in usable]}
    return {**fitted, "at_target": _value(model, fitted, TARGET)}


def fits(results: dict) -> dict[str, dict[str, dict | None]]:
    """``{backend: {metric: fit}}`` over each backend's steps."""
    out: dict[str, dict[str, dict | None]] = {}
    for backend, run in results["backends"].items():
        values = [(step["passages"], metric_values(step)) for step in run["steps"]]
        out[backend] = {name: fit([(n, v[name]) for n, v in values], model) for name, (_, model) in METRICS.items()}
    return out


def _value(model: str, fitted: dict, n: float) -> float:
    """The fitted metric at ``n`` passages."""
    return fitted["a"] + fitted["b"] * n if model == "linear" else fitted["a"] * n ** fitted["b"]


def _describe(model: str, fitted: dict) -> str:
    if model == "linear":
        return f"{fitted['a']:.0f} + {fitted['b'] * 1e3:.3f} per 1,000 passages"
    return f"{fitted['a']:.3g} N^{fitted['b']:.2f}"


def print_growth(results: dict, console: Console) -> None:
    """The step table and the fits with their extrapolation."""
    console.print(step_table(results))
    table = Table(title=f"Fits, extrapolated to {TARGET:,} passages per tenant")
    for column in ("backend", "metric", "model", f"at {TARGET:,}", "fitted on (passages)"):
        table.add_column(column)
    for backend, per_metric in fits(results).items():
        for name, fitted in per_metric.items():
            what, model = METRICS[name]
            if fitted is not None:
                table.add_row(backend, what, _describe(model, fitted), f"{fitted['at_target']:,.0f}",
                              ", ".join(f"{p:,}" for p in fitted["points"]))
    console.print(table)


COLOURS = {"arcadedb": "#1f77b4", "neo4j": "#d62728"}
DEFAULT_COLOUR = "#333333"
WIDTH, HEIGHT, MARGIN = 420, 240, 48


def _chart(name: str, results: dict, fitted: dict) -> str:
    """One SVG chart: the metric against passages (log x) per backend, the fit dashed (cut
    at the top of the axis: 3x the largest measured value)."""
    what, model = METRICS[name]
    series = {b: [(s["passages"], metric_values(s)[name]) for s in run["steps"]]
              for b, run in results["backends"].items()}
    points = [(n, y) for pts in series.values() for n, y in pts if y is not None]
    if not points:
        return ""
    xs = [n for n, _ in points] + [TARGET]
    lo, hi = math.log10(min(xs)), math.log10(max(xs))
    measured_hi = max(y for _, y in points)
    fit_ys = [f["at_target"] for f in (fitted[b][name] for b in series) if f]
    # the fits may run far above what was measured: the axis shows up to 3x the measured top
    y_hi = min(max([measured_hi] + fit_ys), 3 * measured_hi) * 1.1 or 1.0

    def x(n: float) -> float:
        return MARGIN + (math.log10(n) - lo) / max(hi - lo, 1e-9) * (WIDTH - 2 * MARGIN)

    def y(v: float) -> float:
        return HEIGHT - MARGIN + 10 - max(v, 0) / y_hi * (HEIGHT - 2 * MARGIN)

    parts = [f'<svg width="{WIDTH}" height="{HEIGHT}" role="img"><title>{html.escape(what)}</title>',
             f'<text x="{MARGIN}" y="16" font-size="13">{html.escape(what)}</text>',
             f'<line x1="{MARGIN}" y1="{y(0)}" x2="{WIDTH - MARGIN}" y2="{y(0)}" stroke="#999"/>']
    for decade in range(math.ceil(lo), math.floor(hi) + 1):
        parts.append(f'<text x="{x(10 ** decade) - 12}" y="{y(0) + 16}" font-size="10">1e{decade}</text>')
    parts.append(f'<text x="4" y="{y(y_hi / 1.1) + 4}" font-size="10">{y_hi / 1.1:,.0f}</text>')
    for backend, pts in series.items():
        colour = COLOURS.get(backend, DEFAULT_COLOUR)
        measured = [(n, v) for n, v in pts if v is not None]
        line = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in measured)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{line}"/>')
        parts += [f'<circle cx="{x(n):.1f}" cy="{y(v):.1f}" r="3" fill="{colour}"><title>{backend} {n:,}: {v}'
                  f'</title></circle>' for n, v in measured]
        if (f := fitted[backend][name]) and measured:
            samples = [10 ** (lo + (hi - lo) * i / 40) for i in range(41)]
            curve = " ".join(f"{x(n):.1f},{y(min(_value(model, f, n), y_hi)):.1f}" for n in samples)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-dasharray="4 3" points="{curve}">'
                         f'<title>{backend} fit: {html.escape(_describe(model, f))}</title></polyline>')
    parts.append("</svg>")
    return "".join(parts)


def write_html(path: Path, results: dict) -> Path:
    """Write ``bench.html`` (the curves, the fits and the machine) to ``path``; returns it."""
    fitted = fits(results)
    rows = "".join(
        f"<tr><td>{html.escape(b)}</td><td>{html.escape(METRICS[m][0])}</td>"
        f"<td>{html.escape(_describe(METRICS[m][1], f))}</td><td>{f['at_target']:,.0f}</td>"
        f"<td>{', '.join(f'{p:,}' for p in f['points'])}</td></tr>"
        for b, per_metric in fitted.items() for m, f in per_metric.items() if f)
    machine = html.escape(", ".join(f"{k}: {v}" for k, v in results["machine"].items()))
    legend = ", ".join(f"<span style='color:{COLOURS.get(b, DEFAULT_COLOUR)}'>{html.escape(b)}</span>"
                       for b in results["backends"])
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Pathweave growth</title></head><body>"
            f"<h1>Cost against passages per tenant</h1><p>commit {html.escape(results['commit'])}; {machine}; "
            f"backends: {legend}; dashed: the fit, extrapolated to {TARGET:,} passages.</p>"
            + "".join(_chart(name, results, fitted) for name in METRICS)
            + f"<h2>Fits</h2><table border=1 cellpadding=4><tr><th>backend</th><th>metric</th><th>model</th>"
              f"<th>at {TARGET:,}</th><th>fitted on (passages)</th></tr>{rows}</table></body></html>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def _paired(difference: dict) -> str:
    """``+0.010 (0.012) / -0.005 (0.008)``: R@2's and R@5's paired mean and SE."""
    return " / ".join(f"{difference[k]['mean']:+.3f} ({difference[k]['se']:.3f})" for k in ("recall_at_2", "recall_at_5"))


def step_table(results: dict) -> Table:
    """One row per backend and step."""
    table = Table(title=f"Growth ({results['questions']} MuSiQue questions) on {results['machine']['cores']} cores")
    for column in ("backend", "passages", "proprag R@2/R@5", "exact R@2/R@5", "minus exact R@2/R@5 (SE)",
                   "p50/p95 ms proprag", "dense", "hipporag2", "first/tenth after restart ms", "API RSS MiB",
                   "store RSS MiB", "disk MiB", "ingest p/s", "fresh rank, ms", "small R@5, p50"):
        table.add_column(column)
    for backend, run in results["backends"].items():
        for r in run["steps"]:
            m = r["modes"]
            exact, paired = m.get("proprag_exact"), m["proprag"].get("vs_exact")
            table.add_row(backend, f"{r['passages']:,}",
                          f"{m['proprag']['recall_at_2']:.3f}/{m['proprag']['recall_at_5']:.3f}",
                          f"{exact['recall_at_2']:.3f}/{exact['recall_at_5']:.3f}" if exact else "-",
                          _paired(paired) if paired else "-",
                          f"{m['proprag']['p50_ms']:.0f}/{m['proprag']['p95_ms']:.0f}",
                          f"{m['dense']['recall_at_5']:.3f}, {m['dense']['p50_ms']:.0f}",
                          f"{m['hipporag2']['recall_at_5']:.3f}, {m['hipporag2']['p50_ms']:.0f}",
                          f"{r['first_query_after_restart_ms']:.0f}/{r.get('tenth_query_after_restart_ms', 0):.0f}",
                          f"{r['query_rss_mb']:.0f}",
                          f"{r['store_rss_mb']}", f"{r['store_disk_mb']:.0f}", f"{r['ingest_passages_per_s']:.1f}",
                          f"{r['fresh']['rank']}, {r['fresh']['first_query_ms']:.0f}",
                          f"{r['small']['recall_at_5']:.3f}, {r['small']['p50_ms']:.0f}")
    return table
