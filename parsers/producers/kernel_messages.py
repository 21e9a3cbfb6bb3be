"""What a kernel message is about, from its text alone: the classifier every kernel-log
format shares (dmesg, /dev/kmsg, journalctl, syslog, talosctl).

:func:`classify` turns one message (a multi-line record flattened to one line) into a
:class:`KernelInfo`: the Event ``kind`` (``xid``, ``nvrm``, ``aer``, ``pcie-link``, ``iommu``,
``oom-killer``, ``hung-task``, ``dxg``, ``boot`` or plain ``kernel``), a severity, the GPU
(normalized PCI address), the pid the message is about, and parsed attrs. Cheap substring
tests pick the family before any regex runs. Message shapes follow real logs (see
``/work/shared/knowledge/catalog-driver.md`` and the corpus cases cited there).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from forensics.events import Severity
from forensics.lazy_re import lazy_compile
from forensics.pci import find_pci, normalize_pci, pci_from_aer_id

__all__ = ["LEVEL_NAMES", "TRIGGER_LITERALS", "KernelInfo", "classify", "level_severity"]

#: syslog level numbers as dmesg/journalctl/talos name them
LEVEL_NAMES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
_LEVEL_ALIASES = {"warn": 4, "error": 3, "panic": 0, "critical": 2, "information": 6}
_LEVEL_SEVERITY = (Severity.CRITICAL, Severity.CRITICAL, Severity.CRITICAL, Severity.ERROR, Severity.WARNING,
                   Severity.INFO, Severity.INFO, Severity.DEBUG)

#: literals that make a line of a huge kernel log worth reading (see parsers/common/kernlog.py)
TRIGGER_LITERALS: tuple[bytes, ...] = (
    b"NVRM", b"Xid", b"nvidia", b"AER", b"PCIe Bus Error", b"DPC", b"pcieport", b"limited by", b"DMAR", b"[10de:",
    b"AMD-Vi", b"IO_PAGE_FAULT", b"smmu", b"oom", b"Out of memory", b"Killed process", b"blocked for more than",
    b"soft lockup", b"hard LOCKUP", b"rcu_", b"dxg", b"Oops", b"BUG:", b"Kernel panic", b"segfault",
    b"Linux version", b"-- Boot", b"-- Reboot", b"general protection", b"Call Trace",
)


@dataclass(slots=True)
class KernelInfo:
    kind: str = "kernel"
    severity: Severity = Severity.INFO
    gpu: str | None = None
    pid: int | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    #: True when the classifier had no opinion (plain kernel chatter)
    generic: bool = True


def level_severity(level: int | str | None) -> Severity | None:
    """Severity for a syslog level given as number (``4``) or name (``warn``, ``warning``)."""
    if level is None:
        return None
    if isinstance(level, str):
        name = level.strip().lower()
        if name.isascii() and name.isdigit():
            level = int(name)
        elif name in LEVEL_NAMES:
            level = LEVEL_NAMES.index(name)
        elif name in _LEVEL_ALIASES:
            level = _LEVEL_ALIASES[name]
        else:
            return None
    return _LEVEL_SEVERITY[level] if 0 <= level <= 7 else None


# -- Xid ---------------------------------------------------------------------------------------
_XID_RE = lazy_compile(
    r"\b(S?)Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\):\s*(\d+)\b,?\s*(.*)"
)
_XID_PID_RE = lazy_compile(r"^pid=(?:'?<unknown>'?|(\d+))\s*,?\s*")
_XID_NAME_RE = lazy_compile(r"^name=([^,]*?)\s*(?:,\s*|$)")
# Xids whose presence alone means the GPU or node needs attention (NVIDIA catalog buckets)
_XID_CRITICAL = frozenset({48, 62, 64, 74, 79, 92, 95, 119, 120, 136, 140, 143, 144, 145, 146, 147, 148, 149, 150,
                           154, 155, 158, 167})
_XID_NOTICE = frozenset({43, 45, 63, 94})


def _xid(m: re.Match[str]) -> KernelInfo:
    is_sxid, pci_raw, number, rest = m.groups()
    pci = normalize_pci(pci_raw)
    attrs: dict[str, Any] = {"sxid" if is_sxid else "xid": int(number), "pci": pci}
    pid: int | None = None
    pm = _XID_PID_RE.match(rest)
    if pm:
        pid = int(pm.group(1)) if pm.group(1) else None
        rest = rest[pm.end():]
    nm = _XID_NAME_RE.match(rest)
    if nm:
        name = nm.group(1).strip()
        if name and name not in ("<unknown>", "'<unknown>'"):
            attrs["process"] = name
        rest = rest[nm.end():]
    if pid is not None:
        attrs["pid"] = pid
    attrs["text"] = rest.strip()
    if is_sxid:
        return KernelInfo("nvrm", Severity.ERROR, None, None, attrs, generic=False)
    xid = int(number)
    sev = Severity.CRITICAL if xid in _XID_CRITICAL else Severity.WARNING if xid in _XID_NOTICE else Severity.ERROR
    return KernelInfo("xid", sev, pci, pid, attrs, generic=False)


# -- other NVIDIA driver lines -----------------------------------------------------------------
_UUID_RE = lazy_compile(r"\bGPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_API_MISMATCH_RE = lazy_compile(r"API mismatch: the client(?: '([^']*)' \(pid (\d+)\))?.*?has the version ([\w.]+),"
                                r".*?kernel module has the version ([\w.]+)")
_NVIDIA_PREFIXES = ("NVRM", "nvidia", "[drm] [nvidia-drm]", "nvidia-")
_NVRM_TOPICS: tuple[tuple[str, str, Severity], ...] = (
    # (substring, topic, severity) — first match wins
    ("fallen off the bus", "fallen-off-bus", Severity.CRITICAL),
    ("lost from the bus", "fallen-off-bus", Severity.CRITICAL),
    ("GPU is lost", "fallen-off-bus", Severity.CRITICAL),
    ("RmInitAdapter failed", "rm-init-failed", Severity.ERROR),
    ("rm_init_adapter failed", "rm-init-failed", Severity.ERROR),
    ("Cannot initialize GSP firmware", "rm-init-failed", Severity.ERROR),
    ("GFW_BOOT", "rm-init-failed", Severity.ERROR),
    ("GFW boot", "rm-init-failed", Severity.ERROR),
    ("probe routine failed", "probe-failed", Severity.ERROR),
    ("API mismatch", "api-mismatch", Severity.ERROR),
    ("Timeout waiting for RPC from GSP", "gsp-timeout", Severity.ERROR),
    ("waiting for RPC response", "gsp-timeout", Severity.ERROR),
    ("GSP Timeout", "gsp-timeout", Severity.ERROR),
    ("_kgspLogXid119", "gsp-timeout", Severity.ERROR),
    ("Rate limiting GSP RPC error", "gsp-timeout", Severity.ERROR),
    ("heartbeat", "gsp-timeout", Severity.ERROR),
    ("rpcSendMessage failed", "gsp-rpc-failed", Severity.ERROR),
    ("GspRmFree failed", "gsp-rpc-failed", Severity.ERROR),
    ("_issueRpcAndWait", "gsp-rpc-failed", Severity.ERROR),
    ("GSP_RM_CONTROL", "gsp-rpc-history", Severity.WARNING),
    ("PMU has halted", "gsp-event", Severity.ERROR),
    ("RESET_REQUIRED", "reset-required", Severity.ERROR),
    ("FULLCHIP_RESET", "reset-required", Severity.ERROR),
    ("Assertion failed", "assertion", Severity.ERROR),
    ("Check failed", "assertion", Severity.ERROR),
    ("RC watchdog", "rc-watchdog", Severity.ERROR),
    ("invalid context", "peermem-invalid-context", Severity.WARNING),
    ("GPU at PCI", "gpu-info", Severity.INFO),
    ("Board Serial Number", "gpu-info", Severity.INFO),
    ("loading NVIDIA", "driver-load", Severity.INFO),
    ("Loading NVIDIA", "driver-load", Severity.INFO),
    ("taints kernel", "driver-load", Severity.INFO),
    ("tainting kernel", "driver-load", Severity.INFO),
)
_ERROR_WORDS = ("fail", "Fail", "FAIL", "error", "Error", "ERROR", "timeout", "Timeout", "exception", "Exception")


def _nvrm(text: str) -> KernelInfo:
    attrs: dict[str, Any] = {}
    sev = Severity.INFO
    for needle, topic, topic_sev in _NVRM_TOPICS:
        if needle in text:
            attrs["topic"] = topic
            sev = topic_sev
            break
    else:
        if any(w in text for w in _ERROR_WORDS):
            sev = Severity.ERROR
    pci = find_pci(text)
    if pci:
        attrs["pci"] = pci
    um = _UUID_RE.search(text)
    if um:
        attrs["uuid"] = um.group(0)
    if attrs.get("topic") == "api-mismatch":
        am = _API_MISMATCH_RE.search(text)
        if am:
            if am.group(1):
                attrs["process"] = am.group(1)
            if am.group(2):
                attrs["pid"] = int(am.group(2))
            attrs["client_version"] = am.group(3).rstrip(".")
            attrs["kernel_version"] = am.group(4).rstrip(".")
    gi = re.match(r"NVRM: GPU(\d+) ", text)
    if gi:
        attrs["gpu_instance"] = int(gi.group(1))
    return KernelInfo("nvrm", sev, pci, attrs.get("pid"), attrs, generic=False)


# -- PCIe AER / DPC / link ---------------------------------------------------------------------
_DEV_PREFIX_RE = lazy_compile(r"^(\S+) ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]):?\s")
_AER_SOURCE_RE = lazy_compile(r"(?:received(?: from)?:?\s*|id=)([0-9a-fA-F:.]{4,12})")
_AER_BIT_RE = lazy_compile(r"\[\s*(\d+)\]\s+([A-Za-z][\w ]*?)\s*(?:\((First)\))?\s*$")
_AER_STATUS_RE = lazy_compile(r"device \[([0-9a-f]{4}:[0-9a-f]{4})\] error status/mask=([0-9a-f]+)/([0-9a-f]+)")
_AER_TYPE_RE = lazy_compile(r"type=([^,]+)")


def _aer_severity(text: str) -> str | None:
    if "Non-Fatal" in text or "NonFatal" in text or "Non-fatal" in text:
        return "uncorrected"
    if "Fatal" in text or "Surprise Down" in text or "containment event" in text or "DPC:" in text:
        return "fatal"
    if "Corrected" in text or "Correctable" in text or "corrected" in text:
        return "corrected"
    if "Uncorrected" in text or "Uncorrectable" in text:
        return "uncorrected"
    return None


def _is_aer(text: str) -> bool:
    return ("AER" in text or "PCIe Bus Error" in text or "DPC:" in text or "Surprise Down" in text
            or "error status/mask" in text or ("pcieport" in text and _AER_BIT_RE.search(text) is not None))


def _aer(text: str) -> KernelInfo:
    attrs: dict[str, Any] = {}
    dm = _DEV_PREFIX_RE.match(text)
    if dm:
        attrs["driver"] = dm.group(1)
        attrs["pci"] = dm.group(2)
    severity = _aer_severity(text)
    if severity:
        attrs["severity"] = severity
    sm = _AER_SOURCE_RE.search(text)
    if sm:
        raw = sm.group(1)
        src = normalize_pci(raw) if ":" in raw else pci_from_aer_id(raw)
        if src:
            attrs["source_pci"] = src
    tm = _AER_TYPE_RE.search(text)
    if tm:
        attrs["type"] = tm.group(1).strip()
    st = _AER_STATUS_RE.search(text)
    if st:
        attrs["device_id"], attrs["status"], attrs["mask"] = st.group(1), st.group(2), st.group(3)
    bm = _AER_BIT_RE.search(text)
    if bm and not st:
        attrs["error_bit"] = bm.group(2).strip()
        attrs["error_bit_no"] = int(bm.group(1))
    sev = {"fatal": Severity.CRITICAL, "uncorrected": Severity.ERROR}.get(severity or "", Severity.WARNING)
    gpu = attrs.get("pci") if attrs.get("driver") == "nvidia" else None
    return KernelInfo("aer", sev, gpu, None, attrs, generic=False)


_LINK_RE = lazy_compile(
    r"(?<![\d.])([\d.]+) Gb/s available PCIe bandwidth, limited by ([\d.]+) GT/s PCIe x(\d+) link at "
    r"([0-9a-f:.]+) \(capable of ([\d.]+) Gb/s with ([\d.]+) GT/s PCIe x(\d+) link\)"
)
_GEN_BY_SPEED = {"2.5": 1, "5.0": 2, "5": 2, "8.0": 3, "8": 3, "16.0": 4, "16": 4, "32.0": 5, "32": 5, "64.0": 6,
                 "64": 6}


def _pcie_link(text: str, m: re.Match[str]) -> KernelInfo:
    attrs: dict[str, Any] = {
        "bandwidth_gbps": float(m.group(1)),
        "speed_gts": float(m.group(2)),
        "width": int(m.group(3)),
        "limited_at": normalize_pci(m.group(4)) or m.group(4),
        "bandwidth_max_gbps": float(m.group(5)),
        "speed_max_gts": float(m.group(6)),
        "width_max": int(m.group(7)),
    }
    gen, gen_max = _GEN_BY_SPEED.get(m.group(2)), _GEN_BY_SPEED.get(m.group(6))
    if gen:
        attrs["gen"] = gen
    if gen_max:
        attrs["gen_max"] = gen_max
    narrow = attrs["width"] < attrs["width_max"]
    slow = attrs["speed_gts"] < attrs["speed_max_gts"]
    attrs["limited"] = "both" if narrow and slow else "width" if narrow else "speed" if slow else "none"
    attrs["device"] = "unknown"  # "gpu" / "other" once the file's enumeration lines say (mark_link_devices)
    dm = _DEV_PREFIX_RE.match(text)
    if dm:
        attrs["pci"] = dm.group(2)
        if dm.group(1) == "nvidia":
            attrs["device"] = "gpu"
    return KernelInfo("pcie-link", Severity.WARNING, None, None, attrs, generic=False)


#: ``pci 0000:01:00.0: [10de:2684] type 00 class 0x030000``: a function's vendor:device and class
_ENUM_RE = lazy_compile(r"\bpci ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]): \[([0-9a-f]{4}):[0-9a-f]{4}\] "
                        r"type [0-9a-f]{2} class 0x([0-9a-f]{6})")
_NV_DRIVER_RE = lazy_compile(r"\bnvidia ([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]):")


def mark_link_devices(events: list[Any]) -> list[Any]:
    """Say for each ``pcie-link`` event whether its device is a GPU (``device``: ``gpu`` / ``other``),
    from the same file's PCI enumeration lines (class 0x0300xx VGA / 0x0302xx 3D controller) and
    lines the nvidia driver prints with the address; a GPU's link event also gets its ``gpu``."""
    classes: dict[str, bool] = {}
    for e in events:
        if e.kind == "pcie-link":
            continue
        m = _ENUM_RE.search(e.message)
        if m:
            classes[m.group(1)] = m.group(3).startswith(("0300", "0302"))
        n = _NV_DRIVER_RE.search(e.message)
        if n:
            classes.setdefault(n.group(1), True)
    if not classes:
        return events
    out = []
    for e in events:
        pci = e.attrs.get("pci") if e.kind == "pcie-link" else None
        if pci in classes and e.attrs.get("device") == "unknown":
            is_gpu = classes[pci]
            e = dataclasses.replace(e, gpu=pci if is_gpu else e.gpu,
                                    attrs={**e.attrs, "device": "gpu" if is_gpu else "other"})
        out.append(e)
    return out


