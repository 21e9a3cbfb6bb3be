"""``dmesg`` with its default raw stamps: ``[ 1234.567890] msg`` (seconds since boot).

Also read: the ``dmesg -r`` priority prefix ``<4>[...]``, the ``-x`` decode prefix
``kern  :warn  : ``, printk caller ids ``[T1234]``, a ctime stamp printed after the raw one
(``--time-format raw --time-format ctime``), ``-d`` deltas inside the brackets, and
``dmesg -t`` / grep output with no stamps at all (bare kernel messages, one per line).
Stamps are boot-relative: events keep ``uptime_ns`` and get ``ts`` when the boot time is
known (``ctx.boot_time_ns``) or later from a boot anchor (forensics/timeline/merge.py).
"""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import Head, KernelLogParser, head_fraction, is_noise

from forensics.clock import NS, parse_ctime
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["DECODE_PREFIX_RE", "FACILITIES", "PARSER", "decode_prefix"]

FACILITIES = ("kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp",
              "res0", "res1", "res2", "res3", "local0", "local1", "local2", "local3", "local4", "local5", "local6",
              "local7")
_LEVELS = {"emerg": 0, "alert": 1, "crit": 2, "err": 3, "warn": 4, "notice": 5, "info": 6, "debug": 7}

#: ``dmesg -x``: facility and level padded to 6 characters, each followed by ``:``
DECODE_PREFIX_RE = lazy_compile(
    r"^(kern|user|mail|daemon|auth|syslog|lpr|news|uucp|cron|authpriv|ftp|res[0-3]|local[0-7])\s*:"
    r"(emerg|alert|crit|err|warn|notice|info|debug)\s*: ?"
)
_RAW_RE = lazy_compile(r"^(?:<(\d{1,3})>)?\[\s*(\d+)\.(\d+)(?:\s*<\s*[\d.]+>)?\]\s?")
_CALLER_RE = lazy_compile(r"^\[\s*([TC]\d+)\]\s?")
_CTIME_INSIDE_RE = lazy_compile(r"^\[(\S+\s+\S+\s+\d{1,2}\s+\d{1,2}:\d\d:\d\d\s+\d{4})\]\s?")
_JOURNAL_MONOTONIC_RE = lazy_compile(r"^\[\s*\d+\.\d+\] \S+ [^\s\[\]:]+(?:\[\d+\])?: ")
#: first words of kernel messages, to recognise stamp-less (``dmesg -t``, grep) output
_KERNEL_START_RE = lazy_compile(
    r"^(?:NVRM: |nvidia|pcieport |pci |AER: |DMAR: |AMD-Vi: |Out of memory|oom-kill:|oom_reaper:|"
    r"Memory cgroup out of memory|INFO: task |watchdog: |rcu: |misc dxg|dxgk:|hv_\w+: |Linux version |"
    r"Call Trace:|BUG: |Oops: |Kernel panic|\w[\w-]* [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.\d: |"
    r"\w+\[\d+\]: segfault at |EXT4-fs |xhci_hcd |usb \d|audit: |IPv6: |systemd\[1\]: |input: |\[drm\] )"
)


def decode_prefix(text: str) -> tuple[str, str | None, int | None]:
    """Strip a ``dmesg -x`` prefix: (rest, facility, level)."""
    m = DECODE_PREFIX_RE.match(text)
    if not m:
        return text, None, None
    return text[m.end():], m.group(1), _LEVELS[m.group(2)]


class RawReader:
    sparse_ok = True

    def __init__(self, ctx: ParseContext) -> None:
        self.tz = ctx.tz

    def head(self, text: str) -> Head | None:
        first = text[:1]
        if first == "[":
            rest, facility, level = text, None, None
        elif first in ("<", "k", "u", "d", "a", "s", "l", "m", "n", "c", "f", "r"):
            rest, facility, level = decode_prefix(text)
        else:
            return None
        m = _RAW_RE.match(rest)
        if not m:
            return None
        if m.group(1) is not None:
            pri = int(m.group(1))
            level = pri & 7
            fac_no = pri >> 3
            facility = FACILITIES[fac_no] if fac_no < len(FACILITIES) else str(fac_no)
        head = Head(msg="", uptime_ns=int(m.group(2)) * NS + int(m.group(3)[:9].ljust(9, "0")), level=level,
                    facility=facility)
        msg = rest[m.end():]
        if msg[:1] == "[":
            cm = _CALLER_RE.match(msg)
            if cm:
                head.attrs["caller"] = cm.group(1)
                msg = msg[cm.end():]
            tm = _CTIME_INSIDE_RE.match(msg)
            if tm:
                placed = parse_ctime(tm.group(1), self.tz)
                if placed is not None:
                    head.ts, head.ts_source = placed
                    msg = msg[tm.end():]
        head.msg = msg
        head.col = len(text) - len(msg)
        return head


def _raw_match(text: str) -> bool:
    return _RAW_RE.match(decode_prefix(text)[0]) is not None


def _detect(head: list[str]) -> float:
    raw = head_fraction(head, _raw_match)
    if raw >= 0.3:
        if head_fraction(head, lambda t: _JOURNAL_MONOTONIC_RE.match(t) is not None and " kernel: " in t) >= 0.5:
            return 0.3 * raw  # journalctl -o short-monotonic: the journalctl parser claims it
        return 0.9 * raw
    bare = head_fraction(head, lambda t: _KERNEL_START_RE.match(decode_prefix(t)[0]) is not None)
    return 0.55 * bare if bare >= 0.5 else 0.0


def _is_bare(doc: TextDocument) -> bool:
    """No raw stamp in the first lines: ``dmesg -t`` or grep output, one message per line."""
    return not any(_raw_match(t) for t in doc.head(40) if not is_noise(t))


PARSER = KernelLogParser(
    name="dmesg",
    samples=(
        # nvsentinel155: the multi-line "fallen off the bus" record (NVIDIA/NVSentinel#155)
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n",
        # deepseek-ai/DeepSeek-VL2#90: the global OOM killer
        "[26002.108918] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=user.slice,mems_allowed=0,"
        "global_oom,task_memcg=/user.slice/user-1000.slice,task=python,pid=576419,uid=1000\n"
        "[26002.109061] Out of memory: Killed process 576419 (python) total-vm:78521468kB, anon-rss:54398260kB, "
        "file-rss:2628kB, shmem-rss:0kB, UID:1000 pgtables:119448kB oom_score_adj:0\n",
        # util-linux/util-linux#614: dmesg -r, syslog priority prefix
        "<5>[    0.000000] Linux version 4.9.84-1 (builder@ymir-builder) (gcc version 7.3.0 20180125 (release) "
        "(PLD-Linux) ) #1 SMP Sun Feb 25 23:55:04 CET 2018\n"
        "<6>[    0.000000] Command line: auto BOOT_IMAGE=pld4.9.84-1 ro root=902 console=tty0 console=ttyS0,115200n81 "
        "panic=60 selinux=0 nmi_watchdog=1 elevator=deadline\n"
        "<6>[    0.000000] x86/fpu: Legacy x87 FPU detected.\n",
        # stas00/ml-engineering: an Xid line shown without any stamp (grep / dmesg -t)
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to "
        "activate.\n",
    ),
    reader=RawReader,
    detect=_detect,
    bare=_is_bare,
    # NVRM's load lines in neg-k8sdp480, nvsentinel155 and ogkm1230
    tested_with={"NVIDIA driver": ("525.147.05", "570.158.01", "595.71.05")},
)
