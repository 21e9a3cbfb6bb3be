"""Slurm and shell lines in a job's output (catalog §1.11) → ``slurm`` events.

``slurmstepd`` (optionally ``slurmstepd-<node>``) reports cancellations, cgroup OOM kills and
memory-limit kills; ``srun`` reports tasks that died. The cancellation line carries the only
absolute time a Slurm ``.out`` file has. Shell job-control lines (``Killed``, ``Segmentation
fault (core dumped)``) are read here too: they name the signal that ended a process.
"""

from __future__ import annotations

import re
from typing import Any

from forensics.parsers.py_traceback import FATAL_SIGNALS
from forensics.parsers.stream_text import Stamp

__all__ = ["parse_shell_signal", "parse_slurm"]

_STEPD = re.compile(r"^slurmstepd(?:-(?P<node>[\w.-]+))?: (?:(?P<lv>error|warning|info): )?(?P<msg>.*)$")
_CANCELLED = re.compile(r"\*\*\* (?P<what>STEP|JOB) (?P<id>[\w.+]+) ON (?P<node>\S+) CANCELLED AT "
                        r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)"
                        r"(?: DUE TO (?P<reason>[A-Z ]+?))? \*\*\*")
_OOM_EVENTS = re.compile(r"Detected (?P<n>\d+) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )"
                         r"(?P<id>[\w+]+(?:\.[\w+]+)*)")
_EXCEEDED = re.compile(r"Job (?P<job>\d+) exceeded memory limit \((?P<used>\d+) > (?P<limit>\d+)\)")
_SRUN = re.compile(r"^srun: (?:(?P<lv>error|warning): )?(?P<msg>.*)$")
_SRUN_TASK = re.compile(r"^(?P<node>[\w.-]+): tasks? (?P<task>[\d,\-]+): (?P<what>.+)$")
_STEP_ID = re.compile(r"StepId=(?P<id>[\w.+]+)")


def _job_step(ident: str, attrs: dict[str, Any]) -> None:
    job, _, step = ident.partition(".")
    attrs["job"] = job
    if step:
        attrs["step"] = step


def parse_slurm(text: str) -> tuple[dict[str, Any], Stamp | None, bool] | None:
    """A slurmstepd / srun line: (attrs, stamp, is_error); ``None`` for other text."""
    m = _STEPD.match(text)
    if m:
        attrs: dict[str, Any] = {"daemon": "slurmstepd"}
        if m.group("node"):
            attrs["node"] = m.group("node")
        msg = m.group("msg")
        stamp = None
        c = _CANCELLED.search(msg)
        if c:
            _job_step(c.group("id"), attrs)
            attrs.update(cancelled=True, node=c.group("node"))
            if c.group("reason"):
                attrs["reason"] = c.group("reason").strip()
            stamp = Stamp(int(c.group("y")), int(c.group("mo")), int(c.group("d")), int(c.group("H")),
                          int(c.group("M")), int(c.group("S")))
        o = _OOM_EVENTS.search(msg)
        if o:
            attrs["oom_kill_events"] = int(o.group("n"))
            _job_step(o.group("id"), attrs)
        e = _EXCEEDED.search(msg)
        if e:
            attrs.update(job=e.group("job"), mem_used=int(e.group("used")), mem_limit=int(e.group("limit")))
        if "Exceeded job memory limit" in msg or "exceeded memory limit" in msg:
            attrs["memory_limit"] = True
        return attrs, stamp, m.group("lv") == "error"
    m = _SRUN.match(text)
    if m:
        attrs = {"daemon": "srun"}
        msg = m.group("msg")
        t = _SRUN_TASK.match(msg)
        if t:
            attrs.update(node=t.group("node"), task=t.group("task"), reason=t.group("what").strip())
            if t.group("task").isdigit():
                attrs["rank"] = int(t.group("task"))
        s = _STEP_ID.search(msg)
        if s:
            _job_step(s.group("id"), attrs)
        return attrs, None, m.group("lv") == "error" or "abort" in msg.lower()
    return None


_SHELL_JOB = re.compile(r": line \d+: +(?P<pid>\d+) (?P<what>Killed|Segmentation fault|Aborted|Bus error|"
                        r"Floating point exception|Illegal instruction)(?: +\(core dumped\))?")
_BARE = re.compile(r"^(?P<what>Killed|Segmentation fault|Aborted|Bus error|Floating point exception|"
                   r"Illegal instruction)(?: \(core dumped\))?\s*$")


def parse_shell_signal(text: str) -> dict[str, Any] | None:
    """A shell's report that a process died by a signal (``Killed``, ``Segmentation fault (core dumped)``)."""
    m = _BARE.match(text.strip())
    if m:
        what = m.group("what")
        return {"signal": "SIGKILL" if what == "Killed" else FATAL_SIGNALS[what]}
    m = _SHELL_JOB.search(text)
    if m:
        what = m.group("what")
        return {"signal": "SIGKILL" if what == "Killed" else FATAL_SIGNALS[what], "pid": int(m.group("pid"))}
    return None