# -- IOMMU -------------------------------------------------------------------------------------
_DMAR_DEV_RE = lazy_compile(r"Request device \[([0-9a-fA-F:.]+)\]")
_DMAR_REASON_RE = lazy_compile(r"\[fault reason (0x)?([0-9a-fA-F]+)\]\s*(.*)")
_AMDVI_DEV_RE = lazy_compile(r"device=([0-9a-fA-F:.]+)")
_SUPPRESSED_RE = lazy_compile(r"(?<!\d)(\d+) callbacks suppressed")


def _is_iommu_fault(text: str) -> bool:
    if "IO_PAGE_FAULT" in text or "dmar_fault" in text:
        return True
    if "DMAR" in text and ("fault" in text or "Fault" in text):
        return True
    return ("smmu" in text or "SMMU" in text) and ("fault" in text or "Fault" in text)


def _iommu(text: str) -> KernelInfo:
    attrs: dict[str, Any] = {}
    dev = _DMAR_DEV_RE.search(text) or _AMDVI_DEV_RE.search(text)
    pci = normalize_pci(dev.group(1)) if dev else None
    if pci is None:
        dm = _DEV_PREFIX_RE.match(text)
        pci = dm.group(2) if dm else None
    if pci:
        attrs["pci"] = pci
    rm = _DMAR_REASON_RE.search(text)
    if rm:
        attrs["reason_code"] = int(rm.group(2), 16)
        attrs["reason"] = rm.group(3).strip()
    if "IO_PAGE_FAULT" in text:
        attrs["reason"] = "IO_PAGE_FAULT"
    sm = _SUPPRESSED_RE.search(text)
    if sm:
        attrs["suppressed"] = int(sm.group(1))
    return KernelInfo("iommu", Severity.ERROR, None, None, attrs, generic=False)


