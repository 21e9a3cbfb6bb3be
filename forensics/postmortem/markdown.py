"""The post-mortem as GitHub-flavoured Markdown: one file to paste into an issue or a forum post.

Tables are pipe tables, long evidence goes into ``<details>`` blocks, raw lines into fenced code,
and the whole stays under :data:`LIMIT` characters (GitHub's issue body limit) by shrinking the
long parts first (raw lines, packages, topology), never the verdict.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from forensics.escape import html_text, md_code, md_prose, md_text, terminal
from forensics.postmortem.charts import attachment_facts, chart_window, marks, p2p_cells, pace_parts, series
from forensics.postmortem.metrics import gpu_frame
from forensics.secrets import redact_text
from forensics.units import mib as _mib
from forensics.units import sparkline

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.findings import Finding

__all__ = ["LIMIT", "render_markdown"]

LIMIT = 65_000
SPARK_WIDTH = 48
#: A reference shown as a link: http(s), no blank, quote, angle bracket or backslash in it.
_URL = re.compile(r"https?://[^\s<>\"'`\\]+")


def cell(value: Any, line_start: bool = True) -> str:
    """Inline text or (``line_start=False``) a table cell: one line, every Markdown and HTML
    metacharacter escaped, no autolink (:func:`forensics.escape.md_text`); empty as an en dash."""
    if value is None or value == "":
        return "–"
    return md_text(value, line_start) or "–"


def code(value: Any, in_table: bool = True) -> str:
    """A code span nothing inside can close (:func:`forensics.escape.md_code`)."""
    return md_code(value, in_table)


def table(head: list[str], rows: list[list[Any]]) -> list[str]:
    out = ["| " + " | ".join(cell(h, False) for h in head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(c if isinstance(c, _Raw) else cell(c, False) for c in row) + " |" for row in rows]
    return out + [""]


class _Raw(str):
    """A cell already formatted as Markdown (code span)."""


def fence(text: str) -> list[str]:
    """A fenced code block that nothing in ``text`` can close: its fence is longer than any run of
    backticks in it (a closing fence may be indented and followed by blanks). Controls removed."""
    text = terminal(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    mark = "`" * max(3, longest + 1)
    return [mark + "text", text, mark]


def details(summary: str, body: list[str]) -> list[str]:
    """A ``<details>`` block; its summary line is HTML (Markdown is not read there), so HTML-escaped."""
    return ["<details>", f"<summary>{html_text(' '.join(summary.split()))}</summary>", "", *body, "", "</details>",
            ""]


def _when(ts: str | None) -> str:
    return ts.replace("T", " ")[:23] + "Z" if ts else "(no time)"


def _evidence(analysis: Analysis, f: Finding, raw_lines: int) -> list[str]:
    rows = []
    for e in f.evidence:
        rows.append([_when(_iso(e.ts)), _Raw(code(e.origin)), _Raw(code(redact_text(e.message)[0][:300]))])
    out = table(["time (UTC)", "file:line", "line"], rows[:8])
    if len(rows) > 8:
        out += details(f"{len(rows) - 8} more evidence line(s)", table(["time (UTC)", "file:line", "line"], rows[8:]))
    if f.matched > len(f.evidence):
        out.append(f"*{f.matched - len(f.evidence)} more matching line(s) not kept as evidence.*")
        out.append("")
    raw = []
    for e in f.evidence[:raw_lines]:
        text = redact_text(e.detail or e.message)[0]
        lines = text.splitlines()
        if len(lines) > 40:
            lines = lines[:20] + [f"… {len(lines) - 40} lines …"] + lines[-20:]
        raw.append(f"# {e.origin}\n" + "\n".join(line[:400] for line in lines))
    if raw:
        out += details("raw lines", fence("\n\n".join(raw)))
    return out


def _iso(ts: int | None) -> str | None:
    from forensics.units import iso

    return iso(ts)


def _headline(lines: list[str]) -> list[str]:
    first, *rest = lines
    return [f"## {cell(first)}", "", *[f"> {cell(line)}  " for line in rest if line.strip()], ""]


def _finding_rows(findings: list[Finding]) -> list[list[Any]]:
    rows = []
    for f in findings:
        first = f.evidence[0] if f.evidence else None
        rows.append([_Raw(code(f.signature)), f.title + (f" — {f.note}" if f.note else ""),
                     _when(_iso(f.first_seen)), _Raw(code(first.origin)) if first else "–"])
    return rows


def render_markdown(analysis: Analysis, data: dict[str, Any], limit: int = LIMIT) -> str:
    """The report; ``data`` is :func:`forensics.postmortem.model.build_report`'s output."""
    for raw_lines, packages, topology in ((6, True, True), (2, True, True), (1, False, True), (0, False, False)):
        text = _render(analysis, data, raw_lines, packages, topology)
        if len(text) <= limit:
            return text
    note = "\n\n*(report cut at the size limit; `forensics report --format html` has all of it)*\n"
    return text[: limit - len(note)].rsplit("\n", 1)[0] + note


