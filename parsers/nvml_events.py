"""``nvml-events.jsonl`` from a recorder bundle: NVML's own events and the sampler's health.

``xid`` lines are the driver's Xid events as NVML delivered them (``nvmlEventSetWait_v2``,
Xid critical errors) → Event kind ``xid``, source ``nvml``, attrs ``xid``, ``pci``;
``ecc`` lines → kind ``ecc``; ``gpu-lost`` (a sampling call answered "GPU is lost") →
kind ``gpu-lost``. The sampler's health — ``unresponsive`` (an NVML call that did not
return: placed at the time the call began), ``recovered``, ``sampler-exited``,
``sampler-gave-up`` — becomes kind ``recorder`` with ``reason`` ``nvml-unresponsive`` …
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from forensics.parsers.common.base import ParseContext, Record, json_objects

from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import TextDocument

FORMAT = "gpu-forensics-nvml-events"

_SAMPLE = """{"format": "gpu-forensics-nvml-events", "version": 1, "host": "gpu-node-07"}
{"type":"xid","gpu":0,"pci":"0000:3b:00.0","xid":43,"t":1740910021512345678}
{"type":"ecc","gpu":1,"pci":"0000:5d:00.0","ecc":"double-bit","t":1740910022000000000}
{"type":"unresponsive","since":1740910030000000000,"call":"nvmlDeviceGetPowerUsage","gpu":3,"waited_s":3.1,"worker_pid":4242,"attempt":1,"t":1740910033100000000}
{"type":"recovered","since":1740910030000000000,"unresponsive_s":12.4,"t":1740910042400000000}
"""


def _iso(ns: int) -> str:
    try:
        return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError, OSError):
        return "?"


class NvmlEventsParser:
    name = "nvml-events"
    #: producer versions its real samples hold (the recorded samples (their README))
    tested_with = {"NVIDIA driver": ("580.159", "580.159.04")}
    samples = (_SAMPLE,)

    def detect(self, head: list[str]) -> float:
        first = head[0].replace(" ", "") if head else ""
        return 1.0 if first.startswith('{"format":"' + FORMAT + '"') else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        host = ctx.host
        for line, obj in json_objects(doc, ctx):
            if obj.get("format") == FORMAT:
                host = obj.get("host") if isinstance(obj.get("host"), str) else host
                continue
            event = self._event(obj, ctx, line, host)
            if event is not None:
                yield event

    def _event(self, obj: dict[str, Any], ctx: ParseContext, line: Any, host: str | None) -> Event | None:
        kind = obj.get("type")
        t = obj.get("t") if isinstance(obj.get("t"), int) else None
        gpu_index = obj.get("gpu") if isinstance(obj.get("gpu"), int) else None
        pci = obj.get("pci") if isinstance(obj.get("pci"), str) else None
        gpu = pci or (str(gpu_index) if gpu_index is not None else None)
        where = f"GPU {gpu_index}" + (f" ({pci})" if pci else "") if gpu is not None else "an unknown GPU"
        common: dict[str, Any] = {"ts_source": TsSource.EXACT if t else TsSource.NONE, "source": ctx.source,
                                  "origin": ctx.origin(line), "host": host, "gpu": gpu}
        if kind == "xid":
            xid = obj.get("xid")
            return Event(ts=t, kind="xid", message=f"NVML Xid {xid} on {where}", severity=Severity.ERROR,
                         attrs={"xid": xid, "pci": pci, "gpu_index": gpu_index}, **common)
        if kind == "ecc":
            ecc = str(obj.get("ecc", ""))
            return Event(ts=t, kind="ecc", message=f"NVML {ecc} ECC error event on {where}",
                         severity=Severity.ERROR if ecc == "double-bit" else Severity.WARNING,
                         attrs={"ecc": ecc, "pci": pci, "gpu_index": gpu_index}, **common)
        if kind == "gpu-lost":
            return Event(ts=t, kind="gpu-lost", message=f"NVML: GPU is lost ({where}; {obj.get('call', '')})",
                         severity=Severity.CRITICAL, attrs={"pci": pci, "gpu_index": gpu_index}, **common)
        if kind == "unresponsive":
            since = obj.get("since") if isinstance(obj.get("since"), int) else t
            common["ts_source"] = TsSource.EXACT if since else TsSource.NONE
            return Event(ts=since, kind="recorder", severity=Severity.ERROR,
                         message=f"NVML unresponsive since {_iso(since) if since else '?'}: {obj.get('call')} on "
                                 f"{where} did not return within {obj.get('waited_s')} s; sampler replaced",
                         attrs={"reason": "nvml-unresponsive", "call": obj.get("call"), "gpu_index": gpu_index,
                                "waited_s": obj.get("waited_s")}, **common)
        if kind == "recovered":
            return Event(ts=t, kind="recorder", severity=Severity.INFO,
                         message=f"NVML answers again after {obj.get('unresponsive_s')} s",
                         attrs={"reason": "nvml-recovered", "unresponsive_s": obj.get("unresponsive_s")}, **common)
        if kind in ("sampler-exited", "sampler-gave-up"):
            detail = f"exit status {obj.get('rc')}" if kind == "sampler-exited" else str(obj.get("reason", ""))
            return Event(ts=t, kind="recorder", severity=Severity.WARNING, message=f"NVML {kind}: {detail}",
                         attrs={"reason": kind}, **common)
        return None


PARSER = NvmlEventsParser()