# -- OOM killer --------------------------------------------------------------------------------
_OOM_INVOKED_RE = lazy_compile(r"^(.+?) invoked oom-killer: (?:gfp_mask=([^,]+))?")
_OOM_KILL_RE = lazy_compile(r"oom-kill:constraint=(\w+)(.*?),task=(.*?),pid=(\d+)(?:,uid=(\d+))?")
_OOM_MEMCG_RE = lazy_compile(r"(?:oom_memcg|task_memcg)=([^,]+)")
_OOM_KILLED_RE = lazy_compile(
    r"(?:(Memory cgroup out of memory)|Out of memory[^:]*):\s*Kill(?:ed)? process (\d+) \((.*?)\)"
    r"(?: total-vm:(\d+)kB, anon-rss:(\d+)kB, file-rss:(\d+)kB(?:, shmem-rss:(\d+)kB)?)?(?:.*?score (\d+))?"
)
_KILLED_PROCESS_RE = lazy_compile(
    r"^Killed process (\d+) \((.*?)\) total-vm:(\d+)kB, anon-rss:(\d+)kB, file-rss:(\d+)kB(?:, shmem-rss:(\d+)kB)?"
)
_OOM_REAPER_RE = lazy_compile(r"oom_reaper: reaped process (\d+) \((.*?)\)")
_OOMD_RE = lazy_compile(r"Killed (\S+?) due to memory (?:pressure|used)")
_UNIT_OOM_RE = lazy_compile(r"^(\S+?): Failed with result 'oom-kill'")


