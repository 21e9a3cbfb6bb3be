"""``journalctl`` text output, and the line reader it shares with classic syslog files.

Shapes (``-o`` modes): ``short`` ``Mar 11 10:37:00 host kernel: msg`` and ``short-precise``
(``.123456``) — no year, local time, month names in the user's locale (``kwi``, ``фев``,
``Mär``, ``févr.``, ``jan.``, lower case) and the host missing with ``--no-hostname``;
``short-iso`` / ``short-iso-precise`` (``2024-03-11T10:37:00+0100``); ``short-monotonic``
(``[ 1234.567890] host kernel: msg``); ``short-unix`` (``1710149820.123456 host kernel:``);
and excerpts whose stamps and host were cut away (``kernel: NVRM: ...``).
``-- Boot <id> --`` markers become ``boot`` events; ``-- Logs begin at … --`` headers give the
year of the first line; continuation lines indented to the message column are joined; lines
cut by the pager end in ``>`` (attrs ``truncated=True``; the ``>`` is not kept as text).

The same reader parses syslog files (parsers/syslog.py adds rsyslog's ``#012`` escapes, the
kernel's own uptime stamp inside the message, grep's ``/var/log/syslog:`` prefixes). Which of
the two kinds a file is gets decided by :func:`flavour` from features only one of them has.
"""

from __future__ import annotations

from collections.abc import Callable

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import Head, KernelLogParser, is_noise, strip_ansi

from forensics.clock import NS, month_number, parse_fraction_ns, parse_iso, uptime_ns
from forensics.events import TsSource
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER", "SyslogReader", "flavour", "flavour_detector"]

_SHORT_RE = lazy_compile(
    r"^([^\W\d_]{2,}\.?|\d{1,2}月)\s{1,2}(\d{1,2})\s+(\d{1,2}):(\d\d):(\d\d)(?:\.(\d{1,9}))?\s+"
)
_ISO_RE = lazy_compile(r"^(\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)\s+")
_MONO_RE = lazy_compile(r"^\[\s*(\d+\.\d+)\]\s+")
_UNIX_RE = lazy_compile(r"^(\d{9,11})(?:\.(\d{1,9}))?\s+")
# an identifier never holds ":" (that keeps "nvidia 0000:01:00.0: msg" from reading as host + ident)
_NO_HOST_RE = lazy_compile(r"^([^\s\[\]:]+)(?:\[(\d+)\])?:(?:\s|$)")
_HOST_IDENT_RE = lazy_compile(r"^(\S+)\s+([^\s\[\]:]+)(?:\[(\d+)\])?:(?:\s|$)")
_BOOT_RE = lazy_compile(r"^-- (Boot ([0-9a-f]{32})|Reboot) --\s*$")
_HEADER_YEAR_RE = lazy_compile(r"^-- (?:Logs begin at|Journal begins at) \S*\s*(\d{4})-\d\d-\d\d")
_KERNEL_STAMP_RE = lazy_compile(r"^\[\s*(\d+\.\d+)\]\s?")
_GREP_PREFIX_RE = lazy_compile(
    r"^(?:/[\w./-]*|[\w.-]*(?:syslog|messages|kern\.log|daemon\.log|\.log)[\w.-]*)(?:\.\d+)?(?:\.gz)?:(?:\d+:)?"
    r"(?=[^\W\d_]{3}\.?\s{1,2}\d|\d{4}-\d\d-\d\dT)"
)
_RSYSLOG_ESC_RE = lazy_compile(r"#([0-3][0-7]{2})")
_KERNEL_IDENTS = ("kernel",)


def _unescape_rsyslog(msg: str) -> str:
    """rsyslog writes control characters as ``#ooo`` octal: ``#012`` newline, ``#011`` tab."""
    return _RSYSLOG_ESC_RE.sub(lambda m: chr(int(m.group(1), 8)) if int(m.group(1), 8) < 32 else m.group(0), msg)


def _pager_truncated(msg: str) -> bool:
    """``less -S`` cuts long lines at the terminal width and shows ``>``; a real message ending
    in ``>`` closes a ``<…>`` token (``name=<unknown>``, ``<TASK>``) or an arrow (``->``)."""
    if not msg.endswith(">") or msg.endswith(("->", "=>", ">>")):
        return False
    last = msg.rsplit(None, 1)[-1]
    return "<" not in last


