"""NVIDIA Kubernetes device-plugin logs: Go ``log`` stamps (``2020/08/10 19:09:42 …``) or klog
(``I0810 19:09:42.123456       1 health.go:123] …``).

``XidCriticalError: Xid=69 on Device=GPU-…, the device will go unhealthy.`` becomes an ``xid``
event (attrs ``xid``, ``uuid``; ``gpu`` = the UUID); ``device marked unhealthy`` and other
failures become ``log`` events. klog stamps print no year: they are placed like every other
year-less stamp (``stream_text.place_yearless``) and marked ``year_inferred``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.stream_text import Stamp, place_yearless
from forensics.parsers.common.windows_events import stamp

from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_GOLOG = lazy_compile(r"^(\d{4})/(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))? (.*)$")
_KLOG = lazy_compile(r"^([IWEF])(\d\d)(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?\s+\d+\s+\S+:\d+\]\s?(.*)$")
_XID = lazy_compile(r"XidCriticalError: Xid=(\d+) on Device=(GPU-[0-9a-fA-F-]+|\S+?)[,\s]")
_UNHEALTHY = lazy_compile(r"marked unhealthy: (GPU-[0-9a-fA-F-]+|\S+)")
_PLUGIN_WORDS = ("XidCriticalError", "nvidia.com/gpu", "device plugin", "Loading NVML", "Starting FS watcher",
                 "Registered device plugin", "Starting GRPC server", "Starting OS watcher", "NVML")
_FAIL = lazy_compile(r"\b(?:Failed|failed|Error|error|unhealthy|Could not|could not)\b")


class K8sDevicePluginParser:
    name = "k8s-device-plugin"
    samples = (
        # Real: device-plugin log of an Xid 69 (corpus k8sdp189-xid69-device-plugin).
        """2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.
2020/08/10 19:09:42 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8
""",  # noqa: E501, W291
        # Shape: newer plugin versions log through klog (same message text).
        """I1114 10:11:12.345678       1 main.go:317] Starting FS watcher.
I1114 10:11:12.901234       1 server.go:245] Registered device plugin for 'nvidia.com/gpu' with Kubelet
E1114 10:20:01.000123       1 health.go:159] XidCriticalError: Xid=79 on Device=GPU-1c9d7c35-0f9e-4c1e-8f5e-3a2b1c0d9e8f; marking device as unhealthy.
""",  # noqa: E501, W291
    )

    def detect(self, head: list[str]) -> float:
        stamped = [h for h in head[:20] if _GOLOG.match(h) or _KLOG.match(h)]
        if not stamped:
            return 0.0
        if any(w in h for h in stamped for w in _PLUGIN_WORDS[:1]):
            return 0.95
        if any(w in h for h in stamped for w in _PLUGIN_WORDS):
            return 0.8
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        out: list[Event] = []
        yearless: list[tuple[int, Stamp]] = []  # (index in out, klog stamp)
        for line in doc.lines():
            text = line.text.rstrip()
            g, k = _GOLOG.match(text), None if _GOLOG.match(text) else _KLOG.match(text)
            ts, ts_source = None, TsSource.NONE
            klog: Stamp | None = None
            if g:
                y, mo, d, h, mi, s = (int(x) for x in g.groups()[:6])
                frac, body, level = g.group(7), g.group(8), ""
                with contextlib.suppress(ValueError):
                    ts, ts_source = stamp(datetime(y, mo, d, h, mi, s, int((frac or "0")[:6].ljust(6, "0"))), ctx)
            elif k:
                frac, body, level = k.group(7), k.group(8), k.group(1)
                klog = Stamp(None, int(k.group(2)), int(k.group(3)), int(k.group(4)), int(k.group(5)),
                             int(k.group(6)), int((frac or "0")[:9].ljust(9, "0")))
            else:
                continue
            xm = _XID.search(body + " ")
            um = _UNHEALTHY.search(body)
            if xm:
                uuid = xm.group(2).rstrip(",;")
                out.append(Event(ts=ts, ts_source=ts_source, source=ctx.source, kind="xid", message=body.strip(),
                                 origin=ctx.origin(line), severity=Severity.ERROR, host=ctx.host, gpu=uuid,
                                 attrs={"xid": int(xm.group(1)), "uuid": uuid, "tool": self.name}))
            elif um or level in ("E", "F") or _FAIL.search(body):
                uuid = um.group(1) if um else None
                out.append(Event(ts=ts, ts_source=ts_source, source=ctx.source, kind="log", message=body.strip(),
                                 origin=ctx.origin(line),
                                 severity=Severity.ERROR if level in ("E", "F") else Severity.WARNING,
                                 host=ctx.host, gpu=uuid,
                                 attrs={"uuid": uuid, "unhealthy": bool(um), "tool": self.name}))
            else:
                continue
            if klog is not None:
                yearless.append((len(out) - 1, klog))
        if yearless:
            placed = place_yearless([(out[i], st) for i, st in yearless], ctx)
            for (i, _), event in zip(yearless, placed, strict=True):
                out[i] = event
        yield from out


PARSER = K8sDevicePluginParser()