def _render(analysis: Analysis, data: dict[str, Any], raw_lines: int, packages: bool, topology: bool) -> str:
    from forensics.text_report import headline

    v = analysis.verdict
    f = v.root_cause
    out = ["# GPU training post-mortem", ""]
    out += _headline(headline(analysis))
    if f is not None:
        out += [f"**Root cause:** {code(f.signature, False)} · **confidence:** {cell(v.confidence)} · "
                f"**first seen:** {_when(_iso(f.first_seen))}", ""]
        out += ["### Evidence", "", *_evidence(analysis, f, raw_lines)]
        if v.consequences:
            out += ["### What followed (consequences, not causes)", ""]
            out += table(["signature", "what", "first seen", "where"], _finding_rows(v.consequences))
        if f.remedy:
            out += [f"### What to do ({cell(fit)})" if (fit := v.remedy_heading(f)) else "### What to do", ""]
            out += [f"{i}. {md_prose(step)}" for i, step in enumerate(f.remedy, 1)] + [""]
        if f.explain:
            out += ["### What it means", "", md_prose(f.explain), ""]
    if v.contributing:
        out += ["### Risks and contributing findings", ""]
        out += table(["signature", "what", "first seen", "where"], _finding_rows(v.contributing))
    if v.ruled_out:
        out += ["### Considered and ruled out", ""]
        out += table(["signature", "why not"], [[_Raw(code(s)), why] for s, why in v.ruled_out])
    out += _run(data)
    out += _hardware(data, topology)
    if facts := attachment_facts(analysis):
        out += ["**PCIe attachment** (from the link widths, the topology matrix and the lspci tree):", "",
                *[f"- {cell(x)}" for x in facts], ""]
    out += _software(data, packages)
    out += _metrics(analysis, data)
    if f is not None and f.references:
        out += ["### References", "", *[f"- <{r}>" if _URL.fullmatch(r) else f"- {cell(r)}"
                                       for r in f.references[:5]], ""]
    out += _sources(data)
    return "\n".join(out).rstrip() + "\n"


def _run(data: dict[str, Any]) -> list[str]:
    runs = data.get("run", {}).get("recordings", [])
    ranks = data.get("run", {}).get("ranks", [])
    if not runs and not ranks and not data.get("run", {}).get("rank_last_step"):
        return []
    out = ["## The run", ""]
    rows = []
    for r in runs:
        status = str(r.get("status") or "?")
        if r.get("signal"):
            status += f", signal {r['signal']}"
        elif r.get("exit_code") is not None:
            status += f", exit {r['exit_code']}"
        dur = r.get("duration_s")
        rows.append([r.get("host"), _Raw(code(r.get("command") or "")), status,
                     f"{dur:,.1f} s" if isinstance(dur, int | float) else "–", _when(r.get("start"))])
    if rows:
        out += table(["host", "command (redacted)", "ended", "duration", "start (UTC)"], rows)
    if ranks:
        from forensics.findings import number_ranges

        out += [f"Ranks in the analyzed events: {number_ranges(ranks)} ({len(ranks)}).", ""]
    steps = data.get("run", {}).get("rank_last_step") or {}
    if steps:
        out += ["Last training step per rank (its own progress lines): "
                + ", ".join(f"rank {r}: {s:,}" if isinstance(s, int) else f"rank {r}: –" for r, s in steps.items())
                + ".", ""]
    return out


def _hardware(data: dict[str, Any], topology: bool) -> list[str]:
    hw = [h for h in data.get("hardware", []) if h.get("gpus") or h.get("topology")]
    if not hw:
        return []
    out = ["## Hardware", ""]
    for h in hw:
        if len(hw) > 1:
            out += [f"**{cell(h['host'])}** ({code(h['bundle'], False)})", ""]
        rows = [[g["index"], g["name"], _mib(g.get("mem_total_mib")), g.get("pci"), g.get("link"),
                 _Raw(("**degraded** " if g.get("degraded") else "")
                      + cell(g.get("note") or ("ok" if g.get("link") else ""), False))]
                for g in h.get("gpus", [])]
        if rows:
            out += table(["GPU", "model", "VRAM", "PCI", "PCIe now (max)", "link"], rows)
        topo = h.get("topology") or []
        if topo and topology:
            width = max(len(r) for r in topo)
            body = table(topo[0] + [""] * (width - len(topo[0])), [r + [""] * (width - len(r)) for r in topo[1:]])
            kinds, cells = p2p_cells(h.get("p2p") or {})
            if cells:
                body += [f"P2P status (NVML: {cell(' / '.join(kinds))}):", ""]
                body += table([""] + [f"GPU{i}" for i in range(len(cells))],
                              [[f"GPU{i}", *row] for i, row in enumerate(cells)])
            out += details("Topology (nvidia-smi topo -m) and P2P matrix", body)
    return out


