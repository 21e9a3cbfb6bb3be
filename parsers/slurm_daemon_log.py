"""Slurm's daemon log files: ``slurmd.log``, ``slurmctld.log`` (and ``slurmdbd.log``).

Each line is ``[2024-02-20T16:06:16.269] message`` (``LogTimeFormat=iso8601_ms``, the default;
``iso8601`` drops the milliseconds, ``rfc5424`` adds the zone); ``slurmstepd``'s lines in
``slurmd.log`` carry the step first (``[50.batch] done with job``). The messages are read by
:func:`forensics.parsers.producers.slurm.parse_daemon`: a step launched on this node, a batch job started,
a step done, the controller allocating nodes or completing a job, and errors. The rest (plugin
chatter, debug lines) stays in the file. The stamps are the node's local wall clock (placed with
``--tz`` or a bundle's zone when known, else marked ``local``).

A daemon log names no host on its lines (``slurmd-node07:`` when slurmd names itself is the
exception): the host is the bundle's, or none.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.producers.slurm import parse_daemon, severity

from forensics.clock import parse_iso
from forensics.events import Event, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_LINE = lazy_compile(r"^\[(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)\] (?P<msg>.*)$")
#: Words that only Slurm's daemons write (a bracketed ISO stamp alone is any program's log).
_SLURM_WORDS = lazy_compile(r"JobId=|StepId=|\bslurm(?:d|ctld|stepd|dbd)\b|_slurm_rpc_|\bsched: |\[\d+(?:_\d+)?\."
                            r"(?:batch|extern|\d+)\] |launch task |Launching batch |task/(?:cgroup|affinity)|"
                            r"select/cons_t?res|\bgres/gpu\b|backfill: |\bprolog\b|\bepilog\b|Node \S+ now responding|"
                            r"error: Nodes? \S+ not responding|_job_complete|job_epilog_complete")
#: Lines worth decoding in a big log (everything a record or an error can hold).
_LITERALS = (b"JobId=", b"StepId=", b"launch task", b"Launching batch", b"done with", b"error:", b"fatal:")


class SlurmDaemonLogParser:
    name = "slurm-daemon-log"
    samples = (
        # Real: slurmctld.log of a university cluster (ariqRam/SlurmLogReader, extracted_log)
        "[2022-06-01T10:53:15.257] sched: _slurm_rpc_allocate_resources JobId=42822 NodeList=(null) usec=54752\n"
        "[2022-06-01T10:53:15.868] sched: Allocate JobId=42822 NodeList=cpu03 #CPUs=1 Partition=cpu-opteron\n"
        "[2022-06-01T10:54:26.160] _job_complete: JobId=42822 WEXITSTATUS 0\n"
        "[2022-06-01T10:54:26.161] _job_complete: JobId=42822 done\n",
    )

    def detect(self, head: list[str]) -> float:
        lines = [h.strip() for h in head[:40] if h.strip()]
        if not lines:
            return 0.0
        stamped = [m.group("msg") for h in lines if (m := _LINE.match(h))]
        if len(stamped) < max(1, len(lines) // 2):
            return 0.0
        slurmish = sum(1 for msg in stamped if _SLURM_WORDS.search(msg))
        if slurmish == 0:
            return 0.0
        return 0.9 if slurmish >= max(1, len(stamped) // 4) else 0.6

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        for line in doc.candidate_lines(_LITERALS):
            m = _LINE.match(line.text.strip())
            if not m:
                continue
            parsed = parse_daemon(m.group("msg"))
            if parsed is None:
                continue
            attrs, error = parsed
            placed = parse_iso(m.group("stamp"), ctx.tz)
            ts, source = placed if placed is not None else (None, TsSource.NONE)
            yield Event(ts=ts, ts_source=source, source=ctx.source, kind="slurm", message=m.group("msg").strip(),
                        origin=ctx.origin(line), severity=severity(attrs, error),
                        host=ctx.host or attrs.get("node"), attrs=attrs)


PARSER = SlurmDaemonLogParser()