def _rss(attrs: dict[str, Any], total: str | None, anon: str | None, file: str | None, shmem: str | None) -> None:
    if total is not None:
        attrs["total_vm_kb"] = int(total)
    if anon is not None:
        attrs["anon_rss_kb"] = int(anon)
        attrs["rss_kb"] = int(anon) + int(file or 0) + int(shmem or 0)


def _oom(text: str) -> KernelInfo | None:
    m = _OOM_KILLED_RE.search(text)
    if m:
        attrs: dict[str, Any] = {"pid": int(m.group(2)), "process": m.group(3), "cgroup": bool(m.group(1))}
        _rss(attrs, m.group(4), m.group(5), m.group(6), m.group(7))
        if m.group(8):
            attrs["score"] = int(m.group(8))
        return KernelInfo("oom-killer", Severity.CRITICAL, None, attrs["pid"], attrs, generic=False)
    m = _KILLED_PROCESS_RE.search(text)
    if m:
        attrs = {"pid": int(m.group(1)), "process": m.group(2)}
        _rss(attrs, m.group(3), m.group(4), m.group(5), m.group(6))
        return KernelInfo("oom-killer", Severity.CRITICAL, None, attrs["pid"], attrs, generic=False)
    m = _OOM_KILL_RE.search(text)
    if m:
        attrs = {"constraint": m.group(1), "process": m.group(3), "pid": int(m.group(4))}
        if m.group(5):
            attrs["uid"] = int(m.group(5))
        cg = _OOM_MEMCG_RE.search(m.group(2))
        if cg:
            attrs["memcg"] = cg.group(1)
        attrs["cgroup"] = m.group(1) == "CONSTRAINT_MEMCG"
        return KernelInfo("oom-killer", Severity.ERROR, None, attrs["pid"], attrs, generic=False)
    m = _OOM_INVOKED_RE.search(text)
    if m:
        attrs = {"invoker": m.group(1).strip()}
        if m.group(2):
            attrs["gfp_mask"] = m.group(2)
        return KernelInfo("oom-killer", Severity.WARNING, None, None, attrs, generic=False)
    m = _OOM_REAPER_RE.search(text)
    if m:
        attrs = {"pid": int(m.group(1)), "process": m.group(2), "reaped": True}
        return KernelInfo("oom-killer", Severity.INFO, None, attrs["pid"], attrs, generic=False)
    m = _OOMD_RE.search(text)
    if m:
        return KernelInfo("oom-killer", Severity.CRITICAL, None, None, {"unit": m.group(1), "oomd": True},
                          generic=False)
    m = _UNIT_OOM_RE.search(text)
    if m:
        return KernelInfo("oom-killer", Severity.CRITICAL, None, None, {"unit": m.group(1)}, generic=False)
    return None


