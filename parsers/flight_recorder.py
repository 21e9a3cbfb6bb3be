"""PyTorch NCCL flight-recorder dumps in their JSON form (one file per rank).

Shape (``torch/csrc/distributed/c10d/FlightRecorder*``; field names as read by
``torch/distributed/flight_recorder``)::

    {"version": "2.5",
     "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
     "pg_status": {"0": {"last_enqueued_collective": 2, "last_started_collective": -1,
                         "last_completed_collective": 2}},
     "entries": [{"record_id": 0, "pg_id": 0, "process_group": ["0", "default_pg"],
                  "collective_seq_id": 1, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce",
                  "time_created_ns": 1724779239936775119, "input_sizes": [[3, 4]],
                  "output_sizes": [[3, 4]], "state": "completed", "timeout_ms": 600000, ...}]}

The default on-timeout dumps are pickles (protocol 2, the same dict). Unpickling
untrusted data runs code, so they are never unpickled: :func:`pickle_to_json` reads
their plain data with :mod:`forensics.ingest.safe_pickle` (refusing any pickle that
names objects) and writes it as JSON text, one entry per line, which this parser then
reads like a JSON dump (``forensics.analysis.parse_input`` calls it for pickles, as
``forensics.ingest.sources`` does for ``.evtx``); origins point at lines of that text.

Events (kind ``c10d``, attrs ``flight_recorder = True``): one per process group with
the rank's ``last_enqueued``/``last_started``/``last_completed`` collective, and one
per collective that had not completed (``seq``, ``op_type``, ``numel_in``,
``numel_out``, ``state``, ``timeout_ms``) — what the cross-rank comparison reads.
The rank comes from the dump's ``rank`` field or the file name's trailing number
(``nccl_trace_rank_3``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from forensics.parsers.common.base import ParseContext, Record, whole_text

from forensics.events import Event, Origin, Severity, TsSource
from forensics.ingest.reader import loads_bounded
from forensics.ingest.safe_pickle import PickleError, load_plain, plain_nodes
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile
from forensics.values import as_int as _int

__all__ = ["PARSER", "pickle_to_json"]

MAX_PENDING_PER_PG = 20
_TRAILING_NUMBER = lazy_compile(r"(?<!\d)(\d+)(?:\.json)?$")


def _numel(sizes: Any) -> int | None:
    """Total elements of a list of tensor shapes (``[[3, 4], [5]]`` → 17)."""
    if not isinstance(sizes, list | tuple):
        return None
    total = 0
    for shape in sizes:
        if not isinstance(shape, list | tuple) or not all(isinstance(d, int) for d in shape):
            return None
        total += math.prod(shape)
    return total


def _pg_of(entry: dict[str, Any]) -> str | None:
    pg = entry.get("process_group")
    if isinstance(pg, list | tuple) and pg:
        return str(pg[0])
    pg_id = entry.get("pg_id")
    return None if pg_id is None else str(pg_id)


class FlightRecorderParser:
    name = "flight-recorder"
    #: producer versions its real samples hold (the recorded samples' dumps (their README))
    tested_with = {"PyTorch": ("2.11.0+cu130",)}
    samples = (
        '{"version": "2.5", "rank": 1,\n'
        ' "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},\n'
        ' "pg_status": {"0": {"last_enqueued_collective": 7, "last_started_collective": 7,'
        ' "last_completed_collective": 6}},\n'
        ' "entries": [\n'
        '  {"record_id": 5, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 6,'
        ' "p2p_seq_id": 0, "op_id": 6, "profiling_name": "nccl:all_reduce", "time_created_ns": 1724779239936775119,'
        ' "input_sizes": [[3, 4]], "input_dtypes": ["Float"], "output_sizes": [[3, 4]], "output_dtypes": ["Float"],'
        ' "state": "completed", "time_discovered_started_ns": null,'
        ' "time_discovered_completed_ns": 1724779239975811724, "retired": true, "timeout_ms": 600000,'
        ' "is_p2p": false},\n'
        '  {"record_id": 6, "pg_id": 0, "process_group": ["0", "default_pg"], "collective_seq_id": 7,'
        ' "p2p_seq_id": 0, "op_id": 7, "profiling_name": "nccl:all_reduce", "time_created_ns": 1724779240936775119,'
        ' "input_sizes": [[3, 4]], "input_dtypes": ["Float"], "output_sizes": [[3, 4]], "output_dtypes": ["Float"],'
        ' "state": "started", "time_discovered_started_ns": 1724779240937000000,'
        ' "time_discovered_completed_ns": null, "retired": false, "timeout_ms": 600000, "is_p2p": false}\n'
        ' ]}\n',
    )

    def detect(self, head: list[str]) -> float:
        if not head or not head[0].lstrip().startswith("{"):
            return 0.0
        text = "\n".join(head)
        if '"pg_config"' in text and ('"entries"' in text or '"pg_status"' in text):
            return 0.95
        if '"collective_seq_id"' in text and '"profiling_name"' in text:
            return 0.9
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        raw = whole_text(doc, ctx)
        if raw is None:
            return
        try:
            data = loads_bounded(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            ctx.warn("not a flight-recorder JSON dump (JSON did not parse)")
            return
        if not isinstance(data, dict):
            ctx.warn("not a flight-recorder JSON dump (no top-level object)")
            return
        rank = _int(data.get("rank"))
        if rank is None:
            m = _TRAILING_NUMBER.search(ctx.path.rsplit("/", 1)[-1])
            rank = int(m.group(1)) if m else None
        if rank is None:
            ctx.warn("flight-recorder dump without a rank (neither a 'rank' field nor a number in the file name)")
        status: dict[str, dict[str, int | None]] = {}
        raw_status = data.get("pg_status")
        if isinstance(raw_status, dict):
            for pg, st in raw_status.items():
                if isinstance(st, dict):
                    status[str(pg)] = {k: _int(st.get(f"{k}_collective")) for k in
                                       ("last_enqueued", "last_started", "last_completed")}
        sizes = _world_sizes(data.get("pg_config"))
        for pg, st in status.items():
            parts = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in st.items() if v is not None)
            yield self._event(ctx, doc, None, f"[flight recorder] rank {rank} PG {pg}: {parts or 'no collectives'}",
                              rank, {"pg": pg, **st, "world_size": sizes.get(pg)}, None)
        entries = data.get("entries")
        if not isinstance(entries, list):
            return
        pending: dict[str, int] = {}
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("is_p2p") or str(entry.get("state")) == "completed":
                continue
            pg = _pg_of(entry)
            key = pg or ""
            if pending.get(key, 0) >= MAX_PENDING_PER_PG:
                continue
            pending[key] = pending.get(key, 0) + 1
            op = str(entry.get("profiling_name") or "").removeprefix("nccl:") or None
            seq = _int(entry.get("collective_seq_id"))
            numel = _numel(entry.get("input_sizes"))
            state = str(entry.get("state") or "unknown")
            attrs: dict[str, Any] = {"pg": pg, "seq": seq, "op_type": op, "numel_in": numel,
                                     "numel_out": _numel(entry.get("output_sizes")), "state": state,
                                     "timeout_ms": _int(entry.get("timeout_ms")),
                                     "record_id": _int(entry.get("record_id"))}
            attrs.update(status.get(pg or "", {}))
            size = f" ({numel:,} elements)" if numel is not None else ""
            message = f"[flight recorder] rank {rank} PG {pg}: {op} SeqNum {seq}{size} {state}, not completed"
            yield self._event(ctx, doc, _int(entry.get("time_created_ns")), message, rank, attrs,
                              _int(entry.get("record_id")))

    def _event(self, ctx: ParseContext, doc: TextDocument, ts: int | None, message: str, rank: int | None,
               attrs: dict[str, Any], record_id: int | None) -> Event:
        origin = Origin(ctx.path, 1)
        if record_id is not None:
            at = doc.data.find(f'"record_id": {record_id},'.encode())
            if at >= 0:
                line = doc.line_at(at)
                origin = Origin(ctx.path, line.no, line.offset)
        return Event(ts=ts, ts_source=TsSource.EXACT if ts is not None else TsSource.NONE, source=ctx.source,
                     kind="c10d", message=message, origin=origin, severity=Severity.INFO,
                     host=ctx.host, rank=rank, attrs={"flight_recorder": True, **attrs})


def _world_sizes(config: Any) -> dict[str, int]:
    """Members per process group, from ``pg_config`` (``"ranks": "[0, 1]"``)."""
    out: dict[str, int] = {}
    if not isinstance(config, dict):
        return out
    for pg, cfg in config.items():
        ranks = cfg.get("ranks") if isinstance(cfg, dict) else None
        if isinstance(ranks, str):
            out[str(pg)] = len(re.findall(r"\d+", ranks))
        elif isinstance(ranks, list):
            out[str(pg)] = len(ranks)
    return out


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"{type(value).__name__} is not plain data")


def _json_keys(value: Any) -> Any:
    """JSON object keys are strings: a tuple or bytes key becomes its text."""
    if isinstance(value, dict):
        return {(k if isinstance(k, str | int | float | bool) or k is None else
                 k.decode("utf-8", "replace") if isinstance(k, bytes) else str(k)): _json_keys(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_keys(v) for v in value]
    return value


def _entry_line(entry: Any) -> str:
    """One entry on one line, its Python stack last (the fields people read come first)."""
    if isinstance(entry, dict) and "frames" in entry:
        entry = {**{k: v for k, v in entry.items() if k != "frames"}, "frames": entry["frames"]}
    return json.dumps(_json_keys(entry), default=_json_default, ensure_ascii=False)


def pickle_to_json(raw: bytes) -> tuple[bytes, list[str]]:
    """A pickled flight-recorder dump as JSON text (top-level fields first, then one entry
    per line), read without unpickling; ``b""`` and the reason when it is not one."""
    try:
        data = load_plain(raw)
        plain_nodes(data)
    except PickleError as exc:
        return b"", [f"pickle not read: {exc}"]
    if not isinstance(data, dict) or not ({"pg_config", "entries"} & set(data)):
        return b"", ["a pickle, but not a flight-recorder dump (no pg_config or entries); skipped"]
    try:
        head = [f"{json.dumps(str(k))}: {json.dumps(_json_keys(v), default=_json_default, ensure_ascii=False)}"
                for k, v in data.items() if k != "entries"]
        entries = data.get("entries")
        lines = ["{", *(h + "," for h in head)]
        if isinstance(entries, list | tuple):
            body = [_entry_line(e) for e in entries]
            lines += ['"entries": [', *(b + "," for b in body[:-1]), *body[-1:], "]}"]
        else:
            lines += [f'"entries": {json.dumps(_json_keys(entries), default=_json_default)}', "}"]
    except (TypeError, ValueError, RecursionError) as exc:
        return b"", [f"pickle not read: {exc}"]
    return ("\n".join(lines) + "\n").encode(), []


PARSER = FlightRecorderParser()
