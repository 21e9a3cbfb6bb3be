"""``manifest.json`` of a recorder bundle (docs/bundle-format.md).

One ``recording`` event (status, exit code or signal, command, start/end, bundle path),
one ``exit`` event for the child's end, and ``recorder`` events for what the recorder
could not do: a manifest still saying ``running`` means the recorder died without
closing the bundle (host crash, power cut, SIGKILL) — the event is placed at the last
heartbeat and the recording is reported as ``interrupted`` — unless its heartbeat is fresh and its
recorder still there (``forensics/ingest/live_state.py``): then the run is still going, reported as
``running`` with what it holds so far; sources marked unavailable
(no GPU, no kernel log) and the recorder's own errors are listed too.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from typing import Any

from forensics.parsers.common.base import ParseContext, Record, whole_text

from forensics.events import Event, Origin, Severity, TsSource
from forensics.ingest.live_state import recording_state
from forensics.ingest.reader import loads_bounded
from forensics.ingest.textdoc import TextDocument

_MARKERS = ('"format": "gpu-forensics-bundle"', '"format":"gpu-forensics-bundle"',
            # the marker the recorder writes when recording degrades (record/degrade.py)
            '"format": "gpu-forensics-degraded"', '"format":"gpu-forensics-degraded"')
_QUIET = ("ok", "starting")

_FINISHED = """{
  "format": "gpu-forensics-bundle",
  "version": 1,
  "status": "finished",
  "host": "gpu-node-07",
  "command": ["torchrun", "--nproc-per-node", "8", "train.py", "--hf-token", "[REDACTED]"],
  "start": "2025-03-02T10:00:00.000000Z",
  "start_ns": 1740909600000000000,
  "end": "2025-03-02T10:42:13.500000Z",
  "end_ns": 1740912133500000000,
  "exit_code": 1,
  "signal": null,
  "signal_name": null,
  "boot_time_ns": 1740800000000000000,
  "tz_name": "Europe/Berlin",
  "sources": {
    "nvml": {"status": "ok", "gpus": 8},
    "kernel_log": {"status": "unavailable", "reason": "/dev/kmsg: Permission denied; journalctl: not installed"}
  },
  "heartbeat": "2025-03-02T10:42:14.000000Z",
  "heartbeat_ns": 1740912134000000000
}
"""

_DIED = """{
  "format": "gpu-forensics-bundle",
  "version": 1,
  "status": "running",
  "host": "gpu-node-03",
  "command": ["python", "train.py"],
  "start": "2025-03-02T10:00:00.000000Z",
  "start_ns": 1740909600000000000,
  "end": null,
  "end_ns": null,
  "exit_code": null,
  "signal": null,
  "sources": {"nvml": {"status": "ok", "gpus": 8}},
  "heartbeat": "2025-03-02T13:17:41.250000Z",
  "heartbeat_ns": 1740921461250000000
}
"""


#: A manifest's text fields are short; a longer one (a 100 MB host name) is cut here.
_TEXT_CAP = 4096


def _text(value: Any) -> str | None:
    """A manifest field the recorder writes as a string: that string (cut), else None (a number, a
    list, a 900-deep structure is not carried into the event)."""
    return value[:_TEXT_CAP] if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _line_of(doc: TextDocument, key: str) -> tuple[int, int]:
    for line in doc.candidate_lines([f'"{key}"'.encode()]):
        return line.no, line.offset
    return 1, 0


class BundleManifestParser:
    name = "bundle-manifest"
    #: producer versions its real samples hold (the recorded samples' manifest.json)
    tested_with = {"gpu-forensics recorder": ("0.1.0",)}
    samples = (_FINISHED, _DIED)

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:20])
        return 1.0 if any(m in text for m in _MARKERS) else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        raw = whole_text(doc, ctx)
        if raw is None:
            return
        try:
            data = loads_bounded(raw)
        except (ValueError, RecursionError) as exc:
            ctx.warn(f"manifest is not valid JSON ({exc})")
            return
        if not isinstance(data, dict):
            ctx.warn("manifest is not a JSON object")
            return
        if data.get("format") == "gpu-forensics-degraded":
            yield from _degraded(data, doc, ctx, ctx.host)
            return
        host = _text(data.get("host")) or ctx.host
        start = _int(data.get("start_ns"))
        end = _int(data.get("end_ns"))
        heartbeat = _int(data.get("heartbeat_ns"))
        manifest_status = _text(data.get("status")) or "unknown"
        live = recording_state(data)  # "running": still being recorded, or the recorder died
        still = live is not None and live.live
        status = ("running" if still else "interrupted") if manifest_status == "running" else manifest_status
        command: list[Any] = data["command"] if isinstance(data.get("command"), list) else []
        cmd = shlex.join(_text(c) or "" for c in command[:1000])[:_TEXT_CAP]
        exit_code, sig = _int(data.get("exit_code")), _int(data.get("signal"))
        sig_name = _text(data.get("signal_name")) or (f"signal {sig}" if sig is not None else None)
        bundle_path = ctx.path.rsplit("/", 1)[0] if "/" in ctx.path else "."
        nlines = doc.line_count()

        if still and live is not None:
            outcome = f"still being recorded ({live.why}, since {data.get('start')})"
        elif manifest_status == "running":
            outcome = "the recorder stopped without closing the bundle"
        elif sig is not None:
            outcome = f"killed by {sig_name}"
        elif exit_code is not None:
            outcome = f"exit status {exit_code}"
        else:
            outcome = manifest_status
        yield Event(
            ts=start, ts_source=TsSource.EXACT if start else TsSource.NONE, source=ctx.source, kind="recording",
            message=f"recorded `{cmd}` on {host}: {status}, {outcome}", origin=Origin(ctx.path, 1, 0, nlines),
            severity=Severity.INFO, host=host,
            attrs={"status": status, "manifest_status": manifest_status, "exit_code": exit_code, "signal": sig,
                   "signal_name": _text(data.get("signal_name")), "command": cmd, "start": _text(data.get("start")),
                   "end": _text(data.get("end")), "path": bundle_path, "host": host,
                   "heartbeat": _text(data.get("heartbeat")), "child_pid": _int(data.get("child_pid")),
                   **({"live": True, "heartbeat_age_s": live.heartbeat_age_s} if still and live is not None else {})},
        )
        if exit_code is not None or sig is not None:
            no, off = _line_of(doc, "exit_code")
            failed = bool(exit_code) or sig is not None
            what = f"killed by {sig_name}" if sig is not None else f"exited with status {exit_code}"
            yield Event(
                ts=end, ts_source=TsSource.EXACT if end else TsSource.NONE, source=ctx.source, kind="exit",
                message=f"the recorded command {what}", origin=Origin(ctx.path, no, off),
                severity=Severity.ERROR if failed else Severity.INFO, host=host,
                attrs={"exit_code": exit_code, "signal": sig, "signal_name": _text(data.get("signal_name"))},
            )
        if manifest_status == "running" and not still:
            no, off = _line_of(doc, "heartbeat_ns")
            ts = heartbeat or start
            yield Event(
                ts=ts, ts_source=TsSource.EXACT if ts else TsSource.NONE, source=ctx.source, kind="recorder",
                message="the recorder stopped without closing the bundle; last heartbeat "
                        f"{_text(data.get('heartbeat'))} (host crash, power loss or the recorder was killed)",
                origin=Origin(ctx.path, no, off), severity=Severity.WARNING, host=host,
                attrs={"reason": "recorder-died", "heartbeat": _text(data.get("heartbeat"))},
            )
        sources: dict[str, Any] = data["sources"] if isinstance(data.get("sources"), dict) else {}
        for name, info in sources.items():
            if not isinstance(info, dict) or info.get("status") in _QUIET:
                continue
            no, off = _line_of(doc, name)
            st = str(info.get("status"))
            reason = str(info.get("reason", ""))
            yield Event(
                ts=start, ts_source=TsSource.EXACT if start else TsSource.NONE, source=ctx.source, kind="recorder",
                message=f"recorder source {name} {st}" + (f": {reason}" if reason else ""),
                origin=Origin(ctx.path, no, off),
                severity=Severity.INFO if st in ("unavailable", "not-ready") else Severity.WARNING, host=host,
                attrs={"reason": f"source-{st}", "recorder_source": name, "detail": reason},
            )
        yield from _degraded(data, doc, ctx, host)
        errors = data.get("recorder_errors")
        for err in (errors if isinstance(errors, list) else [])[:100]:
            err = _text(err) or str(err)[:500]
            no, off = _line_of(doc, "recorder_errors")
            yield Event(ts=start, ts_source=TsSource.EXACT if start else TsSource.NONE, source=ctx.source,
                        kind="recorder", message=f"recorder error: {err}", origin=Origin(ctx.path, no, off),
                        severity=Severity.WARNING, host=host, attrs={"reason": "recorder-error"})


def _degraded(data: dict[str, Any], doc: TextDocument, ctx: ParseContext, host: str | None) -> Iterator[Record]:
    """A ``recorder`` event (and a warning) per file that stopped being recorded, from the
    manifest's ``degraded`` list or from the marker written when the manifest could not be."""
    items = data.get("degraded")
    if not isinstance(items, list):
        return
    no, off = _line_of(doc, "degraded")
    for item in items[:100]:
        if not isinstance(item, dict):
            continue
        what, error, since = _text(item.get("file")), _text(item.get("error")), _text(item.get("since"))
        offset = _int(item.get("offset"))
        after = f" after byte {offset:,}" if offset is not None else ""
        message = f"recording degraded: {what}: {error} from {since}; the output{after} was not recorded"
        ctx.warn(message)
        ts = _int(item.get("since_ns"))
        yield Event(ts=ts, ts_source=TsSource.EXACT if ts else TsSource.NONE, source=ctx.source, kind="recorder",
                    message=message, origin=Origin(ctx.path, no, off), severity=Severity.WARNING, host=host,
                    attrs={"reason": "recording-degraded", "recorder_source": what, "detail": error,
                           "offset": offset})


PARSER = BundleManifestParser()