# -- hung tasks, lockups, stalls ---------------------------------------------------------------
_HUNG_RE = lazy_compile(r"INFO: task (.+?):(\d+) blocked for more than (\d+) seconds")
_SOFT_LOCKUP_RE = lazy_compile(r"soft lockup - CPU#(\d+) stuck for (\d+)s!(?: \[(.+?):(\d+)\])?")
_HARD_LOCKUP_RE = lazy_compile(r"hard LOCKUP on cpu (\d+)")
_RCU_RE = lazy_compile(r"rcu_?(\w*?)(?: self-detected stall| detected stalls?)")


def _hung(text: str) -> KernelInfo | None:
    m = _HUNG_RE.search(text)
    if m:
        attrs: dict[str, Any] = {"process": m.group(1), "pid": int(m.group(2)), "seconds": int(m.group(3)),
                                 "what": "hung-task"}
        return KernelInfo("hung-task", Severity.ERROR, None, attrs["pid"], attrs, generic=False)
    m = _SOFT_LOCKUP_RE.search(text)
    if m:
        attrs = {"cpu": int(m.group(1)), "seconds": int(m.group(2)), "what": "soft-lockup"}
        pid = None
        if m.group(3):
            attrs["process"] = m.group(3)
            pid = attrs["pid"] = int(m.group(4))
        return KernelInfo("hung-task", Severity.ERROR, None, pid, attrs, generic=False)
    m = _HARD_LOCKUP_RE.search(text)
    if m:
        return KernelInfo("hung-task", Severity.CRITICAL, None, None, {"cpu": int(m.group(1)), "what": "hard-lockup"},
                          generic=False)
    if "stall" in text:
        m = _RCU_RE.search(text)
        if m:
            return KernelInfo("hung-task", Severity.ERROR, None, None, {"what": "rcu-stall", "rcu": m.group(1)},
                              generic=False)
    return None


