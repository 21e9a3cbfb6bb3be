"""The fleet's tables in DuckDB, the Parquet export, and the summary computed with SQL.

Tables (times are UTC ``TIMESTAMP``):

- ``inputs``: one row per input: path, kind (bundle/logs), host, start/end, exit code, verdict,
  confidence, summary, counts, warnings, ``error`` (set when the input could not be analysed), seconds;
- ``findings``: one row per finding *per GPU it names* (``finding`` numbers the findings of one input,
  so ``count(DISTINCT (input_id, finding))`` counts findings): host, signature, role, score, first/last
  time, PCI bus id, GPU index, UUID, serial, rank(s), bundle path;
- ``gpus``: every GPU a bundle's ``host/`` snapshot or NVML header lists (an inventory, failing or not).

Rows arrive in batches from the workers and are loaded through newline-delimited JSON, which DuckDB
reads with the column types given here (no pandas type guessing).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["FleetStore", "summary_sections", "render_sections"]

_INPUTS = {
    "input_id": "INTEGER", "path": "VARCHAR", "kind": "VARCHAR", "host": "VARCHAR", "start_ns": "BIGINT",
    "end_ns": "BIGINT", "exit_code": "INTEGER", "verdict": "VARCHAR", "confidence": "VARCHAR",
    "summary": "VARCHAR", "findings": "INTEGER", "gpus": "INTEGER", "warnings": "VARCHAR[]", "error": "VARCHAR",
    "seconds": "DOUBLE", "worker": "VARCHAR",
}
_FINDINGS = {
    "input_id": "INTEGER", "finding": "INTEGER", "path": "VARCHAR", "host": "VARCHAR", "signature": "VARCHAR",
    "title": "VARCHAR", "category": "VARCHAR", "role": "VARCHAR", "score": "DOUBLE", "first_ns": "BIGINT",
    "last_ns": "BIGINT", "pci": "VARCHAR", "gpu_index": "INTEGER", "uuid": "VARCHAR", "serial": "VARCHAR",
    "gpu_name": "VARCHAR", "rank": "INTEGER", "ranks": "INTEGER[]", "matched": "INTEGER",
}
_GPUS = {"input_id": "INTEGER", "host": "VARCHAR", "pci": "VARCHAR", "index": "INTEGER", "uuid": "VARCHAR",
         "serial": "VARCHAR", "name": "VARCHAR"}
#: ns columns stored as TIMESTAMP under another name
_TIMES = {"start_ns": "start_time", "end_ns": "end_time", "first_ns": "first_time", "last_ns": "last_time"}


#: Field caps: what a row may hold, whatever an input says (a 100 MB host name made the insert fail and
#: ended the whole run). Text is cut, numbers out of their column's range are NULL, lists are cut.
MAX_TEXT = 4096
MAX_LIST = 1000
_RANGES = {"INTEGER": (-(1 << 31), (1 << 31) - 1), "BIGINT": (-(1 << 63), (1 << 63) - 1)}


def _clip(value: Any, kind: str) -> Any:
    """``value`` as a column of SQL type ``kind`` holds it, or None."""
    if value is None:
        return None
    if kind.endswith("[]"):
        if not isinstance(value, list | tuple):
            return None
        return [_clip(v, kind[:-2]) for v in list(value)[:MAX_LIST]]
    if kind == "VARCHAR":
        text = (value if isinstance(value, str) else str(value))[:MAX_TEXT]
        return text.encode("utf-8", "replace").decode("utf-8").replace("\x00", "")  # no lone surrogate, no NUL
    if kind in _RANGES:
        if isinstance(value, bool) or not isinstance(value, int):
            return None
        lo, hi = _RANGES[kind]
        return value if lo <= value <= hi else None
    if kind == "DOUBLE":
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            return None
        return number if math.isfinite(number) else None
    return value


def clip_row(row: dict[str, Any], columns: dict[str, str]) -> dict[str, Any]:
    """One row with only ``columns``, each value within its column's type and caps."""
    return {c: _clip(row.get(c), t) for c, t in columns.items()}


def clip_result(result: dict[str, Any]) -> dict[str, Any]:
    """A task's result (``input``, ``findings``, ``gpus``) within the tables' types and caps."""
    return {"input": clip_row(dict(result.get("input") or {}), _INPUTS),
            "findings": [clip_row(f, _FINDINGS) for f in list(result.get("findings") or [])[:MAX_LIST]],
            "gpus": [clip_row(g, _GPUS) for g in list(result.get("gpus") or [])[:MAX_LIST]]}


def _ddl(name: str, columns: dict[str, str]) -> str:
    cols = ", ".join(f'"{_TIMES.get(c, c)}" {"TIMESTAMP" if c in _TIMES else t}' for c, t in columns.items())
    return f"CREATE OR REPLACE TABLE {name} ({cols})"