class SyslogReader:
    """Reads one line of journalctl text or syslog. ``stampless`` accepts ``kernel: msg``."""

    sparse_ok = True

    def __init__(self, ctx: ParseContext, stampless: bool = False) -> None:
        self.tz = ctx.tz
        self.stampless = stampless
        #: year of the first entry, from a "-- Logs begin at" header
        self.first_year: int | None = None
        self._seen_head = False

    def head(self, text: str) -> Head | None:
        if text.startswith("--"):
            return self._marker(text)
        head = self._stamp(text)
        if head is None:
            gm = _GREP_PREFIX_RE.match(text)
            if gm:
                head = self._stamp(text[gm.end():])
                if head is not None:
                    head.attrs["grep_prefix"] = text[: gm.end()].rstrip(":0123456789") or text[: gm.end()]
                    head.col += gm.end()
        if head is None:
            if not self.stampless or text[:1] in (" ", "\t"):
                return None
            head = Head(msg="", col=0)
            if not self._rest(head, text, 0, require_kernel=True):
                return None
        self._seen_head = True
        return head

    def _marker(self, text: str) -> Head | None:
        m = _BOOT_RE.match(text.strip())
        if m:
            head = Head(msg=m.group(1), kind="boot")
            if m.group(2):
                head.attrs["boot_id"] = m.group(2)
            return head
        if not self._seen_head:
            ym = _HEADER_YEAR_RE.match(text)
            if ym:
                self.first_year = int(ym.group(1))
        return None

    def _stamp(self, text: str) -> Head | None:
        c = text[:1]
        if not c:
            return None
        if c.isdigit():
            m = _ISO_RE.match(text)
            if m:
                if "," in m.group(1):
                    return None  # a comma decimal is dmesg --time-format iso
                head = Head(msg="")
                placed = parse_iso(m.group(1), self.tz)
                if placed is not None:
                    head.ts, head.ts_source = placed
                return head if self._rest(head, text, m.end(), require_ident=True) else None
            m = _UNIX_RE.match(text)
            if m:
                head = Head(msg="", ts=int(m.group(1)) * NS + parse_fraction_ns(m.group(2) or ""),
                            ts_source=TsSource.EXACT)
                return head if self._rest(head, text, m.end(), require_ident=True) else None
            if "月" not in text[:4]:
                return None
        if c == "[":
            m = _MONO_RE.match(text)
            if m:
                head = Head(msg="", uptime_ns=uptime_ns(m.group(1)))
                return head if self._rest(head, text, m.end(), require_host=True, require_ident=True) else None
            return None
        m = _SHORT_RE.match(text)
        if not m:
            return None
        month = month_number(m.group(1))
        if month is None:
            return None
        day, hh, mi, ss = int(m.group(2)), int(m.group(3)), int(m.group(4)), int(m.group(5))
        head = Head(msg="", wall=(month, day, hh, mi, ss, parse_fraction_ns(m.group(6) or "")))
        if not m.group(1).isascii() or m.group(1)[:1].islower():
            head.attrs["_locale_month"] = m.group(1)
        return head if self._rest(head, text, m.end()) else None

    def _rest(self, head: Head, text: str, pos: int, require_host: bool = False,
              require_kernel: bool = False, require_ident: bool = False) -> bool:
        """Host, identifier[pid] and message after the stamp."""
        rest = text[pos:]
        m = None if require_host else _NO_HOST_RE.match(rest)
        if m and not (require_kernel and m.group(1) not in _KERNEL_IDENTS):
            head.ident, pid = m.group(1), m.group(2)
        else:
            m = _HOST_IDENT_RE.match(rest)
            if m is None or (require_kernel and m.group(2) not in _KERNEL_IDENTS):
                if require_host or require_kernel or require_ident:
                    return False
                head.msg, head.col = rest, pos  # no identifier: keep the whole rest as the message
                return True
            head.host, head.ident, pid = m.group(1), m.group(2), m.group(3)
        if pid:
            head.pid = int(pid)
        msg = rest[m.end():]
        col = len(text) - len(msg)
        if head.ident in _KERNEL_IDENTS:
            km = _KERNEL_STAMP_RE.match(msg)
            if km:  # rsyslog/imklog keeps the kernel's own uptime stamp in the message
                head.uptime_ns = uptime_ns(km.group(1))
                msg = msg[km.end():]
                col += km.end()
        if "#0" in msg:
            msg = _unescape_rsyslog(msg)
        if _pager_truncated(msg):
            msg = msg[:-1]
            head.attrs["truncated"] = True
        head.msg, head.col = msg, col
        return True