# -- WSL dxgkrnl -------------------------------------------------------------------------------
_DXG_RE = lazy_compile(r"dxgk(?::err)?:\s*(?:(\w+):\s*)?(.*)")
_ERRNO_RE = lazy_compile(r"failed:?\s*(-\d+)")


def _dxg(text: str) -> KernelInfo:
    attrs: dict[str, Any] = {}
    m = _DXG_RE.search(text)
    if m:
        if m.group(1):
            attrs["function"] = m.group(1)
        em = _ERRNO_RE.search(m.group(2))
        if em:
            attrs["errno"] = int(em.group(1))
    failed = "failed" in text or "dxgk:err" in text or "invalid" in text or "freed" in text
    return KernelInfo("dxg", Severity.WARNING if failed else Severity.INFO, None, None, attrs, generic=False)


# -- everything else ---------------------------------------------------------------------------
_SEGFAULT_RE = lazy_compile(r"^(\S+?)\[(\d+)\]: segfault at")
_CRASH_WORDS = ("BUG: unable to handle", "Oops:", "Kernel panic", "kernel BUG at", "general protection fault",
                "Unable to handle kernel")


#: one search that rules out plain chatter before any family-specific test runs
_ANY_FAMILY_RE = lazy_compile(
    r"Xid|AER|PCIe|DPC:|Surprise Down|error status/mask|pcieport|IO_PAGE_FAULT|dmar_fault|DMAR|smmu|SMMU|oom|"
    r"Out of memory|out of memory|Killed|blocked for more than|LOCKUP|lockup|stall|dxgk|NVRM|nvidia|Linux version|"
    r"Booting Linux|BUG|Oops|Kernel panic|general protection|Unable to handle|segfault"
)
_CRASH_RE = lazy_compile("|".join(re.escape(w) for w in _CRASH_WORDS))