def _select(columns: dict[str, str]) -> str:
    return ", ".join(f"make_timestamp({c} // 1000) AS {_TIMES[c]}" if c in _TIMES else f'"{c}"' for c in columns)


class FleetStore:
    """A DuckDB file (or ``:memory:``) holding the fleet's tables; :meth:`add` loads a batch of task results."""

    def __init__(self, path: str) -> None:
        import duckdb

        self.path = path
        try:
            self.con = duckdb.connect(path)
        except (duckdb.Error, OSError) as exc:
            from forensics.errors import UsageError

            raise UsageError(f"cannot open {path} as a DuckDB file: {exc}") from None
        for name, cols in (("inputs", _INPUTS), ("findings", _FINDINGS), ("gpus", _GPUS)):
            self.con.execute(_ddl(name, cols))

    def add(self, results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """Load a batch of task results (validated first); a result DuckDB still refuses is stored as an
        input row with the reason (and without its findings), never lost with its batch. Returns the
        results as stored."""
        import duckdb

        clipped = [clip_result(r) for r in results]
        try:
            self._load_batch(clipped)
            return clipped
        except (duckdb.Error, OSError, ValueError):
            pass
        stored = []
        for r in clipped:  # one by one: only the refused result is reduced to its error
            try:
                self._load_batch([r])
            except (duckdb.Error, OSError, ValueError) as exc:
                row = dict(r["input"], error=f"could not be stored: {type(exc).__name__}: {exc}"[:500])
                r = {"input": clip_row({**row, "warnings": [], "summary": None}, _INPUTS), "findings": [],
                     "gpus": []}
                self._load_batch([r])
            stored.append(r)
        return stored

    def _load_batch(self, results: Sequence[dict[str, Any]]) -> None:
        self.con.execute("BEGIN TRANSACTION")
        try:
            self._load("inputs", _INPUTS, [r["input"] for r in results])
            self._load("findings", _FINDINGS, [f for r in results for f in r["findings"]])
            self._load("gpus", _GPUS, [g for r in results for g in r["gpus"]])
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        self.con.execute("COMMIT")

    def _load(self, table: str, columns: dict[str, str], rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        fd, name = tempfile.mkstemp(suffix=".jsonl", prefix="forensics-fleet-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps({c: row.get(c) for c in columns}, ensure_ascii=False) + "\n")
            spec = "{" + ", ".join(f"{c!r}: {t!r}" for c, t in columns.items()) + "}"
            self.con.execute(f"INSERT INTO {table} SELECT {_select(columns)} FROM "
                             f"read_json(?, format='newline_delimited', columns={spec})", [name])
        finally:
            os.unlink(name)

    def to_parquet(self, folder: str) -> list[str]:
        out = Path(folder)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            from forensics.errors import UsageError

            raise UsageError(f"cannot create {folder}: {exc.strerror or exc}") from None
        written = []
        for table in ("inputs", "findings", "gpus"):
            target = out / f"{table}.parquet"
            self.con.execute(f"COPY {table} TO '{_sql_string(str(target))}' (FORMAT parquet)")
            written.append(str(target))
        return written

    def close(self) -> None:
        self.con.close()


def _sql_string(text: str) -> str:
    return text.replace("'", "''")


#: a GPU as one key: its serial, else its UUID, else host and bus id
GPU_KEY = ("coalesce('serial ' || serial, uuid, host || ' ' || pci, host || ' GPU ' || gpu_index::VARCHAR)")

_FAILURES = f"""
WITH root AS (
    SELECT i.verdict AS signature, i.input_id, i.host, i.start_time,
           f.serial, f.uuid, f.pci, f.gpu_index, f.host AS fhost
    FROM inputs i LEFT JOIN findings f ON f.input_id = i.input_id AND f.role IN ('root-cause', 'consequence')
    WHERE i.verdict IS NOT NULL
), gpu AS (
    SELECT signature, {GPU_KEY.replace('host ||', 'fhost ||')} AS gpu, input_id, start_time FROM root
), repeat AS (
    SELECT signature, gpu, count(DISTINCT input_id) AS n,
           date_diff('day', min(start_time), max(start_time)) + 1 AS days
    FROM gpu WHERE gpu IS NOT NULL GROUP BY ALL
), worst AS (
    SELECT signature, arg_max(gpu, n) AS gpu, max(n) AS n, arg_max(days, n) AS days
    FROM repeat GROUP BY signature
)
SELECT r.signature, count(DISTINCT r.input_id) AS inputs, count(DISTINCT r.host) AS nodes,
       count(DISTINCT g.gpu) AS gpus, strftime(min(r.start_time), '%Y-%m-%d') AS first_day,
       strftime(max(r.start_time), '%Y-%m-%d') AS last_day,
       CASE WHEN any_value(w.n) >= 2 THEN any_value(w.gpu) || ' ' || any_value(w.n) || ' times in '
            || any_value(w.days) || ' day' || CASE WHEN any_value(w.days) = 1 THEN '' ELSE 's' END END AS repeated,
       string_agg(DISTINCT r.host, ', ' ORDER BY r.host) AS hosts
FROM root r LEFT JOIN gpu g ON g.input_id = r.input_id AND g.signature = r.signature
     LEFT JOIN worst w ON w.signature = r.signature
GROUP BY r.signature ORDER BY inputs DESC, r.signature
"""

_REPEATED_GPUS = f"""
SELECT {GPU_KEY} AS gpu, string_agg(DISTINCT host, ', ') AS hosts, string_agg(DISTINCT pci, ', ') AS pci,
       any_value(uuid) AS uuid, count(DISTINCT input_id) AS inputs,
       string_agg(DISTINCT signature, ', ' ORDER BY signature) AS signatures,
       strftime(min(first_time), '%Y-%m-%d') AS first_day, strftime(max(first_time), '%Y-%m-%d') AS last_day,
       bool_or(category IN ('hardware', 'driver')) AS hardware
FROM findings
WHERE role IN ('root-cause', 'consequence') AND (serial IS NOT NULL OR uuid IS NOT NULL OR pci IS NOT NULL)
GROUP BY 1 HAVING count(DISTINCT input_id) >= 2
ORDER BY hardware DESC, inputs DESC, gpu
"""

_PER_DAY = """
WITH d AS (
    SELECT strftime(start_time, '%Y-%m-%d') AS day, verdict, error FROM inputs
), c AS (
    SELECT day, verdict, count(*) AS n FROM d WHERE verdict IS NOT NULL GROUP BY ALL
)
SELECT d.day, count(*) AS inputs, count(d.verdict) AS failed, count(d.error) AS errors,
       (SELECT string_agg(c.verdict || ' ' || c.n, ', ' ORDER BY c.n DESC, c.verdict) FROM c WHERE c.day = d.day)
         AS mix
FROM d GROUP BY d.day ORDER BY d.day NULLS LAST
"""

_ERRORS = "SELECT path, error FROM inputs WHERE error IS NOT NULL ORDER BY input_id LIMIT 10"


def summary_sections(con: Any, limit: int = 15) -> list[tuple[str, list[str], list[tuple[Any, ...]]]]:
    """(title, column names, rows) for each part of the summary, each computed with SQL over the tables."""
    out: list[tuple[str, list[str], list[tuple[Any, ...]]]] = []
    for title, sql in (("Failures: which nodes share the same root cause", _FAILURES),
                       ("GPUs that keep coming back (root cause or consequence in 2+ inputs; "
                        "hardware and driver findings first)", _REPEATED_GPUS),
                       ("Failure mix per day", _PER_DAY),
                       ("Inputs that could not be analysed", _ERRORS)):
        cur = con.execute(sql)
        names = [d[0] for d in cur.description]
        rows = cur.fetchall()
        if title.startswith("GPUs"):
            names, rows = names[:-1], [r[:-1] for r in rows]
        out.append((title, names, rows[:limit] if limit else rows))
    return out


def headline(con: Any) -> list[str]:
    """One sentence per root cause: ``xid-79 on 3 GPUs of 2 nodes in 4 inputs; serial … 2 times in 5 days``."""
    lines = []
    for sig, inputs, nodes, gpus, _first, _last, repeated, _hosts in con.execute(_FAILURES).fetchall():
        text = f"{sig} in {inputs} input{'s' if inputs != 1 else ''}"
        if gpus:
            text += f" on {gpus} GPU{'s' if gpus != 1 else ''} of {nodes} node{'s' if nodes != 1 else ''}"
        elif nodes:
            text += f" on {nodes} node{'s' if nodes != 1 else ''}"
        if repeated:
            text += f"; {repeated}"
        lines.append(text)
    return lines


def render_sections(sections: Sequence[tuple[str, list[str], list[tuple[Any, ...]]]], width: int = 60) -> str:
    """Plain aligned text tables (cells cut at ``width`` characters); empty sections say so."""
    parts: list[str] = []
    for title, names, rows in sections:
        parts.append(title)
        if not rows:
            parts.append("  (none)\n")
            continue
        cells = [[_cell(v, width) for v in r] for r in rows]
        widths = [max(len(n), *(len(c[i]) for c in cells)) for i, n in enumerate(names)]
        parts.append("  " + "  ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)).rstrip())
        for c in cells:
            parts.append("  " + "  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())
        parts.append("")
    return "\n".join(parts)


def _cell(value: Any, width: int) -> str:
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"
