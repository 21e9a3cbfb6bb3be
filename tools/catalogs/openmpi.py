"""Extract the messages ``mpirun`` and an Open MPI job print from a snapshot of https://github.com/open-mpi/ompi
(docs/catalogs.md), with its PRRTE submodule checked out in ``3rd-party/prrte`` (in Open MPI 5, mpirun is
PRRTE's prterun; https://github.com/openpmix/prrte).

What it reads:

* The show-help files (``help-*.txt``) of ``_HELP``: PRRTE's launcher, daemon, state, error-manager, ODLS,
  PLM, OOB, I/O-forwarding and mapping topics (what mpirun prints when a launch fails or a rank dies), and
  Open MPI's MPI-layer topics (MPI_Abort, MPI errors, init failures, the TCP / OFI / shared-memory / CUDA
  transports). The tools' files (prun, prterun, prted) begin with one topic per command-line option
  (documentation, not messages): only their topics from the first error topic on are read. A help file is
  a list of ``[topic]`` sections whose lines ``show_help`` prints unchanged
  between two dashed rulers, with printf values filled in. Each topic is one entry, listed by its first line
  that holds at least 12 fixed characters (a line matcher sees one line of the banner; that line is the
  topic's statement, e.g. "%s noticed that process rank %lu with PID %lu on node %s exited on"). ``#``
  lines are comments. Level: ``show_help``.
* For the two topics whose first line ends inside a value that holds a line break (``_COMPOSED``: "1
  process returned\na non-zero exit code"), the first printed line as topic and call-site literal make it.
* A few messages written by C code (``_CODE``): the stack-trace banner of a rank that received a fatal
  signal (opal/util/stacktrace.c), the MPI error handler's "*** An error occurred in …" lines
  (ompi/errhandler/errhandler_predefined.c), PRRTE's ``PRTE_ERROR_LOG`` line. Each literal must be found in
  its file. Level: the writing function.
* Older wordings (``_OLDER``, Open MPI 4.1's ORTE, read with ``git show v4.1.6:<path>``) of messages users
  of 4.x still see, among them those mapped to a signature.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

PRRTE_HELP = "3rd-party/prrte/src/docs/show-help-files"
#: show-help files read: PRRTE's (mpirun) and Open MPI's MPI layer (path under the ompi root, id area)
_HELP: list[tuple[str, str]] = [
    (f"{PRRTE_HELP}/help-prun.txt", "prun"),
    (f"{PRRTE_HELP}/help-prterun.txt", "prterun"),
    (f"{PRRTE_HELP}/help-prted.txt", "prted"),
    (f"{PRRTE_HELP}/help-prte-runtime.txt", "prte-runtime"),
    (f"{PRRTE_HELP}/help-state-base.txt", "state-base"),
    (f"{PRRTE_HELP}/help-errmgr-base.txt", "errmgr-base"),
    (f"{PRRTE_HELP}/help-ess-base.txt", "ess-base"),
    (f"{PRRTE_HELP}/help-prte-odls-base.txt", "odls-base"),
    (f"{PRRTE_HELP}/help-prte-odls-default.txt", "odls-default"),
    (f"{PRRTE_HELP}/help-plm-base.txt", "plm-base"),
    (f"{PRRTE_HELP}/help-plm-ssh.txt", "plm-ssh"),
    (f"{PRRTE_HELP}/help-plm-slurm.txt", "plm-slurm"),
    (f"{PRRTE_HELP}/help-ras-slurm.txt", "ras-slurm"),
    (f"{PRRTE_HELP}/help-oob-base.txt", "oob-base"),
    (f"{PRRTE_HELP}/help-oob-tcp.txt", "oob-tcp"),
    (f"{PRRTE_HELP}/help-iof-base.txt", "iof-base"),
    (f"{PRRTE_HELP}/help-prte-rmaps-base.txt", "rmaps-base"),
    (f"{PRRTE_HELP}/help-hostfile.txt", "hostfile"),
    (f"{PRRTE_HELP}/help-prte-util.txt", "prte-util"),
    ("ompi/tools/mpirun/help-mpirun.txt", "mpirun"),
    ("ompi/runtime/help-mpi-runtime.txt", "mpi-runtime"),
    ("ompi/mpi/help-mpi-api.txt", "mpi-api"),
    ("ompi/errhandler/help-mpi-errors.txt", "mpi-errors"),
    ("ompi/communicator/help-comm.txt", "comm"),
    ("ompi/dpm/help-dpm.txt", "dpm"),
    ("ompi/mca/pml/ob1/help-mpi-pml-ob1.txt", "pml-ob1"),
    ("ompi/mca/bml/r2/help-mca-bml-r2.txt", "bml-r2"),
    ("ompi/mca/mtl/ofi/help-mtl-ofi.txt", "mtl-ofi"),
    ("ompi/mca/coll/base/help-mca-coll-base.txt", "coll-base"),
    ("ompi/mca/coll/cuda/help-mpi-coll-cuda.txt", "coll-cuda"),
    ("opal/mca/btl/base/help-mpi-btl-base.txt", "btl-base"),
    ("opal/mca/btl/tcp/help-mpi-btl-tcp.txt", "btl-tcp"),
    ("opal/mca/btl/smcuda/help-mpi-btl-smcuda.txt", "btl-smcuda"),
    ("opal/mca/common/ofi/help-common-ofi.txt", "common-ofi"),
    ("opal/mca/common/sm/help-mpi-common-sm.txt", "common-sm"),
    ("opal/mca/accelerator/base/help-accelerator-base.txt", "accelerator-base"),
    ("opal/mca/accelerator/cuda/help-accelerator-cuda.txt", "accelerator-cuda"),
    ("opal/mca/shmem/mmap/help-opal-shmem-mmap.txt", "shmem-mmap"),
    ("opal/mca/shmem/posix/help-opal-shmem-posix.txt", "shmem-posix"),
    ("opal/mca/shmem/sysv/help-opal-shmem-sysv.txt", "shmem-sysv"),
    ("opal/mca/mpool/base/help-mpool-base.txt", "mpool-base"),
    ("opal/mca/rcache/base/help-rcache-base.txt", "rcache-base"),
    ("opal/runtime/help-opal-runtime.txt", "opal-runtime"),
]
#: Tool help files begin with the documentation of their command-line options (one topic per option, not
#: messages); their error topics start at this topic.
_FIRST_ERROR_TOPIC = {"prun": "prun:executable-not-specified", "prterun": "multiple-default-hostfiles",
                      "prted": "prted:environ"}
#: Topics that are not messages: the placeholder section PRRTE's files begin with, usage and version texts,
#: the mapper's table of deprecated options.
_NOT_MESSAGES = {"bogus section", "usage", "version", "placement-deprecated"}
#: (id, path, literal as in the source with C escapes resolved and the trailing newline dropped, level)
_CODE: list[tuple[str, str, str, str]] = [
    ("openmpi.stacktrace.process-received-signal", "opal/util/stacktrace.c", "*** Process received signal ***",
     "opal_best_effort_write"),
    ("openmpi.stacktrace.signal", "opal/util/stacktrace.c", "Signal: %s (%d)", "opal_best_effort_write"),
    ("openmpi.stacktrace.signal-code", "opal/util/stacktrace.c", "Signal code: %s (%d)", "opal_best_effort_write"),
    ("openmpi.stacktrace.failing-at-address", "opal/util/stacktrace.c", "Failing at address: %p",
     "opal_best_effort_write"),
    ("openmpi.stacktrace.end-of-error-message", "opal/util/stacktrace.c", "*** End of error message ***",
     "opal_best_effort_write"),
    ("openmpi.errhandler.an-error-occurred-in", "ompi/errhandler/errhandler_predefined.c",
     "*** An error occurred in %s", "out"),
    ("openmpi.errhandler.errors-are-fatal", "ompi/errhandler/errhandler_predefined.c",
     "*** MPI_ERRORS_ARE_FATAL (processes in this %s will now abort,", "out"),
    ("openmpi.errhandler.mpi-will-try-to-terminate", "ompi/errhandler/errhandler_predefined.c",
     "***    and MPI will try to terminate your MPI job as well)", "out"),
    ("openmpi.errhandler.errors-abort", "ompi/errhandler/errhandler_predefined.c",
     "*** MPI_ERRORS_ABORT (processes in this %s will now abort,", "out"),
    ("openmpi.errhandler.your-mpi-job-will-now-abort", "ompi/errhandler/errhandler_predefined.c",
     "*** Your MPI job will now abort.", "out"),
    ("openmpi.errhandler.called-after-finalize", "ompi/errhandler/errhandler_predefined.c",
     "*** An MPI function was called after MPI_FINALIZE was invoked.", "out"),
    ("openmpi.errmgr.prte-error-log", "3rd-party/prrte/src/mca/errmgr/base/errmgr_base_fns.c",
     "%s PRTE_ERROR_LOG: %s in file %s at line %d", "pmix_output"),
]
#: Older wordings (Open MPI 4.1, ORTE), read with ``git show v4.1.6:<path>``: id -> [(format, first, last)].
#: In 4.x the signal message was one line; its 5.x first line still matches it, the full line says more.
_OLDER: dict[str, list[tuple[str, str, str]]] = {
    "openmpi.prun.proc-aborted-strsignal": [
        ("%s noticed that process rank %lu with PID %lu on node %s exited on signal %d (%s).", "3.0", "4.1")],
    "openmpi.prun.proc-aborted": [
        ("%s noticed that process rank %lu with PID %lu on node %s exited on signal %d.", "3.0", "4.1")],
    "openmpi.prun.non-zero-exit": [
        ("%s detected that one or more processes exited with non-zero status, thus causing", "3.0", "4.1")],
    "openmpi.errmgr.prte-error-log": [("%s ORTE_ERROR_LOG: %s in file %s at line %d", "1.8", "4.1")],
}

#: Topics whose first printed line ends inside a value: the call site passes a literal with a line break in it
#: ("process returned\na non-zero exit code."), so the topic's own line never appears whole. For those the
#: entry is the first printed line as topic and call-site literal make it: (id, help file, topic, format,
#: versions). In 5.x state/base calls "While %s job …"; 3.x-4.1 (ORTE) called errmgr's "Primary job …"
#: (orte/mca/errmgr/default_hnp/errmgr_default_hnp.c at v4.1.6 and v3.1.6), a topic PRRTE keeps unused.
_COMPOSED: list[tuple[str, str, str, str, list[str]]] = [
    ("openmpi.state-base.normal-termination-but-process", f"{PRRTE_HELP}/help-state-base.txt",
     "normal-termination-but", "While %s job %s terminated normally, %d process returned", []),
    ("openmpi.state-base.normal-termination-but-processes", f"{PRRTE_HELP}/help-state-base.txt",
     "normal-termination-but", "While %s job %s terminated normally, %d processes returned", []),
    ("openmpi.errmgr-base.normal-termination-but-process", f"{PRRTE_HELP}/help-errmgr-base.txt",
     "normal-termination-but", "%s job %s terminated normally, but %d process returned", ["3.0", "4.1"]),
    ("openmpi.errmgr-base.normal-termination-but-processes", f"{PRRTE_HELP}/help-errmgr-base.txt",
     "normal-termination-but", "%s job %s terminated normally, but %d processes returned", ["3.0", "4.1"]),
]

_PRINTF = re.compile(r"%(?:%|[-+ #0']*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcsp])")
MIN_FIXED = 12


def printf_text(fmt: str) -> str:
    out: list[str] = []
    pos = 0
    for m in _PRINTF.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        out.append("%" if m.group() == "%%" else "{}")
        pos = m.end()
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def _fixed(line: str) -> int:
    return len(_PRINTF.sub("", line).strip())


def _topics(text: str) -> list[tuple[str, int, list[tuple[int, str]]]]:
    """(topic, its line, [(line number, line)]) of a help file."""
    out: list[tuple[str, int, list[tuple[int, str]]]] = []
    for no, line in enumerate(text.split("\n"), 1):
        m = re.match(r"^\[([^\]]+)\]\s*$", line)
        if m:
            out.append((m.group(1), no, []))
        elif out and not line.startswith("#"):
            out[-1][2].append((no, line.rstrip()))
    return out


def _kebab(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def extract(root: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(entry: dict[str, Any]) -> None:
        base, n = entry["id"], 2
        while entry["id"] in seen:
            entry["id"] = f"{base}-{n}"
            n += 1
        seen.add(entry["id"])
        out.append(entry)
        for old, first, last in _OLDER.get(base, []):
            add({**entry, "id": f"{base}@{last}", "format": old, "text": printf_text(old), "versions": [first, last]})

    for rel, area in _HELP:
        topics = _topics((root / rel).read_text(errors="replace"))
        if area in _FIRST_ERROR_TOPIC:
            names = [t[0] for t in topics]
            topics = topics[names.index(_FIRST_ERROR_TOPIC[area]):]
        for topic, _line, lines in topics:
            if topic in _NOT_MESSAGES:
                continue
            lead = next(((no, ln.strip()) for no, ln in lines if _fixed(ln) >= MIN_FIXED), None)
            if lead is None:  # a topic of only values or very short words: nothing a line matcher could find
                continue
            name = topic.split(":", 1)[1] if ":" in topic else topic  # "prun:proc-aborted" -> "proc-aborted"
            add({"id": f"openmpi.{area}.{_kebab(name)}", "format": lead[1], "text": printf_text(lead[1]),
                 "where": f"{rel}:{lead[0]}", "level": "show_help"})
    for ident, rel, topic_name, fmt, versions in _COMPOSED:
        found = [t for t in _topics((root / rel).read_text(errors="replace")) if t[0] == topic_name]
        if not found:
            raise SystemExit(f"openmpi: no topic {topic_name!r} in {rel}")
        lead = next(no for no, ln in found[0][2] if ln.strip())
        entry = {"id": ident, "format": fmt, "text": printf_text(fmt), "where": f"{rel}:{lead}", "level": "show_help"}
        add({**entry, "versions": versions} if versions else entry)
    for ident, rel, literal, level in _CODE:
        src = (root / rel).read_text(errors="replace")
        i = src.find(literal.replace("\\", "\\\\"))
        if i < 0:
            raise SystemExit(f"openmpi: {literal!r} not in {rel}")
        add({"id": ident, "format": literal, "text": printf_text(literal),
             "where": f"{rel}:{src.count(chr(10), 0, i) + 1}", "level": level})
    return out


if __name__ == "__main__":
    import json
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
