"""Extract the Slurm messages a job's output shows (srun, slurmstepd) from a snapshot of
https://github.com/SchedMD/slurm (docs/catalogs.md).

What it reads (``_SOURCES``): the srun client (``src/srun``, its option parsing ``opt.c`` left out), the
step-launch and step-I/O code of libslurm that srun runs (``src/api/step_launch.c``, ``step_io.c``), the
step daemon (``src/slurmd/slurmstepd``, without the X11, PAM and OCI-container features), and the plugins
and interfaces that run inside slurmstepd and write into the job's output: task/cgroup (the OOM-kill
report), jobacct_gather (the memory-limit kill), gres/gpu, mpi/pmix and mpi/pmi2. In those files every call
of ``error()``, ``fatal()``, ``fatal_abort()``, ``warning()`` and pmix's ``PMIXP_ERROR*()`` /
``PMIXP_ABORT()`` whose format
is a string literal becomes an entry; its level is the function's name. Adjacent literals are joined and
the ``PRIu64``-style macros resolved, C escapes resolved, and a newline or tab at either end of a format is
dropped (the log function ends the line anyway; kept, it would keep the text from ever matching a line);
Slurm's own conversions (``%ps`` step id, ``%pJ`` job id, ``%m`` strerror) are placeholders like the others.

Two more kinds: a short list of ``info()`` lines srun and libslurm print when a step is being torn down
(``_INFO``: "Job step aborted: Waiting up to …", "Force Terminated …"), the memory-limit notice slurmstepd
sends to srun (a message string, not a log call), and the strings of Slurm's errno table
(``src/common/slurm_errno.c``) that end the ``%m`` of srun's errors about communication and step launch
(``_ERRNO``: the communication, protocol-socket and slurmd launch codes; the ~300 others are
administration and submission errors a running job does not print). Their level is ``info``, ``notify``
and ``errno``. Older wordings of messages mapped to a signature are in ``_OLDER``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

#: (glob under src/, area of the id, files left out)
_SOURCES: list[tuple[str, str, tuple[str, ...]]] = [
    ("srun/*.c", "srun", ("opt.c", "srun.wrapper.c")),
    ("api/step_launch.c", "step-launch", ()),
    ("api/step_io.c", "step-io", ()),
    ("slurmd/slurmstepd/*.c", "slurmstepd", ("x11_forwarding.c", "pam_ses.c", "container.c")),
    ("plugins/task/cgroup/*.c", "task-cgroup", ()),
    ("interfaces/jobacct_gather.c", "jobacct", ()),
    ("plugins/jobacct_gather/*/*.c", "jobacct", ()),
    ("plugins/gres/gpu/*.c", "gres-gpu", ()),
    ("plugins/mpi/pmix/*.c", "mpi-pmix", ()),
    ("plugins/mpi/pmi2/*.c", "mpi-pmi2", ()),
]
_CALL = re.compile(r"(?<![\w.>])(error|fatal|fatal_abort|warning|PMIXP_ERROR|PMIXP_ERROR_STD|PMIXP_ERROR_NO"
                   r"|PMIXP_ABORT)\s*\(")
_MACROS = {"PRIu64": "lu", "PRId64": "ld", "PRIx64": "lx", "PRIu32": "u", "PRId32": "d", "PRIu16": "hu",
           "PRIx32": "x", "PRIi64": "li"}
#: info() lines of step teardown that srun users see: (file under src/, a literal piece that is unique there)
_INFO: list[tuple[str, str]] = [
    ("api/step_launch.c", "Job step aborted: Waiting up to "),
    ("api/step_launch.c", "Job step aborted\""),
    ("api/step_launch.c", "Force Terminated %ps"),
    ("srun/launch.c", "Terminating %ps"),
    ("srun/signals.c", "forcing job termination"),
    ("srun/signals.c", "First task exited %ds ago"),
    ("srun/launch.c", "%ps aborted before step completely launched."),
]
#: slurm_errno.c names whose strings end srun's "…: %m" errors about communication and launch.
_ERRNO = re.compile(r"^(SLURM_COMMUNICATIONS_\w+|SLURMCTLD_COMMUNICATIONS_\w+|SLURM_PROTOCOL_SOCKET_\w+|"
                    r"SLURM_PROTOCOL_VERSION_ERROR|SLURM_PROTOCOL_AUTHENTICATION_ERROR|ESLURM_JOB_\w+_KILLED|"
                    r"ESLURM_ALREADY_DONE|ESLURM_INVALID_JOB_ID|ESLURMD_\w+|SLURM_MPI_PLUGIN_PRELAUNCH_SETUP_FAILED)$")
#: Readable ids for the messages users quote most (the others are named after their first words).
_NAMES: dict[str, str] = {
    "{}: {} {}: Out Of Memory": "slurm.srun.task-out-of-memory",
    "{}: {} {}: Exited with exit code {}": "slurm.srun.task-exited-with-exit-code",
    "{}: {} {}: {}{}": "slurm.srun.task-killed-by-signal",
    "*** {} ON {} CANCELLED AT {} DUE TO TIME LIMIT ***": "slurm.slurmstepd.cancelled-due-to-time-limit",
    "*** {} ON {} CANCELLED AT {} DUE TO PREEMPTION ***": "slurm.slurmstepd.cancelled-due-to-preemption",
    "*** {} ON {} CANCELLED AT {} DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***":
        "slurm.slurmstepd.cancelled-due-to-node-failure",
    "*** {} ON {} CANCELLED AT {} DUE TO JOB REQUEUE ***": "slurm.slurmstepd.cancelled-due-to-job-requeue",
    "*** {} ON {} CANCELLED AT {} DUE to SIGNAL {} ***": "slurm.slurmstepd.cancelled-due-to-signal",
    "*** {} ON {} CANCELLED AT {} DUE TO TASK FAILURE ***": "slurm.slurmstepd.cancelled-due-to-task-failure",
    "*** {} ON {} FAILED (non-zero exit code or other failure mode) ***": "slurm.slurmstepd.step-failed",
    "Detected {} oom_kill event{} in {}. Some of the step tasks have been OOM Killed.":
        "slurm.task-cgroup.oom-kill-events",
    "{} exceeded memory limit ({} > {}), being killed": "slurm.jobacct.exceeded-memory-limit",
    "{} exceeded virtual memory limit ({} > {}), being killed": "slurm.jobacct.exceeded-virtual-memory-limit",
    "Exceeded job memory limit": "slurm.jobacct.exceeded-job-memory-limit-notice",
    "Job step aborted: Waiting up to {} seconds for job step to finish.": "slurm.step-launch.job-step-aborted-waiting",
}
#: Older wordings: id -> [(format, first release, last release)], read with ``git show
#: slurm-<release>:<path>``: those of messages mapped to a signature (task/cgroup reworded its OOM report in
#: 23.02; the 21.08 text also matches the 18.08-20.11 lines, whose "step 123.0 cgroup" / "StepId=123.0
#: cgroup" is one value), and the scancel notice that 25.05 reworded, which most clusters still print.
_OLDER: dict[str, list[tuple[str, str, str]]] = {
    "slurm.task-cgroup.oom-kill-events": [
        ("Detected %lu oom-kill event(s) in %ps. Some of your processes may have been killed by the cgroup "
         "out-of-memory handler.", "18.08", "22.05")],
    "slurm.slurmstepd.cancelled-due-to-signal": [("*** %s ON %s CANCELLED AT %s ***", "20.11", "24.11")],
}
_PRINTF = re.compile(r"%(?:%|p[A-Za-z]|m|[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L|q)?"
                     r"[diouxXeEfgGcsp])")
_ESC = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'"}


def printf_text(fmt: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _PRINTF.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        out.append("%" if m.group() == "%%" else "{}")
        pos = m.end()
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def _literal_run(src: str, pos: int) -> tuple[str | None, int]:
    """The string made of the literals and PRI macros starting at `pos` (None if the argument is not one)."""
    parts: list[str] = []
    while True:
        m = re.compile(r'\s*(?:/\*.*?\*/\s*)*(?:"((?:[^"\\\n]|\\.)*)"|(PRI\w+)\b)', re.S).match(src, pos)
        if not m:
            break
        if m.group(1) is not None:
            parts.append(re.sub(r"\\(.)", lambda e: _ESC.get(e.group(1), "\\" + e.group(1)),
                                m.group(1).replace("\\\n", ""), flags=re.S))
        else:
            if m.group(2) not in _MACROS:
                return None, pos
            parts.append(_MACROS[m.group(2)])
        pos = m.end()
    if not parts:
        return None, pos
    end = re.compile(r"\s*[,)]").match(src, pos)
    # A newline or tab at either end only breaks or indents the line the log function writes anyway.
    return ("".join(parts).strip("\n\t ") if end else None), pos


def _kebab(fmt: str) -> str:
    words = re.findall(r"[a-z0-9]+", re.sub(r"%\S+|\{\}", " ", fmt.replace("'", "")).lower())
    return "-".join(words[:7]) or "message"


def _strip_comments(src: str) -> str:
    """Comments blanked (newlines kept, so line numbers hold)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group()), src, flags=re.S)


