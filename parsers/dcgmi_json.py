"""``dcgmi health -c -j`` and ``dcgmi diag -j``: DCGM's JSON reports.

Health: ``{"body": {"GPU ID: 0": {"children": {"PCIe system": {…, "value": "Warning"}}}, "Overall
Health": {"value": …}}, "header": ["Health Monitor Report"]}`` — every non-healthy ``<X> system`` node
becomes a ``dcgm`` event worded like the host engine's health lines. Diag: the tests under
``"DCGM GPU Diagnostic"`` whose results say Fail/Warn become ``nvidia-smi`` events worded like the
table parser's (``dcgmi diag <test>: Fail - GPU: 0 — <warning>``). The tree is walked generically, so
nesting that differs between DCGM versions does not matter.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.dcgm_hostengine import health_message

from forensics.events import Event, Severity, TsSource
from forensics.ingest.reader import loads_bounded
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_GPU_KEY = lazy_compile(r"^GPU\s+ID\s*:?\s*(\d+)$", re.I)
_MAX_BYTES = 16 << 20


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


def _health(node: Any, gpu: str | None, out: list[tuple[str | None, str, str, str]]) -> None:
    if not isinstance(node, dict):
        return
    for key, child in node.items():
        g = _GPU_KEY.match(key)
        sub_gpu = g.group(1) if g else gpu
        if isinstance(child, dict) and key.lower().endswith(" system"):
            value = str(child.get("value", ""))
            if value and value.lower() != "healthy":
                out.append((sub_gpu, key[: -len(" system")], value, " ".join(_strings(child.get("children", {})))))
        _health(child.get("children", child) if isinstance(child, dict) else child, sub_gpu, out)


def _diag_tests(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "name" in node and isinstance(node.get("results"), list):
            yield node
        for v in node.values():
            yield from _diag_tests(v)
    elif isinstance(node, list):
        for v in node:
            yield from _diag_tests(v)


class DcgmiJsonParser:
    name = "dcgmi-json"
    #: producer versions its real samples hold (dcgm139's case note)
    tested_with = {"DCGM": ("3.3",)}
    samples = (
        # Real: `dcgmi health -c -j` of a healthy group (NVIDIA/DCGM#263).
        """{
        "body" : 
        {
                "Overall Health" : 
                {
                        "value" : "Healthy"
                }
        },
        "header" : 
        [
                "Health Monitor Report"
        ]
}
""",  # noqa: W291
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:40])
        if not text.lstrip().startswith("{"):
            return 0.0
        if "Health Monitor Report" in text or "Overall Health" in text:
            return 0.95
        if "DCGM GPU Diagnostic" in text or '"test_categories"' in text:
            return 0.95
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        if len(doc.data) > _MAX_BYTES:
            ctx.warn("DCGM JSON report too large; skipped")
            return
        try:
            tree = loads_bounded(doc.data[:].decode("utf-8", errors="replace"))  # at most _MAX_BYTES
        except (ValueError, RecursionError) as exc:
            ctx.warn(f"not readable as JSON ({exc})")
            return
        first = next(iter(doc.lines()), None)
        if first is None:
            return
        origin = ctx.origin(first, doc.line_count())
        found: list[tuple[str | None, str, str, str]] = []
        _health(tree.get("body", {}) if isinstance(tree, dict) else {}, None, found)
        for gpu, system, result, text in found:
            failed = result.lower().startswith(("fail", "error"))
            yield Event(ts=None, ts_source=TsSource.NONE, source=ctx.source, kind="dcgm",
                        message=health_message(system, result, text) + (f" (GPU {gpu})" if gpu else ""),
                        origin=origin, severity=Severity.ERROR if failed else Severity.WARNING, host=ctx.host,
                        gpu=gpu, attrs={"tool": "dcgmi-health", "health_system": system, "result": result.lower()})
        body = tree.get("body") if isinstance(tree, dict) else None
        overall = body.get("Overall Health") if isinstance(body, dict) else None
        if isinstance(overall, dict) and overall.get("value"):
            yield Event(ts=None, ts_source=TsSource.NONE, source=ctx.source, kind="dcgm",
                        message=f"dcgmi health: Overall Health {overall['value']}", origin=origin,
                        severity=Severity.INFO, host=ctx.host,
                        attrs={"tool": "dcgmi-health", "overall": str(overall["value"]).lower()})
        for test in _diag_tests(tree):
            for res in test["results"]:
                if not isinstance(res, dict):
                    continue
                status = str(res.get("status", res.get("result", "")))
                if not status.lower().startswith(("fail", "warn")):
                    continue
                gpu = str(res["gpu_id"]) if res.get("gpu_id") is not None else None
                notes = [str(w.get("warning", w)) if isinstance(w, dict) else str(w)
                         for w in res.get("warnings", []) or []]
                msg = f"dcgmi diag {test['name']}: {status}" + (f" - GPU: {gpu}" if gpu else "")
                if notes:
                    msg += " — " + " ".join(notes)
                yield Event(ts=None, ts_source=TsSource.NONE, source=ctx.source, kind="nvidia-smi", message=msg,
                            origin=origin, severity=Severity.ERROR if status.lower().startswith("fail")
                            else Severity.WARNING, host=ctx.host, gpu=gpu,
                            attrs={"tool": "dcgmi", "test": str(test["name"]), "result": status.lower(),
                                   "notes": notes})


PARSER = DcgmiJsonParser()