def _software(data: dict[str, Any], packages: bool) -> list[str]:
    sw = [s for s in data.get("software", []) if s.get("components") or s.get("packages")]
    if not sw:
        return []
    out = ["## Software", ""]
    for s in sw:
        if len(sw) > 1:
            out += [f"**{cell(s['host'])}** ({code(s['bundle'], False)})", ""]
        out += table(["component", "version"], [[k, v] for k, v in s.get("components", {}).items()])
        if s.get("env"):
            out += details(f"Environment variables that matter ({len(s['env'])})",
                           table(["variable", "value"], [[k, _Raw(code(v))] for k, v in s["env"].items()]))
        if packages and s.get("packages"):
            out += details(f"Key packages ({len(s['packages'])}, from pip freeze)",
                           table(["package", "version"], [[k, v] for k, v in s["packages"].items()]))
    return out


def _metrics(analysis: Analysis, data: dict[str, Any]) -> list[str]:
    rows = data.get("gpu_metrics") or []
    if not rows:
        return []
    out = ["## GPU memory, utilization and power over the run", ""]
    table_rows = []
    for r in rows:
        peak, total = r.get("peak_mem_mib"), r.get("total_mib")
        table_rows.append([r["label"] + (f" ({r['host']})" if len(data.get("hardware", [])) > 1 else ""),
                           f"{_mib(peak)} of {_mib(total)}", _mib(r.get("headroom_mib")),
                           _pct(r.get("mean_util_pct"), r.get("peak_util_pct")),
                           _watts(r.get("mean_power_w"), r.get("peak_power_w"), r.get("power_limit_w")), r["samples"]])
    out += table(["GPU", "peak memory", "headroom (total − peak)", "utilization mean / peak",
                  "power mean / peak (limit)", "samples"], table_rows)
    frame = gpu_frame(analysis)
    window = chart_window(frame)
    if window is not None:
        t0, t1 = window
        found = marks(analysis, t0, t1, SPARK_WIDTH)
        lines = []
        label_w = max(len(r["label"]) for r in rows) + 12
        for r in rows:
            for column, name, _unit in (("mem_used_mib", "memory", ""), ("util_gpu_pct", "util", ""),
                                        ("power_w", "power", "")):
                values, lo, hi = series(frame, r["host"], r["gpu"], column, t0, t1, SPARK_WIDTH)
                if all(math.isnan(x) for x in values):
                    continue
                lines.append(f"{(r['label'] + ' ' + name):<{label_w}} {sparkline(values, lo, hi)}")
        if found:
            row = [" "] * SPARK_WIDTH
            for col, letter, _f in found:
                row[col] = letter
            lines.append(f"{'findings':<{label_w}} {''.join(row)}")
            lines += [f"  {letter} = {f.signature} at {_when(_iso(f.first_seen))}" for _c, letter, f in found]
        from forensics.units import iso

        gap = " " * max(1, SPARK_WIDTH - 16)
        lines.append(f"{'':<{label_w}} {(iso(t0) or '')[11:19]}{gap}{(iso(t1) or '')[11:19]}")
        out += fence("\n".join(lines))
        out.append("")
    if pace := pace_parts(data.get("progress")):
        out += ["Training pace (from its own progress lines): " + cell(", ".join(pace)) + ".", ""]
    return out


def _pct(mean: Any, peak: Any) -> str:
    return "–" if mean is None else f"{mean:.0f} % / {peak:.0f} %"


def _watts(mean: Any, peak: Any, limit: Any) -> str:
    if mean is None:
        return "–"
    return f"{mean:.0f} W / {peak:.0f} W" + (f" ({limit:.0f} W)" if limit else "")


def _sources(data: dict[str, Any]) -> list[str]:
    srcs = data.get("sources", [])
    rows = [[_Raw(code(s["path"])), s["kind"], s["events"], s.get("metrics") or 0] for s in srcs]
    body = table(["file", "read as", "events", "samples"], rows)
    warnings = data.get("warnings") or []
    if warnings:
        body += [f"- {cell(w)}" for w in warnings[:30]] + [""]
    return details(f"Inputs: {len(srcs)} file(s)" + (f", {len(warnings)} warning(s)" if warnings else ""), body)