def _calls(root: Path, rel: str) -> list[tuple[str, int, str]]:
    src = _strip_comments((root / "src" / rel).read_text(errors="replace"))
    found: list[tuple[str, int, str]] = []
    for m in _CALL.finditer(src):
        pos = m.end()
        if m.group(1) == "PMIXP_ERROR_NO":  # PMIXP_ERROR_NO(err, format, …)
            comma = src.find(",", pos)
            pos = comma + 1 if comma > 0 else pos
        fmt, _ = _literal_run(src, pos)
        if fmt is None or not fmt.strip():
            continue
        found.append((m.group(1), src.count("\n", 0, m.start()) + 1, fmt))
    return found


def _line_of(root: Path, rel: str, piece: str) -> tuple[int, str]:
    """The first ``info()`` call of `rel` whose literal format holds `piece` (a trailing ``"`` = the format
    ends there)."""
    src = _strip_comments((root / "src" / rel).read_text(errors="replace"))
    for m in re.finditer(r"(?<![\w.>])info\s*\(", src):
        fmt, _ = _literal_run(src, m.end())
        if fmt is not None and (fmt == piece[:-1] if piece.endswith('"') else piece in fmt):
            return src.count("\n", 0, m.start()) + 1, fmt
    raise SystemExit(f"slurm: no info() with {piece!r} in src/{rel}")


