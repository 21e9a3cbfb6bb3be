"""DCGM host-engine log (``/var/log/nv-hostengine.log``): ``YYYY-MM-DD HH:MM:SS.mmm LEVEL [pid:tid]
[[Module]] message [/path/File.cpp:123] [Class::Function]`` — the stamp is often left out when a user
pastes a line.

ERROR and WARNING lines become ``dcgm`` events (the same message at most a few times: the host engine
repeats a failing poll every few seconds); a health watch's finding (``[[Health]] Detected a WARNING
in health system Thermal: '…'``) is worded like ``dcgmi health`` (``DCGM health <system>: <result> -
<text>``) with ``health_system``, ``result`` and the GPU it names, so signatures read all three forms
alike.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.windows_events import stamp

from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "health_message"]

_LINE = lazy_compile(
    r"^(?:(?P<date>\d{4}-\d\d-\d\d) (?P<time>\d\d:\d\d:\d\d)(?:\.(?P<frac>\d+))? +)?"
    r"(?P<level>ERROR|WARNING|WARN|INFO|DEBUG|VERBOSE|FATAL) +\[(?P<pid>\d+):(?P<tid>\d+)\] +"
    r"(?:\[\[(?P<module>[\w ]+)\]\] +)?(?P<msg>.*?)"
    r"(?: +\[(?P<src>[^\]\s]+\.(?:cpp|h|hpp|c):\d+)\])?(?: +\[(?P<func>[\w:~<>]+)\])?\s*$"
)
_HEALTH = lazy_compile(r"Detected an? (?P<result>WARNING|FAILURE|FAIL|ERROR) in health system (?P<system>[\w ]+?)\s*:"
                       r"\s*'?(?P<text>.*?)'?\s*$", re.I)
_GPU = lazy_compile(r"\bGPU (\d+)\b")
_LEVELS = {"ERROR": Severity.ERROR, "FATAL": Severity.CRITICAL, "WARNING": Severity.WARNING,
           "WARN": Severity.WARNING}
#: identical messages kept per file
_MAX_REPEATS = 3


def health_message(system: str, result: str, text: str) -> str:
    """The one wording of a DCGM health-watch finding: ``DCGM health Thermal: Warning - <text>``."""
    return f"DCGM health {system.strip()}: {result.strip().capitalize()} - {' '.join(text.split())}".rstrip(" -")


class DcgmHostEngineParser:
    name = "dcgm-hostengine"
    samples = (
        # Real: nv-hostengine.log lines of DCGM 2.2 on an A800 node (NVIDIA/DCGM#174).
        """2024-05-24 10:11:29.243 ERROR [5231:5273] [[NvSwitch]] ReadNvSwitchStatusAllSwitches() returned Object is in an undefined state [/workspaces/dcgm-rel_dcgm_2_2-postmerge/modules/nvswitch/DcgmModuleNvSwitch.cpp:388] [DcgmNs::DcgmModuleNvSwitch::RunOnce]
2024-05-24 10:11:59.243 ERROR [5231:5273] [[NvSwitch]] ReadNvSwitchStatusAllSwitches() returned Object is in an undefined state [/workspaces/dcgm-rel_dcgm_2_2-postmerge/modules/nvswitch/DcgmModuleNvSwitch.cpp:388] [DcgmNs::DcgmModuleNvSwitch::RunOnce]
""",  # noqa: E501
        # Real: a health-watch line as pasted without its stamp (NVIDIA/DCGM#270).
        """ERROR [1514002:1514004] [[Health]] Detected a WARNING in health system Thermal: 'Detected clocks event due to thermal violation in GPU 2. Verify that the cooling on this machine is functional, including external, thermal material interface, fans, and any other components.
""",  # noqa: E501
    )

    def detect(self, head: list[str]) -> float:
        lines = [h for h in head[:30] if h.strip()]
        hits = [h for h in lines if _LINE.match(h.strip())]
        if not hits:
            return 0.0
        marked = any("[[" in h or re.search(r"\.cpp:\d+\]", h) for h in hits)
        if marked and len(hits) >= max(1, len(lines) // 2):
            return 0.93
        return 0.5 if marked else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        seen: Counter[str] = Counter()
        for line in doc.lines():
            m = _LINE.match(line.text.strip())
            if not m:
                continue
            level = m.group("level").upper()
            msg = m.group("msg").strip()
            hm = _HEALTH.search(msg)
            if level not in _LEVELS and not hm:
                continue
            key = re.sub(r"\d+", "#", msg)[:200]
            seen[key] += 1
            if seen[key] > _MAX_REPEATS:
                continue
            ts, ts_source = None, TsSource.NONE
            if m.group("date"):
                frac = (m.group("frac") or "0")[:6].ljust(6, "0")
                try:
                    naive = datetime.fromisoformat(f"{m.group('date')} {m.group('time')}").replace(
                        microsecond=int(frac))
                    ts, ts_source = stamp(naive, ctx)
                except ValueError:
                    pass
            attrs: dict[str, Any] = {"tool": "dcgm", "level": level, "module": m.group("module"),
                                     "pid": int(m.group("pid")), "tid": int(m.group("tid"))}
            if m.group("src"):
                attrs["src"] = m.group("src")
            if m.group("func"):
                attrs["func"] = m.group("func")
            severity = _LEVELS.get(level, Severity.INFO)
            gpu = None
            message = msg
            if hm:
                result = hm.group("result").lower()
                attrs.update(health_system=hm.group("system").strip(), result=result)
                message = health_message(hm.group("system"), result, hm.group("text"))
                severity = Severity.ERROR if result.startswith("fail") else Severity.WARNING
                g = _GPU.search(hm.group("text"))
                if g:
                    gpu = g.group(1)
            yield Event(ts=ts, ts_source=ts_source, source=ctx.source, kind="dcgm", message=message,
                        origin=ctx.origin(line), severity=severity, host=ctx.host, gpu=gpu, pid=attrs["pid"],
                        attrs=attrs)


PARSER = DcgmHostEngineParser()
