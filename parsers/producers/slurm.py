"""Slurm's own lines → ``slurm`` events: a job's output, and the daemons' logs.

In a job's output, ``slurmstepd`` (optionally ``slurmstepd-<node>``) reports cancellations,
cgroup OOM kills and memory-limit kills; ``srun`` reports tasks that died, and with ``-v`` the
allocation (``job 123 has been allocated resources``) and each node's step launch
(``launching StepId=123.0 on host node01, 8 tasks: [0-7]``). The cancellation line carries the
only absolute time a Slurm ``.out`` file has. Shell job-control lines (``Killed``,
``Segmentation fault (core dumped)``) are read here too: they name the signal that ended a process.

The daemons' messages (:func:`parse_daemon`) come from ``slurmd.log`` / ``slurmctld.log``
(parsers/slurm_daemon_log.py) or from syslog and the journal (identifier ``slurmd``,
``slurmctld``, ``slurmstepd``; parsers/common/user_space.py hands them here): ``slurmd`` launching a
step or a batch job on its node, ``slurmstepd``'s ``[123.0] done with job``, ``slurmctld``
allocating nodes (``sched: Allocate JobId=…``), completing a job (``_job_complete: JobId=…``).
Each such record gets ``step_event`` (``submitted`` / ``allocated`` / ``start`` / ``end`` /
``abort`` / ``kill`` / ``failed``) with ``job`` and ``step``; a step's start on every node at
once is a moment the clocks of a job's hosts can be compared by (forensics/timeline/clocksync.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from forensics.parsers.common.stream_text import Stamp
from forensics.parsers.producers.py_traceback import FATAL_SIGNALS

from forensics.events import Event, Severity
from forensics.lazy_re import lazy_compile

__all__ = ["daemon_event", "is_daemon", "parse_daemon", "parse_shell_signal", "parse_slurm", "severity"]

_STEPD = lazy_compile(r"^slurmstepd(?:-(?P<node>[\w.-]+))?: (?:(?P<lv>error|warning|info): )?(?P<msg>.*)$")
_CANCELLED = lazy_compile(r"\*\*\* (?P<what>STEP|JOB) (?P<id>[\w.+]+) ON (?P<node>\S+) CANCELLED AT "
                          r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)T(?P<H>\d\d):(?P<M>\d\d):(?P<S>\d\d)"
                          r"(?: DUE TO (?P<reason>[A-Z ]+?))? \*\*\*")
_OOM_EVENTS = lazy_compile(r"Detected (?P<n>\d+) oom[-_]kill events?(?:\(s\))? in (?:StepId=|step )"
                           r"(?P<id>[\w+]+(?:\.[\w+]+)*)")
_EXCEEDED = lazy_compile(r"Job (?P<job>\d+) exceeded memory limit \((?P<used>\d+) > (?P<limit>\d+)\)")
_SRUN = lazy_compile(r"^srun: (?:(?P<lv>error|warning): )?(?P<msg>.*)$")
_SRUN_TASK = lazy_compile(r"^(?P<node>[\w.-]+): tasks? (?P<task>[\d,\-]+): (?P<what>.+)$")
_STEP_ID = lazy_compile(r"StepId=(?P<id>[\w.+]+?)\.?(?=[\s,)]|$)")
_SRUN_LAUNCHING = lazy_compile(r"launching StepId=(?P<id>[\w.+]+) on host (?P<node>[\w.-]+), (?P<n>\d+) tasks?: "
                               r"(?P<tasks>\S+)")
_SRUN_ALLOCATED = lazy_compile(r"^job (?P<job>\d+) has been allocated resources")
_SRUN_QUEUED = lazy_compile(r"^job (?P<job>\d+) queued and waiting for resources")
_SRUN_EXIT_NOTE = lazy_compile(r"Received task exit notification for (?P<n>\d+) tasks? of StepId=(?P<id>[\w.+]+) "
                               r"\(status=(?P<status>0x[0-9a-fA-F]+)\)")
_SRUN_STARTED = lazy_compile(r"(?:_task_start: )?Node (?P<node>[\w.-]+), (?P<n>\d+) tasks started")
_NODE_FAILURE = lazy_compile(r"Node failure on (?P<node>[\w.-]+)")
_EXIT_CODE = lazy_compile(r"Exited with exit code (?P<code>\d+)")


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
            c = _EXIT_CODE.search(t.group("what"))
            if c:
                attrs["exitcode"] = int(c.group("code"))
        s = _STEP_ID.search(msg)
        if s:
            _job_step(s.group("id"), attrs)
        _srun_progress(msg, attrs)
        return attrs, None, m.group("lv") == "error" or "abort" in msg.lower()
    return None


def _srun_progress(msg: str, attrs: dict[str, Any]) -> None:
    """What ``srun -v`` says about the job's progress: allocation, each node's step launch, exits."""
    m = _SRUN_LAUNCHING.search(msg)
    if m:
        _job_step(m.group("id"), attrs)
        attrs.update(step_event="start", node=m.group("node"), tasks=m.group("tasks"), ntasks=int(m.group("n")))
        return
    m = _SRUN_ALLOCATED.match(msg) or _SRUN_QUEUED.match(msg)
    if m:
        attrs.update(job=m.group("job"), step_event="allocated" if "allocated" in msg else "submitted")
        return
    m = _SRUN_EXIT_NOTE.search(msg)
    if m:
        _job_step(m.group("id"), attrs)
        attrs.update(step_event="end", exit_status=m.group("status"))
        return
    m = _SRUN_STARTED.search(msg)
    if m:
        attrs.update(node=m.group("node"), tasks_started=int(m.group("n")))
        return
    m = _NODE_FAILURE.search(msg)
    if m:
        attrs.update(node=m.group("node"), node_failure=True)
    if "Job step aborted" in msg or "forcing job termination" in msg:
        attrs["step_event"] = "abort"


# -- the daemons: slurmd, slurmstepd, slurmctld ------------------------------------------------

#: ``slurmd: ``, ``slurmd-node07: `` (the daemon names itself again inside a syslog message)
_DAEMON_PREFIX = lazy_compile(r"^(?P<daemon>slurmd|slurmctld|slurmstepd|slurmdbd)(?:-(?P<node>[\w.-]+))?: ")
#: ``[123.0] ``, ``[50.batch] ``, ``[7_3.extern] ``: slurmstepd's records in slurmd.log
_STEP_PREFIX = lazy_compile(r"^\[(?P<id>\d+(?:_\d+)?\.[\w+]+)\] ")
_LEVEL = lazy_compile(r"^(?P<lv>error|fatal|warning|debug\d?|verbose|info): +")
_LAUNCH_TASK = lazy_compile(r"launch task (?:StepId=)?(?P<id>\d+(?:_\d+)?\.[\w+]+) request from "
                            r"(?:UID[:=](?P<uid>\d+))?")
_BATCH = lazy_compile(r"Launching batch (?:job (?P<job>\d+) for UID (?P<uid>\d+)|JobId=(?P<job2>\d+))")
_DONE = lazy_compile(r"^done with (?:job|step)\b")
_ALLOCATE = lazy_compile(r"\bAllocate JobId=(?P<job>\d+)\S* NodeList=(?P<nodes>\S+)")
_STARTED = lazy_compile(r"\bStarted JobId=(?P<job>\d+)\S* in (?P<part>\S+) on (?P<nodes>\S+)")
_RPC_ALLOC = lazy_compile(r"_slurm_rpc_allocate_resources:? JobId=(?P<job>\d+)\S* NodeList=(?P<nodes>\S+)")
_SUBMIT = lazy_compile(r"_slurm_rpc_submit_batch_job:? JobId=(?P<job>\d+)")
_JOB_COMPLETE = lazy_compile(r"_job_complete: JobId=(?P<job>\d+)\S* (?P<what>.+)$")
_KILL = lazy_compile(r"_slurm_rpc_kill_job\d?: REQUEST_KILL_JOB JobId=(?P<job>\d+)")
_ERROR_RUNNING = lazy_compile(r"slurmd error running JobId=(?P<job>\d+) "
                              r"on node\(s\)=(?P<nodes>[^:\s]+): (?P<reason>.+)$")
_JOB_ID = lazy_compile(r"\bJobId=(?P<job>\d+)(?: StepId=(?P<step>\w+))?")
_WAIT = lazy_compile(r"^(?P<how>WEXITSTATUS|WTERMSIG) (?P<n>\d+)$")


def parse_daemon(text: str, daemon: str | None = None) -> tuple[dict[str, Any], bool] | None:
    """One message of a Slurm daemon (``slurmd``, ``slurmstepd``, ``slurmctld``), without its time
    stamp and syslog header: (attrs, is_error), or ``None`` when it is neither a step/job
    record nor an error (plugin chatter, debug lines). ``daemon`` is the syslog identifier."""
    attrs: dict[str, Any] = {}
    m = _DAEMON_PREFIX.match(text)
    if m:
        daemon = m.group("daemon")
        if m.group("node"):
            attrs["node"] = m.group("node")
        text = text[m.end():]
    if daemon:
        attrs["daemon"] = daemon.split("-", 1)[0]
    m = _STEP_PREFIX.match(text)
    if m:
        _job_step(m.group("id"), attrs)
        attrs.setdefault("daemon", "slurmstepd")
        text = text[m.end():]
    level = _LEVEL.match(text)
    error = level is not None and level.group("lv") in ("error", "fatal")
    if level is not None:
        if level.group("lv").startswith(("debug", "verbose")):
            return None
        text = text[level.end():]
    if _record(text, attrs) or error:
        if error and "job" not in attrs and (j := _JOB_ID.search(text)):
            attrs["job"] = j.group("job")
            if j.group("step"):
                attrs["step"] = j.group("step")
        return attrs, error or attrs.get("step_event") == "failed"
    return None


def severity(attrs: dict[str, Any], error: bool) -> Severity:
    """An error line is an error; a job or task that ended by a signal or a non-zero status a warning."""
    if error:
        return Severity.ERROR
    if attrs.get("term_signal") or (attrs.get("exitcode") or 0) > 0 or attrs.get("cancelled"):
        return Severity.WARNING
    return Severity.INFO


def daemon_event(e: Event) -> Event | None:
    """A journal or syslog line of a Slurm daemon (``e.attrs['ident']`` ``slurmd``, ``slurmctld``,
    ``slurmd-node07`` …) as the ``slurm`` event it is; ``None`` when it is neither a step/job record
    nor an error. The line's host is the node (``slurmd-<node>`` names it too)."""
    ident = str(e.attrs.get("ident") or "")
    parsed = parse_daemon(e.message, ident)
    if parsed is None:
        return None
    attrs, error = parsed
    if ident.startswith(("slurmd-", "slurmstepd-")):
        attrs.setdefault("node", ident.split("-", 1)[1])
    if e.attrs.get("level") in ("emerg", "alert", "crit", "err"):
        error = True
    keep = {k: v for k, v in e.attrs.items() if k in ("year_inferred", "ident")}
    return replace(e, kind="slurm", severity=severity(attrs, error), attrs={**keep, **attrs},
                   host=e.host or attrs.get("node"))