def extract(root: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}

    def add(area: str, fmt: str, where: str, level: str, code: str | None = None) -> None:
        base = _NAMES.get(printf_text(fmt), f"slurm.{area}.{_kebab(fmt)}")
        seen[base] = seen.get(base, 0) + 1
        ident = base if seen[base] == 1 else f"{base}-{seen[base]}"
        entry: dict[str, Any] = {"id": ident, "format": fmt, "text": printf_text(fmt), "where": where,
                                 "level": level}
        if code:
            entry["code"] = code
        out.append(entry)
        for old, first, last in _OLDER.get(ident, []):
            out.append({**entry, "id": f"{ident}@{last}", "format": old, "text": printf_text(old),
                        "versions": [first, last]})

    for pattern, area, skip in _SOURCES:
        for path in sorted((root / "src").glob(pattern)):
            if path.name in skip:
                continue
            rel = path.relative_to(root / "src").as_posix()
            done: set[str] = set()
            for level, line, fmt in _calls(root, rel):
                if fmt in done:  # the same message twice in one file: its first place
                    continue
                done.add(fmt)
                add(area, fmt, f"src/{rel}:{line}", level)
    for rel, piece in _INFO:
        line, fmt = _line_of(root, rel, piece)
        add(rel.split("/")[-1].removesuffix(".c").replace("_", "-") if rel.startswith("api/") else "srun",
            fmt, f"src/{rel}:{line}", "info")
    src = (root / "src/interfaces/jobacct_gather.c").read_text()
    m = re.search(r'notify_req\.message\s*=\s*"([^"]*)"', src)
    if not m:
        raise SystemExit("slurm: the memory-limit notice is gone from src/interfaces/jobacct_gather.c")
    add("jobacct", m.group(1), f"src/interfaces/jobacct_gather.c:{src.count(chr(10), 0, m.start()) + 1}", "notify")
    errtab = (root / "src/common/slurm_errno.c").read_text()
    for m in re.finditer(r'ERRTAB_ENTRY\((\w+)\),\s*"((?:[^"\\]|\\.)*)"', errtab):
        if _ERRNO.match(m.group(1)):
            add("errno", m.group(2), f"src/common/slurm_errno.c:{errtab.count(chr(10), 0, m.start()) + 1}",
                "errno", m.group(1))
    return out


if __name__ == "__main__":
    import json
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
