"""``forensics diff A B``: what changed between a good run (A) and a bad one (B).

Compares the two sides' environments (driver, CUDA, torch and its CUDA build, NCCL, pip packages,
the variables that change memory or links), topology, per-GPU peak memory and headroom, training
pace, exit and findings, then writes the sentence that ties the differences that matter together.
Each side is any set of inputs ``analyze`` reads; bundle facts come from their ``host/`` snapshots.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from forensics.units import mib

if TYPE_CHECKING:
    from forensics.analysis import Analysis
    from forensics.ingest.environment import BundleFacts

__all__ = ["compare", "render_diff_markdown", "render_diff_text"]

#: memory changes smaller than this are noise (allocator granularity, driver context)
MEM_NOISE_MIB = 32.0
#: a pace change smaller than this share is noise
PACE_NOISE = 0.05


def _merged(facts: list[BundleFacts], getter: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for b in facts:
        for k, v in getattr(b, getter)().items():
            out.setdefault(k, str(v))
            if out[k] != str(v):
                out[k] = f"{out[k]} / {v}"
    return out


def _changes(a: dict[str, str], b: dict[str, str]) -> list[dict[str, Any]]:
    out = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            out.append({"name": k, "a": a.get(k), "b": b.get(k)})
    return out


def _gpu_rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["label"]: r for r in data.get("gpu_metrics", [])}


def _inventory(facts: list[BundleFacts]) -> dict[str, str]:
    return {f"GPU {g.index}": f"{g.name}, {g.link}" + (" (degraded)" if g.degraded else "")
            for b in facts for g in b.gpus()}


def _topology(facts: list[BundleFacts]) -> dict[str, str]:
    out: dict[str, str] = {}
    for b in facts:
        rows = b.topology()
        if not rows:
            continue
        head = rows[0]
        for r in rows[1:]:
            for j, c in enumerate(r[1:], 1):
                if j < len(head) and re.fullmatch(r"GPU\d+", head[j]) and r[0] != head[j]:
                    out[f"{r[0]}↔{head[j]}"] = c
    return out


def _ranks(a: Analysis, b: Analysis) -> list[dict[str, Any]]:
    from forensics.postmortem.metrics import rank_steps

    sa, sb = rank_steps(a), rank_steps(b)
    return [{"rank": r, "a_last_step": sa.get(r), "b_last_step": sb.get(r), "a_progress": r in sa,
             "b_progress": r in sb} for r in sorted(set(sa) | set(sb))]


def _findings(analysis: Analysis) -> dict[str, str]:
    return {f.signature: str(f.role) for f in analysis.findings}


def compare(a: Analysis, fa: list[BundleFacts], b: Analysis, fb: list[BundleFacts]) -> dict[str, Any]:
    """The differences as data (``forensics diff --format json``)."""
    from forensics.postmortem.model import build_report, redact_tree

    da, db = build_report(a, fa), build_report(b, fb)
    memory = []
    ga, gb = _gpu_rows(da), _gpu_rows(db)
    for label in sorted(set(ga) | set(gb), key=lambda s: (len(s), s)):
        ra, rb = ga.get(label, {}), gb.get(label, {})
        pa, pb = ra.get("peak_mem_mib"), rb.get("peak_mem_mib")
        memory.append({"gpu": label, "a_peak_mib": pa, "b_peak_mib": pb,
                       "delta_mib": (pb - pa) if pa is not None and pb is not None else None,
                       "a_headroom_mib": ra.get("headroom_mib"), "b_headroom_mib": rb.get("headroom_mib"),
                       "a_total_mib": ra.get("total_mib"), "b_total_mib": rb.get("total_mib")})
    fa_sig, fb_sig = _findings(a), _findings(b)
    runs_a, runs_b = da["run"]["recordings"], db["run"]["recordings"]
    out: dict[str, Any] = {
        "version": 1,
        "a": {"inputs": _inputs(fa, da), "verdict": da["verdict"], "runs": runs_a,
              "progress": da.get("progress")},
        "b": {"inputs": _inputs(fb, db), "verdict": db["verdict"], "runs": runs_b,
              "progress": db.get("progress")},
        "software": _changes(_merged(fa, "software"), _merged(fb, "software")),
        "packages": _changes(_merged(fa, "packages"), _merged(fb, "packages")),
        "env": _changes(_merged(fa, "interesting_env"), _merged(fb, "interesting_env")),
        "gpus": _changes(_inventory(fa), _inventory(fb)),
        "topology": _changes(_topology(fa), _topology(fb)),
        "command": _changes(_command(runs_a), _command(runs_b)),
        "memory": memory,
        "ranks": _ranks(a, b),
        "findings": {"only_a": {k: v for k, v in fa_sig.items() if k not in fb_sig},
                     "only_b": {k: v for k, v in fb_sig.items() if k not in fa_sig}},
    }
    out["env"] = [c for c in out["env"] if not _recorder_path(c)]
    out["summary"] = _sentence(out, a, b)
    return redact_tree(out)


def _command(runs: list[dict[str, Any]]) -> dict[str, str]:
    return {"command": str(runs[0]["command"])} if runs else {}


def _inputs(facts: list[BundleFacts], data: dict[str, Any]) -> list[str]:
    return [b.where for b in facts] or [s["path"] for s in data["sources"]][:50]


def _recorder_path(change: dict[str, Any]) -> bool:
    """Variables the recorder points at its own bundle (flight-recorder dump paths) differ every run."""
    return all(isinstance(v, str) and "/torch/" in v for v in (change["a"], change["b"]) if v is not None) \
        and change["a"] is not None and change["b"] is not None


def _mib(v: float) -> str:
    return mib(abs(v))  # the sign is worded (higher / lower)


_KEY_SOFTWARE = ("torch", "torch CUDA build", "NVIDIA driver", "CUDA (driver)", "NCCL", "CUDA (container)", "cuDNN")


def _sentence(d: dict[str, Any], a: Analysis, b: Analysis) -> str:
    parts: list[str] = []
    same_cmd = not d["command"]
    mem = [m for m in d["memory"] if m["delta_mib"] is not None and abs(m["delta_mib"]) >= MEM_NOISE_MIB]
    if mem:
        top = max(mem, key=lambda m: abs(m["delta_mib"]))
        word = "higher" if top["delta_mib"] > 0 else "lower"
        text = f"B's peak memory on {top['gpu']} is {_mib(top['delta_mib'])} {word}"
        if same_cmd:
            text += " with the same command"
        if top.get("b_headroom_mib") is not None:
            text += f" ({_mib(top['b_headroom_mib'])} left of {_mib(top['b_total_mib'] or 0)})"
        parts.append(text)
    parts += _rank_sentences(d["ranks"])
    for c in d["software"]:
        if c["name"] in _KEY_SOFTWARE:
            parts.append(f"B runs {c['name']} {c['b'] or '(none)'} where A ran {c['a'] or '(none)'}")
    for c in d["env"]:
        if c["a"] is None:
            parts.append(f"B sets {c['name']}={c['b']} where A left it unset")
        elif c["b"] is None:
            parts.append(f"B leaves {c['name']} unset where A had {c['a']}")
        else:
            parts.append(f"B sets {c['name']}={c['b']} where A had {c['a']}")
    pkgs = [c for c in d["packages"] if c["name"] not in ("torch",)]
    if pkgs:
        shown = ", ".join(f"{c['name']} {c['a'] or '–'} → {c['b'] or '–'}" for c in pkgs[:3])
        parts.append(f"{len(pkgs)} package(s) differ ({shown}{', …' if len(pkgs) > 3 else ''})")
    if d["gpus"]:
        g = d["gpus"][0]
        parts.append(f"the GPUs differ ({g['name']}: {g['a'] or 'absent'} → {g['b'] or 'absent'})")
    if d["topology"]:
        parts.append(f"the topology differs on {len(d['topology'])} link(s)")
    if not same_cmd:
        parts.append("the command differs")
    pa, pb = d["a"].get("progress") or {}, d["b"].get("progress") or {}
    if pa.get("rate") and pb.get("rate") and pa.get("rate_unit") == pb.get("rate_unit"):
        change = pb["rate"] / pa["rate"] - 1
        if abs(change) >= PACE_NOISE:
            parts.append(f"B trains {abs(change) * 100:.0f} % {'faster' if change > 0 else 'slower'} "
                         f"({pb['rate']:,.0f} vs {pa['rate']:,.0f} {pb['rate_unit']})")
    if not parts:
        parts.append("no difference in environment, topology, GPU memory or pace")
    parts.append(_outcome(b, "B") + ("" if a.verdict.root_cause is None else f"; {_outcome(a, 'A')}"))
    text = "; ".join(p for p in parts if p)
    return text[:1].upper() + text[1:] + "."


def _rank_sentences(ranks: list[dict[str, Any]]) -> list[str]:
    """Ranks that trained in A and printed no step in B, or stopped far earlier than in A."""
    from forensics.findings import number_ranges

    silent = [r for r in ranks if r["a_progress"] and not r["b_progress"]]
    out = []
    if silent and any(r["b_progress"] for r in ranks):  # B has per-rank lines at all
        reached = [r["a_last_step"] for r in silent if r["a_last_step"] is not None]
        what = f" (in A they reached step {max(reached):,})" if reached else " (in A they did)"
        word = "ranks" if len(silent) > 1 else "rank"
        out.append(f"B's {word} {number_ranges(r['rank'] for r in silent)} printed no training step{what}")
    behind = [r for r in ranks if r["a_progress"] and r["b_progress"] and r["a_last_step"] and r["b_last_step"]
              is not None and r["b_last_step"] < 0.5 * r["a_last_step"]]
    for r in behind[:4]:
        out.append(f"B's rank {r['rank']} stopped at step {r['b_last_step']:,} where A's reached {r['a_last_step']:,}")
    return out


def _outcome(analysis: Analysis, side: str) -> str:
    from forensics.findings import number_ranges

    f = analysis.verdict.root_cause
    if f is None:
        return f"{side} found no failure"
    where = ""
    if f.ranks:
        where = f" on rank{'s' if len(f.ranks) > 1 else ''} {number_ranges(f.ranks)}"
    phase = str(f.facts.get("phase") or "")
    when = ""
    if phase:
        first = f.facts.get("first") is True
        when = f" at its first {phase.replace('-', ' ')}" if first else f" in the {phase.replace('-', ' ')}"
    return f"{side} failed with {f.signature}{where}{when}"


# -- rendering ---------------------------------------------------------------------------------
def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:,.0f}"
    return str(v)


def _rows(d: dict[str, Any]) -> list[tuple[str, list[list[str]]]]:
    sections: list[tuple[str, list[list[str]]]] = []
    va, vb = d["a"]["verdict"], d["b"]["verdict"]
    sections.append(("Verdict", [["", "A", "B"], ["root cause", _fmt(va["root_cause"]) if va["root_cause"] else "none",
                                                   _fmt(vb["root_cause"]) if vb["root_cause"] else "none"],
                                 ["confidence", va["confidence"], vb["confidence"]]]))
    ra, rb = (d["a"]["runs"] or [{}])[0], (d["b"]["runs"] or [{}])[0]
    if ra or rb:
        sections.append(("Run", [["", "A", "B"], ["exit", _fmt(ra.get("signal") or ra.get("exit_code")),
                                                   _fmt(rb.get("signal") or rb.get("exit_code"))],
                                 ["duration (s)", _fmt(ra.get("duration_s")), _fmt(rb.get("duration_s"))]]))
    for key, title in (("software", "Software"), ("env", "Environment variables"), ("gpus", "GPUs"),
                       ("topology", "Topology"), ("command", "Command"), ("packages", "Packages (pip freeze)")):
        if d[key]:
            sections.append((title, [["", "A", "B"]] + [[c["name"], _fmt(c["a"]), _fmt(c["b"])] for c in d[key]]))
    if d["memory"]:
        sections.append(("Peak GPU memory and headroom (MiB)",
                         [["GPU", "A peak", "B peak", "Δ", "A headroom", "B headroom"]]
                         + [[m["gpu"], _fmt(m["a_peak_mib"]), _fmt(m["b_peak_mib"]),
                             ("+" if (m["delta_mib"] or 0) > 0 else "") + _fmt(m["delta_mib"]),
                             _fmt(m["a_headroom_mib"]), _fmt(m["b_headroom_mib"])] for m in d["memory"]]))
    pa, pb = d["a"].get("progress") or {}, d["b"].get("progress") or {}
    if pa or pb:
        def rate(p: dict[str, Any]) -> str:
            return f"{p['rate']:,.1f} {p['rate_unit']}" if p.get("rate") else "–"

        def step(p: dict[str, Any]) -> str:
            return f"{p['step_s'] * 1000:,.1f} ms" if p.get("step_s") else "–"

        sections.append(("Training pace (median)", [["", "A", "B"], ["throughput", rate(pa), rate(pb)],
                                                    ["step time", step(pa), step(pb)],
                                                    ["last step", _fmt(pa.get("last_step")),
                                                     _fmt(pb.get("last_step"))]]))
    if any(r["a_last_step"] != r["b_last_step"] or r["a_progress"] != r["b_progress"] for r in d["ranks"]):
        def last(r: dict[str, Any], side: str) -> str:
            if not r[f"{side}_progress"]:
                return "no step"
            return _fmt(r[f"{side}_last_step"]) if r[f"{side}_last_step"] is not None else "progress"

        sections.append(("Last step per rank", [["rank", "A", "B"]]
                         + [[str(r["rank"]), last(r, "a"), last(r, "b")] for r in d["ranks"]]))
    only = [[sig, role, ""] for sig, role in d["findings"]["only_a"].items()]
    only += [[sig, "", role] for sig, role in d["findings"]["only_b"].items()]
    if only:
        sections.append(("Findings in one run only", [["signature", "A", "B"]] + only))
    return sections


def render_diff_text(d: dict[str, Any]) -> str:
    """The comparison for a terminal: every field without controls or bidi overrides, one line each."""
    from forensics.escape import terminal

    out = [terminal(d["summary"], one_line=True), ""]
    for title, raw_rows in _rows(d):
        rows = [[terminal(c, one_line=True) for c in r] for r in raw_rows]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out.append(title + ":")
        for r in rows:
            out.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        out.append("")
    for side in ("a", "b"):
        inputs = [terminal(str(p), one_line=True) for p in d[side]["inputs"]]
        out.append(f"{side.upper()}: " + ", ".join(inputs[:3]) + (" …" if len(inputs) > 3 else ""))
    return "\n".join(out) + "\n"


def render_diff_markdown(d: dict[str, Any]) -> str:
    from forensics.postmortem.markdown import cell, table

    out = ["# Run A vs run B", "", f"> {cell(d['summary'])}", ""]
    for title, rows in _rows(d):
        body = table(rows[0], rows[1:])
        if title.startswith("Packages") and len(rows) > 15:
            from forensics.postmortem.markdown import details

            out += details(f"{title}: {len(rows) - 1} differ", body)
        else:
            out += [f"## {title}", "", *body]
    return "\n".join(out).rstrip() + "\n"


def dumps(d: dict[str, Any]) -> str:
    """Strict JSON: a non-finite number is ``null`` (and named in ``notes``)."""
    from forensics.escape import finite, json_dumps

    notes: list[str] = []
    data = finite(d, notes)
    if notes:
        data["notes"] = [f"not a finite number, written as null: {n}" for n in notes[:20]]
    return json_dumps(data, indent=2) + "\n"
