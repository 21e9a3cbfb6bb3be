"""The post-mortem as data: the ``analyze`` JSON contract plus what the bundles say about the machine,
the software and the run, and per-GPU metrics. ``forensics report --format json`` prints it; the
Markdown and HTML renderers read it (and the analysis, for the verdict headline)."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from forensics.ingest.environment import BundleFacts
from forensics.postmortem.metrics import gpu_frame, gpu_summary, progress_summary, rank_steps
from forensics.secrets import redact_text

if TYPE_CHECKING:
    from forensics.analysis import Analysis

__all__ = ["REPORT_VERSION", "build_report", "gpu_labels", "redact_tree"]

REPORT_VERSION = 1


def redact_tree(value: Any, counts: Counter[str] | None = None) -> Any:
    """Every string inside ``value`` (dicts, lists) with secret shapes redacted."""
    if isinstance(value, str):
        return redact_text(value, counts)[0]
    if isinstance(value, dict):
        return {k: redact_tree(v, counts) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_tree(v, counts) for v in value]
    return value


def gpu_labels(facts: list[BundleFacts]) -> dict[tuple[str, str], str]:
    """(host, PCI bus id or index) -> ``GPU n`` from the bundles' inventories."""
    out: dict[tuple[str, str], str] = {}
    for b in facts:
        for g in b.gpus():
            out[(b.host, g.pci.lower())] = f"GPU {g.index}"
            out[(b.host, str(g.index))] = f"GPU {g.index}"
    return out


def label_of(labels: dict[tuple[str, str], str], host: str, gpu: str) -> str:
    found = labels.get((host, gpu.lower()))
    if found:
        return found
    return f"GPU {gpu}" if gpu.isdigit() else gpu


def _num(v: Any, digits: int = 1) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if f != f else round(f, digits)


def build_report(analysis: Analysis, facts: list[BundleFacts]) -> dict[str, Any]:
    from forensics.analysis import to_json_dict
    from forensics.text_report import headline

    data = to_json_dict(analysis)
    data["report"] = {"version": REPORT_VERSION, "headline": headline(analysis)}
    data["hardware"] = [{
        "bundle": b.where, "host": b.host,
        "gpus": [asdict(g) for g in b.gpus()],
        "topology": b.topology(),
        "p2p": b.p2p(),
    } for b in facts]
    data["software"] = [{
        "bundle": b.where, "host": b.host, "components": b.software(), "packages": b.key_packages(),
        "env": b.interesting_env(),
    } for b in facts]
    ranks = sorted({e.rank for e in analysis.timeline.events if e.rank is not None})
    runs = [dict(b.run(), bundle=b.where) for b in facts]
    steps = rank_steps(analysis)
    data["run"] = {"recordings": runs, "ranks": ranks,
                   "rank_last_step": {str(r): s for r, s in sorted(steps.items())}}
    labels = gpu_labels(facts)
    summary = gpu_summary(gpu_frame(analysis))
    data["gpu_metrics"] = [{
        "host": str(r["host"]), "gpu": str(r["gpu"]), "label": label_of(labels, str(r["host"]), str(r["gpu"])),
        "samples": int(r["samples"]),
        "peak_mem_mib": _num(r["peak_mem_mib"], 0), "total_mib": _num(r["total_mib"], 0),
        "headroom_mib": _num(r["headroom_mib"], 0), "mean_util_pct": _num(r["mean_util_pct"]),
        "peak_util_pct": _num(r["peak_util_pct"]), "mean_power_w": _num(r["mean_power_w"]),
        "peak_power_w": _num(r["peak_power_w"]), "power_limit_w": _num(r["power_limit_w"]),
        "peak_temp_c": _num(r["peak_temp_c"], 0),
    } for r in summary.to_dict("records")]
    prog = progress_summary(analysis)
    data["progress"] = prog.as_dict() if prog else None
    return redact_tree(data)
