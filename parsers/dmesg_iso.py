"""``dmesg --time-format iso``: ``2024-04-29T14:55:41,678628+02:00 msg``.

ISO 8601 with a **comma** as decimal separator and the UTC offset, so the stamps are exact.
Also accepts the ``-x`` decode prefix (``kern  :warn  : 2025-01-21T04:41:44,283302+00:00 ...``).
A ``.`` decimal with a ``host ident:`` after the stamp is rsyslog's format (parsers/syslog.py).
"""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import Head, KernelLogParser, share_detector, stamped_head
from forensics.parsers.dmesg import decode_prefix

from forensics.clock import parse_iso
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_ISO_RE = lazy_compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d([,.])\d{1,9}(?:Z|[+-]\d\d:?\d\d))\s?")
_SYSLOG_AFTER_RE = lazy_compile(r"^\S+ [^\s\[\]:]+(?:\[\d+\])?: ")


class IsoReader:
    sparse_ok = True

    def __init__(self, ctx: ParseContext) -> None:
        self.tz = ctx.tz

    def head(self, text: str) -> Head | None:
        rest, facility, level = decode_prefix(text) if not text[:1].isdigit() else (text, None, None)
        m = _ISO_RE.match(rest)
        if not m:
            return None
        return stamped_head(text, rest[m.end():], parse_iso(m.group(1), self.tz), level, facility)


def _match(text: str) -> bool:
    rest, facility, _ = decode_prefix(text)
    m = _ISO_RE.match(rest)
    if not m:
        return False
    # rsyslog's high-precision format has a '.' and "host ident:" after the stamp
    return m.group(2) == "," or facility is not None or not _SYSLOG_AFTER_RE.match(rest[m.end():])


PARSER = KernelLogParser(
    name="dmesg-iso",
    samples=(
        # NERSC ERT#7797: an OOM kill reproduced and captured with --time-format iso (prompt included)
        "[havb@be-lx139213:~]$ dmesg --time-format iso  | grep oom\n"
        "2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, "
        "oom_score_adj=0\n"
        "2024-04-29T14:55:41,679685+02:00 oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
        "global_oom,task_memcg=/user.slice/user-21417.slice/user@21417.service,task=perl,pid=1440763,uid=21417\n"
        "2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, "
        "anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0\n",
        # leptonai/gpud testdata: Xid 48 then 63 on one GPU
        "2024-11-15T12:02:03,470068+00:00 NVRM: Xid (PCI:0000:19:00): 48, pid='<unknown>', name=<unknown>, An "
        "uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x12bac1c3e0 "
        "partition 2, subpartition 1.\n"
        "2024-11-15T12:02:03,498753+00:00 NVRM: Xid (PCI:0000:19:00): 63, pid='<unknown>', name=<unknown>, Row "
        "Remapper: New row (0x00000012bac1c3e0) marked for remapping, reset gpu to activate.\n",
        # leptonai/gpud peermem matcher tests: dmesg -x decode prefix with an ISO stamp
        "kern  :warn  : 2025-01-21T04:41:44,285060+00:00 nvidia-peermem nv_get_p2p_free_callback:127 ERROR detected "
        "invalid context, skipping further processing\n",
    ),
    reader=IsoReader,
    detect=share_detector(_match),
)
