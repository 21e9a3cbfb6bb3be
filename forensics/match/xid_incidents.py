"""Xid bursts as incidents: related Xids of one GPU are one incident, grouped until 3 minutes of
silence (the grouping NVIDIA Fleet Intelligence describes), with its primary Xid and the rest as
its consequences, and whether the incident disrupted the job.

* **Primary**: the Xid an Xid 45 names (``caused by previous Xid 149``), else the first Xid of the
  burst whose catalogue bucket asks for an action (not IGNORE, not the follow-up buckets of 45 and
  154, not the 171/172 qualifiers of a 48), else the first.
* **Disrupts the job**: an Xid whose bucket is RESTART_APP or stronger (RESET_GPU, RESTART_BM,
  RESTART_VM, the ECC/NVLink workflows), a 43/45 that tore down a named process's channels, or an
  Xid 154 asking for a recovery action other than none.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Sequence

from forensics.events import Event
from forensics.findings import XidIncident
from forensics.lazy_re import lazy_compile
from forensics.match.xid_catalog import lookup

__all__ = ["GAP_NS", "xid_code", "xid_incidents"]

GAP_NS = 180 * 10**9
_FOLLOW_UP = {"IGNORE", "XID_154", "WORKFLOW_XID_45", ""}
_QUALIFIERS = {171, 172}
_DISRUPTIVE = {"RESTART_APP", "RESET_GPU", "RESTART_BM", "RESTART_VM", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR",
               "WORKFLOW_NVLINK5_ERR"}
_CAUSED_BY = lazy_compile(r"caused by previous Xid (\d+)", re.I)
_RECOVERY = lazy_compile(r"recovery action changed from \S+ \([^)]*\) to \S+ \(([^)]+)\)", re.I)


def xid_code(e: Event) -> int | None:
    v = e.attrs.get("xid")
    try:
        return int(str(v)) if v is not None else None
    except ValueError:
        return None


def _named_process(e: Event) -> bool:
    pid = e.attrs.get("pid")
    return pid not in (None, "", "<unknown>", "'<unknown>'")


def _primary(burst: Sequence[tuple[Event, int]]) -> int:
    for e, _ in burst:
        m = _CAUSED_BY.search(e.message)
        if m:
            return int(m.group(1))
    for _, code in burst:
        info = lookup(code)
        if code not in _QUALIFIERS and info is not None and info.immediate not in _FOLLOW_UP:
            return code
    return burst[0][1]


def _disruption(burst: Sequence[tuple[Event, int]]) -> str:
    for e, code in burst:
        info = lookup(code)
        if info is not None and info.immediate in _DISRUPTIVE:
            return f"Xid {code} asks to {info.immediate}"
        if code in (43, 45) and _named_process(e):
            return f"Xid {code} tore down the channels of {e.attrs.get('process') or 'pid ' + str(e.attrs.get('pid'))}"
        m = _RECOVERY.search(e.message) if code == 154 else None
        if m and m.group(1).strip().lower() != "none":
            return f"Xid 154 asks for {m.group(1)}"
    return ""


def xid_incidents(events: Sequence[Event]) -> list[XidIncident]:
    per_gpu: dict[tuple[str | None, str], list[tuple[Event, int]]] = defaultdict(list)
    for e in events:
        if e.kind != "xid":
            continue
        code = xid_code(e)
        if code is None:
            continue
        gpu = e.gpu or str(e.attrs.get("pci") or "?")
        per_gpu[(e.host, gpu)].append((e, code))
    out: list[XidIncident] = []
    for (host, gpu), items in per_gpu.items():
        items.sort(key=lambda x: (x[0].ts is None, x[0].ts or 0, x[0].origin.line))
        bursts: list[list[tuple[Event, int]]] = []
        for e, code in items:
            prev = bursts[-1][-1][0] if bursts else None
            if prev is not None and (e.ts is None or prev.ts is None or e.ts - prev.ts <= GAP_NS):
                bursts[-1].append((e, code))
            else:
                bursts.append([(e, code)])
        for burst in bursts:
            primary = _primary(burst)
            info = lookup(primary)
            rest = Counter(code for _, code in burst)
            rest[primary] -= 1
            why = _disruption(burst)
            stamps = [e.ts for e, _ in burst if e.ts is not None]
            out.append(XidIncident(
                gpu=gpu, host=host, first_ts=min(stamps) if stamps else None, last_ts=max(stamps) if stamps else None,
                primary=primary, primary_meaning=info.meaning if info else "not in the catalogue",
                bucket=info.immediate if info else "", investigatory=info.investigatory if info else "",
                consequences={c: n for c, n in sorted(rest.items()) if n > 0}, count=len(burst),
                disrupts_job=bool(why), why_disruptive=why, evidence=[e for e, _ in burst]))
    out.sort(key=lambda i: (i.first_ts is None, i.first_ts or 0))
    return out