def classify(text: str, *, kernel: bool = True) -> KernelInfo:
    """Classify one kernel message (flattened to one line). ``kernel=False`` for user-space
    journal entries: the same recognisers run (nvidia-persistenced, systemd-oomd …)."""
    if _ANY_FAMILY_RE.search(text) is None:
        return KernelInfo()
    if "Xid" in text:
        m = _XID_RE.search(text)
        if m:
            return _xid(m)
    if _is_aer(text):
        return _aer(text)
    if "limited by" in text and "PCIe" in text:
        m = _LINK_RE.search(text)
        if m:
            return _pcie_link(text, m)
    if _is_iommu_fault(text):
        return _iommu(text)
    if "oom" in text or "Out of memory" in text or "Killed" in text or "out of memory" in text:
        info = _oom(text)
        if info:
            return info
    if "blocked for more than" in text or "LOCKUP" in text or "lockup" in text or "stall" in text:
        info = _hung(text)
        if info:
            return info
    if "dxgk" in text or "dxgkrnl" in text:
        return _dxg(text)
    if text.startswith(_NVIDIA_PREFIXES) or "NVRM:" in text:
        return _nvrm(text)
    if kernel and (text.startswith("Linux version ") or text.startswith("Booting Linux")):
        return KernelInfo("boot", Severity.INFO, generic=False)
    if _CRASH_RE.search(text):
        return KernelInfo("kernel", Severity.CRITICAL, attrs={"crash": True}, generic=False)
    m = _SEGFAULT_RE.match(text)
    if m:
        pid = int(m.group(2))
        return KernelInfo("kernel", Severity.ERROR, None, pid, {"process": m.group(1), "pid": pid, "segfault": True},
                          generic=False)
    return KernelInfo()
