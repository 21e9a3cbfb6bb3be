"""The post-mortem as one self-contained HTML file: inline CSS, inline SVG charts, no script, no
fetched resource (links in the text only), readable offline and printable (print CSS)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from forensics.escape import html_text as escape
from forensics.postmortem.charts import attachment_facts, chart_window, marks, p2p_cells, pace_parts, series
from forensics.postmortem.metrics import GPU_COLUMNS, gpu_frame
from forensics.secrets import redact_text
from forensics.units import mib as _mib
from forensics.units import stamp_ms as _iso

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.findings import Finding

__all__ = ["render_html"]

CHART_W, CHART_H, PAD_L, PAD_B = 320, 96, 62, 16
COLORS = {"root-cause": "#c62828", "consequence": "#ef6c00", "contributing": "#6a1b9a"}

CSS = """
:root { --fg: #1b1f24; --muted: #57606a; --line: #d0d7de; --bg: #ffffff; --soft: #f6f8fa; --bad: #c62828; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: var(--bg); margin: 0 auto; max-width: 1060px; padding: 24px 28px 48px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; } h3 { font-size: 15px; margin: 18px 0 6px; }
.verdict { border-left: 6px solid var(--bad); background: #fff5f5; padding: 12px 16px; margin: 12px 0 8px; }
.verdict.ok { border-left-color: #2e7d32; background: #f3faf3; }
.verdict .title { font-size: 18px; font-weight: 650; } .verdict p { margin: 4px 0; }
.meta { color: var(--muted); font-size: 13px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace; }
td code { overflow-wrap: anywhere; }
pre { background: var(--soft); border: 1px solid var(--line); padding: 8px 10px; overflow-x: auto;
      white-space: pre-wrap;
      word-break: break-word; }
.bad { color: var(--bad); font-weight: 600; }
details { margin: 6px 0; } summary { cursor: pointer; color: var(--muted); }
ol li { margin: 3px 0; }
.gpu-charts { display: flex; flex-wrap: wrap; gap: 4px 12px; margin: 2px 0 14px; }
.chart { flex: 0 0 320px; } .chart svg { display: block; width: 320px; max-width: 100%; height: auto; }
td.when { white-space: nowrap; }
.legend span { display: inline-block; margin-right: 14px; font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; margin-right: 4px; vertical-align: -1px; }
footer { margin-top: 32px; color: var(--muted); font-size: 12px; }
@media print {
  body { max-width: none; padding: 0; font-size: 11pt; }
  details > summary { display: none; }
  details::details-content { content-visibility: visible; display: block; }
  h2 { break-after: avoid; } table, .gpu-charts, pre { break-inside: avoid; }
  a { color: inherit; text-decoration: none; } a[href^="http"]::after { content: " (" attr(href) ")"; font-size: 9pt; }
}
"""


def _e(value: Any) -> str:
    return "–" if value is None or value == "" else escape(str(value))


def _day(text: Any) -> str:
    return str(text).replace("T", " ")[:19] + " UTC" if text else "?"


def _table(head: list[str], rows: list[list[str]], num: set[int] | None = None) -> str:
    num = num or set()
    h = "".join(f"<th>{escape(c)}</th>" for c in head)

    def td(i: int, c: str) -> str:
        if i in num:
            return f'<td class="num">{c}</td>'
        return f'<td class="when">{c}</td>' if head[i].startswith(("time", "first seen", "start")) else f"<td>{c}</td>"

    body = "".join("<tr>" + "".join(td(i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


def _link(text: str) -> str:
    if text.startswith(("https://", "http://")):
        return f'<a href="{escape(text)}">{escape(text)}</a>'
    return escape(text)


def _finding_table(findings: list[Finding]) -> str:
    rows = []
    for f in findings:
        first = f.evidence[0] if f.evidence else None
        what = escape(f.title) + (f" — {escape(f.note)}" if f.note else "")
        rows.append([f"<code>{escape(f.signature)}</code>", what,
                     _iso(f.first_seen), f"<code>{escape(str(first.origin))}</code>" if first else "–"])
    return _table(["signature", "what", "first seen (UTC)", "where"], rows)


def _evidence(f: Finding) -> str:
    rows = [[_iso(e.ts), f"<code>{escape(str(e.origin))}</code>",
             f"<code>{escape(redact_text(e.message)[0][:400])}</code>"]
            for e in f.evidence]
    out = _table(["time (UTC)", "file:line", "line"], rows)
    if f.matched > len(f.evidence):
        out += f'<p class="meta">{f.matched - len(f.evidence)} more matching line(s) not kept as evidence.</p>'
    raw = []
    for e in f.evidence[:8]:
        lines = redact_text(e.detail or e.message)[0].splitlines()
        if len(lines) > 60:
            lines = lines[:30] + [f"… {len(lines) - 60} lines …"] + lines[-30:]
        raw.append(f"# {e.origin}\n" + "\n".join(line[:600] for line in lines))
    if raw:
        out += f"<details open><summary>raw lines</summary><pre>{escape(chr(10).join(raw))}</pre></details>"
    return out


def render_html(analysis: Analysis, data: dict[str, Any]) -> str:
    from forensics.text_report import headline

    v = analysis.verdict
    f = v.root_cause
    first, *rest = headline(analysis)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(first)} — GPU training post-mortem</title>", f"<style>{CSS}</style></head><body>",
             "<h1>GPU training post-mortem</h1>"]
    runs = data.get("run", {}).get("recordings", [])
    if runs:
        parts.append('<p class="meta">' + "; ".join(
            f"host {_e(r.get('host'))} · <code>{_e(r.get('command'))}</code> · started {_e(_day(r.get('start')))}"
            for r in runs[:4]) + "</p>")
    ok = " ok" if f is None else ""
    parts.append(f'<section class="verdict{ok}" id="verdict"><div class="title">{_e(first)}</div>'
                 + "".join(f"<p>{_e(line)}</p>" for line in rest if line.strip()) + "</section>")
    if f is not None:
        parts.append(f'<p class="meta">root cause <code>{escape(f.signature)}</code>'
                     f" · confidence {escape(str(v.confidence))}"
                     f" · first seen {_iso(f.first_seen)}</p>")
        parts += ['<h2 id="evidence">Evidence</h2>', _evidence(f)]
        if v.consequences:
            parts += ["<h2>What followed (consequences, not causes)</h2>", _finding_table(v.consequences)]
        if f.remedy:
            fit = f" ({_e(v.remedy_heading(f))})" if v.remedy_heading(f) else ""
            parts += [f'<h2 id="remedy">What to do{fit}</h2>', "<ol>" + "".join(f"<li>{_e(' '.join(s.split()))}</li>"
                                                                          for s in f.remedy) + "</ol>"]
        if f.explain:
            parts += ["<h2>What it means</h2>", f"<p>{_e(' '.join(f.explain.split()))}</p>"]
    if v.contributing:
        parts += ["<h2>Risks and contributing findings</h2>", _finding_table(v.contributing)]
    if v.ruled_out:
        parts += ["<h2>Considered and ruled out</h2>",
                  _table(["signature", "why not"], [[f"<code>{escape(s)}</code>", _e(why)] for s, why in v.ruled_out])]
    facts = attachment_facts(analysis)
    attached = ["<h3>PCIe attachment</h3><ul>" + "".join(f"<li>{_e(x)}</li>" for x in facts) + "</ul>"] if facts else []
    parts += _run(data) + _hardware(data) + attached + _software(data) + _metrics(analysis, data)
    if f is not None and f.references:
        parts += ["<h2>References</h2>", "<ul>" + "".join(f"<li>{_link(r)}</li>" for r in f.references[:6]) + "</ul>"]
    srcs = data.get("sources", [])
    rows = [[f"<code>{escape(s['path'])}</code>", _e(s["kind"]), str(s["events"]), str(s.get("metrics") or 0)]
            for s in srcs]
    parts += [f"<details><summary>Inputs: {len(srcs)} file(s)</summary>",
              _table(["file", "read as", "events", "samples"], rows, {2, 3}),
              "".join(f"<p class='meta'>warning: {_e(w)}</p>" for w in (data.get("warnings") or [])[:30]),
              "</details>",
              "<footer>Written by gpu-forensics (<code>forensics report --format html</code>). "
              "Secrets redacted.</footer>",
              "</body></html>"]
    return "\n".join(parts) + "\n"


def _run(data: dict[str, Any]) -> list[str]:
    runs = data.get("run", {}).get("recordings", [])
    ranks = data.get("run", {}).get("ranks", [])
    if not runs and not ranks and not data.get("run", {}).get("rank_last_step"):
        return []
    out = ["<h2 id='run'>The run</h2>"]
    rows = []
    for r in runs:
        ended = _e(r.get("status"))
        if r.get("signal"):
            ended += f", signal {_e(r['signal'])}"
        elif r.get("exit_code") is not None:
            ended += f", exit {_e(r['exit_code'])}"
        dur = r.get("duration_s")
        rows.append([_e(r.get("host")), f"<code>{_e(r.get('command'))}</code>", ended,
                     f"{dur:,.1f} s" if isinstance(dur, int | float) else "–", _e(r.get("start"))])
    if rows:
        out.append(_table(["host", "command (redacted)", "ended", "duration", "start (UTC)"], rows))
    if ranks:
        from forensics.findings import number_ranges

        out.append(f"<p>Ranks in the analyzed events: {escape(number_ranges(ranks))} ({len(ranks)}).</p>")
    steps = data.get("run", {}).get("rank_last_step") or {}
    if steps:
        out.append("<p>Last training step per rank (its own progress lines): " + escape(", ".join(
            f"rank {r}: {s:,}" if isinstance(s, int) else f"rank {r}: –" for r, s in steps.items())) + ".</p>")
    return out


def _hardware(data: dict[str, Any]) -> list[str]:
    hw = [h for h in data.get("hardware", []) if h.get("gpus") or h.get("topology")]
    if not hw:
        return []
    out = ["<h2 id='hardware'>Hardware</h2>"]
    for h in hw:
        if len(hw) > 1:
            out.append(f"<h3>{_e(h['host'])} <span class='meta'>{_e(h['bundle'])}</span></h3>")
        rows = [[_e(g["index"]), _e(g["name"]), _mib(g.get("mem_total_mib")), f"<code>{_e(g.get('pci'))}</code>",
                 _e(g.get("link")), ("<span class='bad'>degraded</span> " if g.get("degraded") else "")
                 + _e(g.get("note") or "ok")] for g in h.get("gpus", [])]
        if rows:
            out.append(_table(["GPU", "model", "VRAM", "PCI", "PCIe now (max)", "link"], rows, {2}))
        topo = h.get("topology") or []
        if topo:
            width = max(len(r) for r in topo)
            out.append("<h3>Topology (nvidia-smi topo -m)</h3>")
            out.append(_table([c for c in topo[0]] + [""] * (width - len(topo[0])),
                              [[_e(c) for c in r] + [""] * (width - len(r)) for r in topo[1:]]))
        kinds, cells = p2p_cells(h.get("p2p") or {})
        if cells:
            out.append(f"<h3>P2P status (NVML: {escape(' / '.join(kinds))})</h3>"
                       + _table([""] + [f"GPU{i}" for i in range(len(cells))],
                                [[f"GPU{i}", *(_e(c) for c in row)] for i, row in enumerate(cells)]))
    return out


def _software(data: dict[str, Any]) -> list[str]:
    sw = [s for s in data.get("software", []) if s.get("components") or s.get("packages")]
    if not sw:
        return []
    out = ["<h2 id='software'>Software</h2>"]
    for s in sw:
        if len(sw) > 1:
            out.append(f"<h3>{_e(s['host'])} <span class='meta'>{_e(s['bundle'])}</span></h3>")
        out.append(_table(["component", "version"], [[_e(k), _e(v)] for k, v in s.get("components", {}).items()]))
        if s.get("env"):
            out.append(f"<details><summary>Environment variables that matter ({len(s['env'])})</summary>"
                       + _table(["variable", "value"], [[_e(k), f"<code>{_e(v)}</code>"] for k, v in s["env"].items()])
                       + "</details>")
        if s.get("packages"):
            out.append(f"<details><summary>Key packages ({len(s['packages'])}, from pip freeze)</summary>"
                       + _table(["package", "version"], [[_e(k), _e(v)] for k, v in s["packages"].items()])
                       + "</details>")
    return out


def _svg(values: list[float], lo: float, hi: float, unit: str, label: str,
         found: list[tuple[int, str, Finding]], width_cols: int, t0: str, t1: str) -> str:
    w, h = CHART_W, CHART_H
    plot_w = w - PAD_L - 8
    step = plot_w / max(width_cols, 1)

    def y(v: float) -> float:
        return 6 + (h - PAD_B - 12) * (1 - (v - lo) / (hi - lo if hi > lo else 1))

    paths: list[list[str]] = []
    current: list[str] = []
    for i, v in enumerate(values):
        if math.isnan(v):
            if current:
                paths.append(current)
            current = []
            continue
        current.append(f"{PAD_L + (i + 0.5) * step:.1f},{y(v):.1f}")
    if current:
        paths.append(current)
    def shape(p: list[str]) -> str:
        if len(p) > 1:
            return f'<polyline fill="none" stroke="#0969da" stroke-width="1.6" points="{" ".join(p)}"/>'
        x, y0 = p[0].split(",")
        return f'<circle r="1.8" fill="#0969da" cx="{x}" cy="{y0}"/>'

    lines = "".join(shape(p) for p in paths)
    markers = ""
    for col, letter, f in found:
        x = PAD_L + (col + 0.5) * step
        color = COLORS.get(str(f.role), "#6a1b9a")
        markers += (f'<line x1="{x:.1f}" x2="{x:.1f}" y1="4" y2="{h - PAD_B}" stroke="{color}" stroke-width="1.2" '
                    f'stroke-dasharray="3,2"><title>{escape(f.signature)}</title></line>'
                    f'<text x="{x + 3:.1f}" y="13" font-size="11" fill="{color}">{letter}</text>')
    top = _mib(hi) if unit == " MiB" else f"{hi:,.0f}{unit}"
    axis = (f'<line x1="{PAD_L}" x2="{w - 8}" y1="{h - PAD_B}" y2="{h - PAD_B}" stroke="#d0d7de"/>'
            f'<line x1="{PAD_L}" x2="{PAD_L}" y1="4" y2="{h - PAD_B}" stroke="#d0d7de"/>'
            f'<text x="{PAD_L - 4}" y="12" font-size="10" text-anchor="end" fill="#57606a">{escape(top)}</text>'
            f'<text x="{PAD_L - 4}" y="{h - PAD_B}" font-size="10" text-anchor="end" fill="#57606a">0</text>'
            f'<text x="{PAD_L}" y="{h - 3}" font-size="10" fill="#57606a">{escape(t0)}</text>'
            f'<text x="{w - 8}" y="{h - 3}" font-size="10" text-anchor="end" fill="#57606a">{escape(t1)}</text>')
    return (f'<svg viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
            f'aria-label="{escape(label)}">{axis}{lines}{markers}</svg>')


def _metrics(analysis: Analysis, data: dict[str, Any]) -> list[str]:
    rows = data.get("gpu_metrics") or []
    if not rows:
        return []
    out = ["<h2 id='metrics'>GPU memory, utilization and power over the run</h2>"]
    trs = []
    for r in rows:
        util = "–" if r.get("mean_util_pct") is None else f"{r['mean_util_pct']:.0f} % / {r['peak_util_pct']:.0f} %"
        power = "–" if r.get("mean_power_w") is None else (
            f"{r['mean_power_w']:.0f} W / {r['peak_power_w']:.0f} W"
            + (f" ({r['power_limit_w']:.0f} W)" if r.get("power_limit_w") else ""))
        trs.append([_e(r["label"]) + (f" <span class='meta'>{_e(r['host'])}</span>" if r.get("host") else ""),
                    f"{_mib(r.get('peak_mem_mib'))} of {_mib(r.get('total_mib'))}", _mib(r.get("headroom_mib")),
                    util, power, str(r["samples"])])
    out.append(_table(["GPU", "peak memory", "headroom (total − peak)", "utilization mean / peak",
                       "power mean / peak (limit)", "samples"], trs, {1, 2, 3, 4, 5}))
    frame = gpu_frame(analysis)
    window = chart_window(frame)
    if window is None:
        return out
    t0, t1 = window
    cols = 160
    found = marks(analysis, t0, t1, cols)
    from forensics.units import iso

    a, b = (iso(t0) or "")[11:19], (iso(t1) or "")[11:19]
    if found:
        out.append("<p class='legend'>" + "".join(
            f"<span><span class='swatch' style='background:{COLORS.get(str(f.role), '#6a1b9a')}'></span>"
            f"{letter} = <code>{escape(f.signature)}</code> ({escape(str(f.role))}) at {_iso(f.first_seen)}</span>"
            for _c, letter, f in found) + "</p>")
    for r in rows:
        charts = []
        for column, name, unit in GPU_COLUMNS:
            values, lo, hi = series(frame, r["host"], r["gpu"], column, t0, t1, cols)
            if all(math.isnan(x) for x in values):
                continue
            u = {"MiB": " MiB", "%": " %", "W": " W"}[unit]
            label = f"{r['label']} {name}"
            finite = [x for x in values if not math.isnan(x)]
            peak = max(finite)
            shown = _mib(peak) if unit == "MiB" else f"{peak:,.0f}{u}"
            charts.append(f"<div class='chart'><div class='meta'>{escape(name)} (highest {escape(shown)})</div>"
                          + _svg(values, lo, hi, u, label, found, cols, a, b) + "</div>")
        if charts:
            host = f" <span class='meta'>{_e(r['host'])} · {_e(r['gpu'])}</span>" if r.get("host") else ""
            out.append(f"<h3>{_e(r['label'])}{host}</h3><div class='gpu-charts'>" + "".join(charts) + "</div>")
    if pace := pace_parts(data.get("progress")):
        out.append("<p>Training pace (from its own progress lines): " + escape(", ".join(pace)) + ".</p>")
    return out