# -- which kind is it ----------------------------------------------------------------------------
def flavour(head: list[str]) -> tuple[str, float]:
    """``("journalctl" | "syslog", share of lines in either shape)`` for a file's first lines.

    journalctl-only: ``-- Boot``/``-- Logs begin`` markers, indented continuation lines, locale
    or lower-case month names, no host field, ``+0100`` offsets or whole-second ISO stamps,
    monotonic/unix stamps, stamp-less ``kernel:`` excerpts. syslog-only: rsyslog ``#012``
    escapes, the kernel's ``[ 123.456]`` stamp inside the message, grep file prefixes, and
    RSYSLOG_FileFormat ISO stamps (fraction plus ``+hh:mm``). Ties go to journalctl, the more
    common paste.
    """
    ctx = ParseContext(path="", source="")
    reader = SyslogReader(ctx)
    stampless = SyslogReader(ctx, stampless=True)
    journal = syslog = 0
    matched_stamped = matched_stampless = 0
    head = [strip_ansi(t) for t in head]
    for text in head:
        if text.startswith(("-- Boot", "-- Logs begin", "-- Journal begins", "-- Reboot", "-- No entries")):
            journal += 2
            continue
        if text[:1] in (" ", "\t") and text.strip():
            journal += 1
            continue
        if is_noise(text):
            continue
        h = reader.head(text)
        if h is None:
            if stampless.head(text) is not None:
                matched_stampless += 1
            continue
        matched_stamped += 1
        if "#012" in text or "#011" in text:
            syslog += 2
        if h.uptime_ns is not None and h.ident in _KERNEL_IDENTS and not text.startswith("["):
            syslog += 2
        if "grep_prefix" in h.attrs:
            syslog += 2
        if "_locale_month" in h.attrs or (h.wall is not None and h.host is None and h.ident is not None):
            journal += 1
        if text[:1] == "[" or _UNIX_RE.match(text):
            journal += 1
        iso = _ISO_RE.match(text)
        if iso:
            stamp = iso.group(1)
            if ("." in stamp or "," in stamp) and stamp[-3:-2] == ":":
                syslog += 1
            else:
                journal += 1
    total = sum(1 for t in head if t.strip() and not is_noise(t) and t[:1] not in (" ", "\t")
                and not t.startswith("--"))
    if total == 0:
        return "journalctl", 0.0
    if matched_stamped == 0:
        return "journalctl", 0.7 * matched_stampless / total
    kind = "syslog" if syslog > journal else "journalctl"
    return kind, (matched_stamped + matched_stampless) / total


def flavour_detector(wanted: str) -> Callable[[list[str]], float]:
    """``detect(head)`` for one flavour (``journalctl`` or ``syslog``) of the shared line shape."""

    def detect(head: list[str]) -> float:
        kind, frac = flavour(head)
        return 0.88 * frac if kind == wanted and frac >= 0.3 else 0.0

    return detect


def _reader(ctx: ParseContext) -> SyslogReader:
    return SyslogReader(ctx, stampless=True)


PARSER = KernelLogParser(
    name="journalctl",
    samples=(
        # NVIDIA/nvidia-docker#182: API mismatch, continuation lines indented to the message column
        "Aug 26 14:08:07 nyasara-linux kernel: NVRM: API mismatch: the client has the version 367.44, but\n"
        "                                      NVRM: this kernel module has the version 367.35.  Please\n"
        "                                      NVRM: make sure that this kernel module and all NVIDIA driver\n"
        "                                      NVRM: components have the same version.\n",
        # ggml-org/llama.cpp#27102: lower-case month, no hostname
        "aug 16 23:01:35 kernel: NVRM: krcWatchdog_IMPL: RC watchdog: GPU is probably locked!  Notify Timeout "
        "Seconds: 7\n"
        "aug 16 23:01:35 kernel: NVRM: Xid (PCI:0000:01:00): 8, pid=709378, name=llama-server, channel 0x00000027\n",
        # GSConnect#1052: Russian month names, no hostname
        "фев 12 00:48:02 kernel: pcieport 0000:00:1c.5: AER: Corrected error received: 0000:00:1c.5\n"
        "фев 12 00:48:02 kernel: pcieport 0000:00:1c.5: AER: PCIe Bus Error: severity=Corrected, type=Physical "
        "Layer, (Receiver ID)\n",
        # NVIDIA/open-gpu-kernel-modules#1045: a line cut by the pager, ending in ">"
        "Jun 12 16:31:50 fedora-box kernel: NVRM: GPU0 nvCheckOkFailedNoLog: Check failed: Reset required "
        "[NV_ERR_RESET_REQUIRED] (0x00000062) returned from _gpushareddataSendDataPollRpc(pGpu, polle>\n",
        # NVIDIA/open-gpu-kernel-modules#1150: stamps and host already stripped by the reporter
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n"
        "kernel: NVRM: Xid (PCI:0000:ed:00): 45, pid=1818992, name=python3, Ch 0000000c caused by previous Xid 145\n",
    ),
    reader=_reader,
    detect=flavour_detector("journalctl"),
    tested_with={"NVIDIA driver": ("590.48.01", "610.57.04")},  # the case notes of ogkm1150 and llamacpp27102
)