def is_daemon(ident: object) -> bool:
    """Whether a syslog identifier names a Slurm daemon (``slurmd``, ``slurmctld``, ``slurmd-node07``)."""
    return isinstance(ident, str) and bool(_DAEMON_IDENT.match(ident))


_DAEMON_IDENT = lazy_compile(r"^(?:slurmd|slurmctld|slurmstepd|slurmdbd)(?:-[\w.-]+)?$")


def _record(text: str, attrs: dict[str, Any]) -> bool:
    """The step or job record ``text`` is, into ``attrs`` (``step_event`` …); whether it is one."""
    m = _LAUNCH_TASK.search(text)
    if m:
        _job_step(m.group("id"), attrs)
        attrs["step_event"] = "start"
        if m.group("uid"):
            attrs["uid"] = int(m.group("uid"))
        return True
    m = _BATCH.search(text)
    if m:
        attrs.update(job=m.group("job") or m.group("job2"), step="batch", step_event="start")
        return True
    if "step" in attrs and _DONE.match(text):
        attrs["step_event"] = "end"
        return True
    m = _ALLOCATE.search(text) or _STARTED.search(text)
    if m:
        attrs.update(job=m.group("job"), nodes=m.group("nodes"), step_event="allocated")
        return True
    m = _RPC_ALLOC.search(text)
    if m:
        nodes = m.group("nodes")
        attrs.update(job=m.group("job"), step_event="submitted" if nodes == "(null)" else "allocated")
        if nodes != "(null)":
            attrs["nodes"] = nodes
        return True
    m = _SUBMIT.search(text)
    if m:
        attrs.update(job=m.group("job"), step_event="submitted")
        return True
    m = _JOB_COMPLETE.search(text)
    if m:
        attrs["job"] = m.group("job")
        what = m.group("what").strip()
        w = _WAIT.match(what)
        if w:
            attrs["exitcode" if w.group("how") == "WEXITSTATUS" else "term_signal"] = int(w.group("n"))
        elif what == "done":
            attrs["step_event"] = "end"
        elif "cancelled" in what:
            attrs.update(cancelled=True, reason=what)
        return True
    m = _KILL.search(text)
    if m:
        attrs.update(job=m.group("job"), step_event="kill")
        return True
    m = _ERROR_RUNNING.search(text)
    if m:
        attrs.update(job=m.group("job"), nodes=m.group("nodes"), reason=m.group("reason").strip(), step_event="failed")
        return True
    return False


_SHELL_JOB = lazy_compile(r": line \d+: +(?P<pid>\d+) (?P<what>Killed|Segmentation fault|Aborted|Bus error|"
                          r"Floating point exception|Illegal instruction)(?: +\(core dumped\))?")
_BARE = lazy_compile(r"^(?P<what>Killed|Segmentation fault|Aborted|Bus error|Floating point exception|"
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
