"""One fleet task: an input (a bundle, an archive, a log file or a folder of logs) analysed into plain rows.

The workers run :func:`analyze_one`; it returns dicts of str/int/float/None/lists only (never the
:class:`~forensics.analysis.Analysis`), so a result pickles small and the same function runs on a laptop's
local cluster or on a remote one. A failing input gives an input row with ``error`` set, never an exception.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any

from forensics.ingest.bundle import MANIFEST, read_manifest
from forensics.lazy_re import lazy_compile
from forensics.pci import normalize_pci

__all__ = ["Gpu", "analyze_one", "expand_paths", "gpu_table"]

#: what a bundle's host/ and nvml.jsonl say about one GPU
Gpu = dict[str, Any]  # host, index, pci, uuid, serial, name

_XML_CAP = 4 << 20
_GPU_OPEN = lazy_compile(r"<gpu id=\"([^\"<>]{1,64})\">")
_MAX_GPUS = 1024


def expand_paths(paths: Sequence[str]) -> list[str]:
    """The inputs ``paths`` stand for, one task each: a bundle is one; a folder holding bundles stands for
    its bundles (the folder's other files are not read); any other folder (a log set) or file is one."""
    out: list[str] = []
    for arg in paths:
        p = Path(arg)
        if not p.is_dir() or read_manifest(p) is not None:
            out.append(arg)
            continue
        found = list(_bundles_under(p))
        out += found or [arg]
    return out


#: Files only the recorder writes: a folder holding two of them is a bundle even when its manifest is gone.
_RECORDER_FILES = frozenset({"heartbeat", "nvml.jsonl", "nvml-events.jsonl", "stdout.idx", "stderr.idx"})


def _bundles_under(root: Path) -> Iterator[str]:
    """Bundle folders under ``root``; a folder whose ``manifest.json`` is not a manifest (a FIFO, a link
    to ``/dev/zero``, not JSON, a directory) or is missing while the recorder's other files are there is
    one too: it becomes an input, and its row says what was read or why it is broken."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        if MANIFEST in filenames or MANIFEST in dirnames or len(_RECORDER_FILES.intersection(filenames)) >= 2:
            dirnames[:] = []  # a bundle's own subfolders hold no other bundle
            yield dirpath


def _header(path: Path) -> dict[str, Any] | None:
    """The first line of ``nvml.jsonl`` (its header: host and the GPUs with index, bus id and UUID), read
    through the bounded reader (a regular file only: a FIFO there is never waited on)."""
    from forensics.ingest.reader import load_json, read_file

    try:
        line = read_file(path, 1 << 20, follow=False).data.split(b"\n", 1)[0]
    except OSError:
        return None
    data = load_json(line)
    return data if isinstance(data, dict) else None


def _smi_q(path: Path) -> list[Gpu]:
    """Serial, UUID and bus id of each ``<gpu>`` in ``nvidia-smi -q -x`` output (a regex read: the
    file is big, and only three fields matter here)."""
    from forensics.ingest.reader import read_file

    try:
        text = read_file(path, _XML_CAP, follow=False).data.decode("utf-8", "replace")
    except OSError:
        return []
    rows: list[Gpu] = []
    for bus, body in _gpu_blocks(text):
        row: Gpu = {"pci": normalize_pci(bus)}
        for tag in ("serial", "uuid", "product_name"):
            m = re.search(rf"<{tag}>([^<]*)</{tag}>", body)
            if m and m.group(1).strip() not in ("", "N/A"):
                row["name" if tag == "product_name" else tag] = m.group(1).strip()
        rows.append(row)
    return rows


def _gpu_blocks(text: str) -> Iterator[tuple[str, str]]:
    """(bus id, body) of each ``<gpu id="…">…</gpu>``, in one pass (a lazy ``.*?`` to ``</gpu>`` from
    every opening was quadratic on a file of openings without their end)."""
    pos = 0
    for _ in range(_MAX_GPUS):
        m = _GPU_OPEN.search(text, pos)
        if m is None:
            return
        end = text.find("</gpu>", m.end())
        if end < 0:
            return
        yield m.group(1), text[m.end():end]
        pos = end + 6


def gpu_table(path: str) -> list[Gpu]:
    """Every GPU the bundles behind ``path`` name, merged by (host, PCI address) from ``host/gpus.json``,
    ``host/nvidia-smi-q.xml`` and the ``nvml.jsonl`` header (archives: ``gpus.json`` only)."""
    from forensics.ingest.environment import read_bundle_facts

    merged: dict[tuple[str, str], Gpu] = {}

    def add(host: str, row: Gpu) -> None:
        pci = normalize_pci(row.get("pci")) if row.get("pci") else None
        if not pci:
            return
        cur = merged.setdefault((host, pci), {"host": host, "pci": pci, "index": None, "uuid": None,
                                             "serial": None, "name": None})
        for key in ("index", "uuid", "serial", "name"):
            value = row.get(key)
            if cur[key] is None and value not in (None, "", "N/A"):
                cur[key] = int(value) if key == "index" and str(value).isdigit() else value

    for facts in read_bundle_facts([path]):
        host = facts.host
        data = facts.json("gpus.json")
        for g in data.get("gpus", []) if isinstance(data, dict) else []:
            if isinstance(g, dict):
                add(host, g)
        base = Path(facts.where)
        if not base.is_dir():
            continue
        for g in _smi_q(base / "host" / "nvidia-smi-q.xml"):
            add(host, g)
        head = _header(base / "nvml.jsonl")
        for g in (head or {}).get("gpus", []) or []:
            if isinstance(g, dict):
                add(host, {"index": g.get("i"), "pci": g.get("pci"), "uuid": g.get("uuid"), "name": g.get("name")})
    return list(merged.values())


def _resolve(name: str, hosts: Sequence[str], gpus: Sequence[Gpu]) -> Gpu:
    """The GPU a finding names (a bus id, an index or a UUID), looked up among the bundle's GPUs of the
    finding's hosts; what cannot be looked up keeps what the name itself says."""
    mine = [g for g in gpus if not hosts or g["host"] in hosts] or list(gpus)
    text = name.strip()
    if text.isdigit() and len(text) <= 3:
        hit = [g for g in mine if g["index"] == int(text)]
        return dict(hit[0]) if len(hit) == 1 else {"index": int(text)}
    if text.upper().startswith(("GPU-", "MIG-")):
        hit = [g for g in mine if g["uuid"] == text]
        return dict(hit[0]) if hit else {"uuid": text}
    pci = normalize_pci(text)
    hit = [g for g in mine if pci and g["pci"] == pci]
    return dict(hit[0]) if len(hit) == 1 else {"pci": pci or text}


def _finding_rows(input_id: int, path: str, analysis: Any, gpus: Sequence[Gpu],
                  input_host: str | None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n, f in enumerate(analysis.findings):
        seen: set[tuple[Any, ...]] = set()
        targets = [_resolve(g, f.hosts, gpus) for g in f.gpus] or [{}]
        for gpu in targets:
            key = (gpu.get("host"), gpu.get("pci"), gpu.get("index"), gpu.get("uuid"))
            if key in seen:
                continue
            seen.add(key)
            host = gpu.get("host") or (f.hosts[0] if len(f.hosts) == 1 else input_host)
            rows.append({
                "input_id": input_id, "finding": n, "path": path, "host": host,
                "signature": f.signature, "title": f.title, "category": f.category, "role": str(f.role),
                "score": round(float(f.score), 4), "first_ns": f.first_seen, "last_ns": f.last_seen,
                "pci": gpu.get("pci"), "gpu_index": gpu.get("index"), "uuid": gpu.get("uuid"),
                "serial": gpu.get("serial"), "gpu_name": gpu.get("name"),
                "rank": f.ranks[0] if len(f.ranks) == 1 else None, "ranks": [int(r) for r in f.ranks],
                "matched": int(f.matched),
            })
    return rows


def _input_row(input_id: int, path: str) -> dict[str, Any]:
    return {"input_id": input_id, "path": path, "kind": None, "host": None, "start_ns": None, "end_ns": None,
            "exit_code": None, "verdict": None, "confidence": None, "summary": None, "findings": 0, "gpus": 0,
            "warnings": [], "error": None, "seconds": 0.0, "worker": f"{socket.gethostname()}:{os.getpid()}"}


#: Seconds one input may take before it is killed and becomes an error row (``--deadline``).
DEADLINE_S = 600.0


def analyze_one(input_id: int, path: str, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Analyse one input: ``{"input": row, "findings": [rows], "gpus": [rows]}``, plain values only.

    ``options``: ``signature_dirs`` (list of str), ``tz`` (an IANA name), ``deadline_s`` (default
    :data:`DEADLINE_S`; 0: none). The analysis runs in a forked child of the worker
    (:mod:`forensics.fleet.isolate`): an input that hangs is killed at its deadline, one that kills its
    process is reported, and either way the worker lives on. Any error, of the input or of the
    analyser, becomes the input row's ``error``."""
    from forensics.fleet.isolate import Died, TimedOut, run_isolated

    options = options or {}
    _warm(options)
    started = time.perf_counter()
    try:
        result = dict(run_isolated(_analyze_here, (input_id, path, options), options.get("deadline_s", DEADLINE_S)))
        result["input"]["worker"] = _input_row(input_id, path)["worker"]  # the worker, not its forked child
        return result
    except (TimedOut, Died) as exc:
        row = _input_row(input_id, path)
        row["error"] = f"{type(exc).__name__}: {exc}"[:500]
        row["seconds"] = round(time.perf_counter() - started, 4)
        return {"input": row, "findings": [], "gpus": []}


_WARM: set[tuple[str, ...]] = set()


def _warm(options: dict[str, Any]) -> None:
    """What every analysis needs, made once in the worker so that each forked child inherits it: the
    analyzer's modules, the signatures, every module-level pattern compiled; then the heap frozen, so
    that the children's garbage collection does not copy the parent's pages."""
    import gc

    dirs = tuple(str(d) for d in options.get("signature_dirs", []))
    if dirs in _WARM:
        return
    import forensics.analysis  # noqa: F401
    import forensics.parsers.registry  # noqa: F401
    from forensics import lazy_re, match

    with suppress(Exception):  # a bad signature directory: the child says so, in its row
        match.load_signatures([Path(d) for d in dirs])
    lazy_re.compile_all()
    gc.freeze()
    _WARM.add(dirs)


def _analyze_here(input_id: int, path: str, options: dict[str, Any]) -> dict[str, Any]:
    from forensics.analysis import Options, analyze

    row = _input_row(input_id, path)
    started = time.perf_counter()
    try:
        os.stat(path)  # a link loop or a dangling link: its own words (ELOOP), not "no such file"
        tz = None
        if options.get("tz"):
            from zoneinfo import ZoneInfo

            tz = ZoneInfo(str(options["tz"]))
        analysis = analyze([path], Options(signature_dirs=[Path(d) for d in options.get("signature_dirs", [])],
                                           tz=tz))
        gpus = gpu_table(path)
        manifests = analysis.recordings
        hosts = sorted({str(m["host"]) for m in manifests if m.get("host")}) or analysis.timeline.hosts
        span = analysis.timeline.span
        first = manifests[0] if manifests else {}
        row.update({
            "kind": "bundle" if manifests else "logs",
            "host": ",".join(hosts) if hosts else None,
            "start_ns": _iso_ns(first.get("start")) or (span[0] if span else None),
            "end_ns": _iso_ns(first.get("end")) or (span[1] if span else None),
            "exit_code": _int(first.get("exit_code")),
            "verdict": analysis.verdict.root_cause_id,
            "confidence": str(analysis.verdict.confidence),
            "summary": analysis.verdict.summary[:500] if analysis.verdict.summary else None,
            "findings": len(analysis.findings), "gpus": len(gpus),
            "warnings": [str(w)[:300] for w in analysis.warnings[:20]],
        })
        findings = _finding_rows(input_id, path, analysis, gpus, hosts[0] if len(hosts) == 1 else None)
        row["error"] = _unusable(path, analysis)
    except OSError as exc:
        row["error"] = f"{path}: {exc.strerror or exc}"[:500]
        findings, gpus = [], []
    except Exception as exc:  # one bad input must never stop a fleet run
        row["error"] = f"{type(exc).__name__}: {exc}"[:500]
        findings, gpus = [], []
    row["seconds"] = round(time.perf_counter() - started, 4)
    for g in gpus:
        g["input_id"] = input_id
    from forensics.fleet.store import clip_result

    return clip_result({"input": row, "findings": findings, "gpus": gpus})


def _unusable(path: str, analysis: Any) -> str | None:
    """Why an input could not be analysed although nothing raised: nothing in it was readable (the
    line ``analyze`` says), or a bundle folder whose manifest is not one."""
    from forensics.text_report import nothing_readable, readable

    if not readable(analysis):
        return nothing_readable(analysis)[:500]
    manifest = Path(path) / MANIFEST
    if os.path.lexists(manifest) and read_manifest(Path(path)) is None:
        from forensics.ingest.reader import describe_mode

        try:
            what = describe_mode(os.stat(manifest).st_mode)
        except OSError as exc:
            what = exc.strerror or str(exc)
        return f"{manifest}: not a bundle manifest ({what}); the folder was read as plain logs"[:500]
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _iso_ns(value: Any) -> int | None:
    """Nanoseconds since the epoch of a manifest's ISO time (``2026-11-29T17:55:12.825196Z``)."""
    from datetime import datetime

    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return int(stamp.timestamp() * 1_000_000) * 1000 if stamp.tzinfo else None
