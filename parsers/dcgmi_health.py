"""``dcgmi health -c``: the Health Monitor Report table (``| Overall Health | Warning |``, one block
per ``GPU ID: N`` whose right cell lists ``<System> system: <Result> - <text>`` entries, wrapped onto
continuation rows).

Each non-healthy system of a GPU becomes a ``dcgm`` event worded like the host engine's health lines
(``DCGM health PCIe: Warning - …``, see :func:`dcgm_hostengine.health_message`); the overall result is
one more event. A healthy report gives only that summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.dcgm_hostengine import health_message

from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_ROW = lazy_compile(r"^\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")
_GPU_ID = lazy_compile(r"^(GPU|CPU|Switch|NvSwitch)\s+ID\s*:?\s*(\d+)$", re.I)
_ENTRY = lazy_compile(r"^(?P<system>[A-Za-z][\w /-]*?) system\s*:\s*(?P<result>Healthy|Warning|Failure|Fail|Error)\b"
                      r"\s*-?\s*(?P<text>.*)$", re.I)
_OVERALL = lazy_compile(r"Overall Health\s*:?\s*(Healthy|Warning|Failure|Fail|Error)?", re.I)


@dataclass
class _Entry:
    entity: str
    system: str
    result: str
    line: Line
    text: list[str] = field(default_factory=list)
    last_no: int = 0


class DcgmiHealthParser:
    name = "dcgmi-health"
    samples = (
        # Shape: `dcgmi health -c` report of a GPU with too many PCIe replays (layout of DCGM 3.x, the
        # warning text as DCGM's health module words it for DCGM_FR_PCI_REPLAY_RATE).
        """Health Monitor Report
+------------------+---------------------------------------------------------+
| Overall Health   | Warning                                                 |
+==================+=========================================================+
| GPU ID: 0        | Warning                                                 |
|                  | PCIe system: Warning - Detected more than 8 PCIe        |
|                  | replays per minute for GPU 0 : 13 Reconnect PCIe card.  |
+------------------+---------------------------------------------------------+
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:20])
        if "Health Monitor Report" in text and "|" in text:
            return 0.96
        if re.search(r"^\|\s*Overall Health\s*(?:\|\s*|:)", text, re.M):
            return 0.9
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        entity = ""
        entries: list[_Entry] = []
        current: _Entry | None = None
        overall: tuple[str, Line] | None = None
        for line in doc.lines():
            m = _ROW.match(line.text.strip())
            if not m:
                continue
            left, right = m.group(1), m.group(2)
            om = _OVERALL.match(left) or (_OVERALL.match(right) if not left else None)
            if om:
                result = om.group(1) or (right.split()[0] if right else "")
                overall = (result, line)
                current = None
                continue
            gm = _GPU_ID.match(left)
            if gm:
                entity = f"{gm.group(1).upper()} {gm.group(2)}"
                current = None
            em = _ENTRY.match(right)
            if em:
                current = _Entry(entity, em.group("system").strip(), em.group("result"), line,
                                 [em.group("text")] if em.group("text") else [], line.no)
                entries.append(current)
            elif current is not None and right and not left:
                current.text.append(right)
                current.last_no = line.no
        for e in entries:
            if e.result.lower() == "healthy":
                continue
            failed = e.result.lower().startswith(("fail", "error"))
            gpu = e.entity.split()[1] if e.entity.startswith("GPU ") else None
            yield Event(ts=None, ts_source=TsSource.NONE, source=ctx.source, kind="dcgm",
                        message=health_message(e.system, e.result, " ".join(e.text)) + (
                            f" ({e.entity})" if e.entity else ""),
                        origin=ctx.origin(e.line, e.last_no - e.line.no + 1),
                        severity=Severity.ERROR if failed else Severity.WARNING, host=ctx.host, gpu=gpu,
                        attrs={"tool": "dcgmi-health", "health_system": e.system, "result": e.result.lower(),
                               "entity": e.entity})
        if overall is not None:
            result, line = overall
            yield Event(ts=None, ts_source=TsSource.NONE, source=ctx.source, kind="dcgm",
                        message=f"dcgmi health: Overall Health {result}", origin=ctx.origin(line),
                        severity=Severity.INFO, host=ctx.host,
                        attrs={"tool": "dcgmi-health", "overall": result.lower()})


PARSER = DcgmiHealthParser()
