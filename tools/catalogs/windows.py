"""The Windows event and bug-check catalogue extractor (docs/catalogs.md).

Windows has no source to read, so the catalogue is made of two kinds of documented facts:

* Bug checks (stop codes): read from a snapshot of https://github.com/MicrosoftDocs/windows-driver-docs
  (the directory holding ``windows-driver-docs-pr/``): one entry per reference page
  ``windows-driver-docs-pr/debugger/bug-check-*.md``, from its heading ``# Bug Check 0x116: VIDEO_TDR_FAILURE``.
  ``format`` is the title line WinDbg's ``!analyze -v`` prints, ``VIDEO_TDR_FAILURE (116)`` (name, then the
  code in lower-case hex), which is what forensics/parsers/windbg.py reads; ``code`` is ``0x116``;
  ``level`` is ``bugcheck``, or ``live dump`` where the page says the code only identifies live dumps
  (taken while the machine keeps running); ``where`` the page and the heading's line.
* Events of the System and Application logs that a GPU crash leaves (Display 4101, Kernel-Power 41,
  EventLog 6008, the WER 1001 bug-check record, WHEA-Logger, nvlddmkm, LiveKernelEvent): the table
  ``EVENTS`` below, each with the event's description as Event Viewer renders it (``%1``... are the
  event's insertion strings), its provider and id in ``code``, its Event Viewer level in ``level``, and in
  ``where`` the page that documents it - a Microsoft page where there is one, otherwise a public export
  showing the exact wording (nvlddmkm's message table is NVIDIA's and undocumented; the
  ``The description for Event ID ... cannot be found`` wrapper is what Event Viewer prints then).

Only names, codes, message texts and places are taken; no documentation prose is copied.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

_HEADING = re.compile(r"^# Bug [Cc]heck (?:0x)?([0-9A-Fa-f]+):\s*(\S+)\s*$")
# A page that says its code identifies live dumps (taken without stopping the machine).
_LIVE_DUMP = re.compile(r"used to identify live dumps|live dump has a value of", re.I)

_TDR_DOC = "https://learn.microsoft.com/windows-hardware/drivers/display/timeout-detection-and-recovery"
_REBOOTS_DOC = ("https://learn.microsoft.com/troubleshoot/windows-server/performance/"
                "troubleshoot-unexpected-reboots-system-event-logs")
_EVENT41_DOC = "https://learn.microsoft.com/windows/client-management/troubleshoot-event-id-41-restart"
_WHEA18_DOC = "https://learn.microsoft.com/archive/technet-wiki/3567.event-id-18-microsoft-windows-whea-logger"
_UNRESOLVED = ("The description for Event ID {id} from source nvlddmkm cannot be found. Either the component "
               "that raises this event is not installed on your local computer or the installation is corrupted.")

# (id, code, level, format, where): Event Viewer's rendering of each event's description.
EVENTS: list[tuple[str, str, str, str, str]] = [
    ("windows.display.driver-stopped-responding-recovered", "Display 4101", "Warning",
     "Display driver %1 stopped responding and has successfully recovered.", _TDR_DOC),
    ("windows.kernel-power.rebooted-without-clean-shutdown", "Microsoft-Windows-Kernel-Power 41", "Critical",
     "The system has rebooted without cleanly shutting down first. This error could be caused if the system "
     "stopped responding, crashed, or lost power unexpectedly.", _EVENT41_DOC),
    ("windows.eventlog.previous-shutdown-unexpected", "EventLog 6008", "Error",
     "The previous system shutdown at %1 on %2 was unexpected.", _REBOOTS_DOC),
    ("windows.wer.rebooted-from-bugcheck", "Microsoft-Windows-WER-SystemErrorReporting 1001", "Error",
     "The computer has rebooted from a bugcheck.  The bugcheck was: %1 (%2, %3, %4, %5). "
     "A dump was saved in: %6. Report Id: %7.",
     "https://github.com/IGCIT/Intel-GPU-Community-Issue-Tracker-IGCIT/issues/313"),
    ("windows.whea.fatal-hardware-error", "Microsoft-Windows-WHEA-Logger 18", "Error",
     "A fatal hardware error has occurred.", _WHEA18_DOC),
    ("windows.whea.corrected-hardware-error", "Microsoft-Windows-WHEA-Logger 17, 19, 47", "Warning",
     "A corrected hardware error has occurred.", "https://pastebin.com/FCbEuBV5"),
    ("windows.whea.pcie-aer-error-source", "Microsoft-Windows-WHEA-Logger 17", "Warning",
     "Error Source: Advanced Error Reporting (PCI Express)", "https://pastebin.com/FCbEuBV5"),
    ("windows.nvlddmkm.event-13-unresolved", "nvlddmkm 13", "Error", _UNRESOLVED.format(id=13),
     "https://pastebin.com/FjwSLUJD"),
    ("windows.nvlddmkm.event-14-unresolved", "nvlddmkm 14", "Error", _UNRESOLVED.format(id=14),
     "https://pastebin.com/FjwSLUJD"),
    ("windows.nvlddmkm.event-153-unresolved", "nvlddmkm 153", "Error", _UNRESOLVED.format(id=153),
     "https://github.com/Open-Shell/Open-Shell-Menu/issues/2025"),
    ("windows.nvlddmkm.error-occurred-on-gpuid", "nvlddmkm 153", "Error",
     "Error occurred on GPUID: %1", "https://github.com/Open-Shell/Open-Shell-Menu/issues/2025"),
    ("windows.wer.livekernelevent", "Windows Error Reporting 1001", "Information",
     "Event Name: LiveKernelEvent", "https://pastebin.com/459qiAEG"),
]

_PRINTF = re.compile(r"%\d+")


def _text(fmt: str) -> str:
    return _PRINTF.sub("{}", fmt.replace("{", "{{").replace("}", "}}"))


def _kebab(name: str) -> str:
    return name.lower().replace("_", "-")


def extract(root: Path) -> list[dict[str, Any]]:
    debugger = root / "windows-driver-docs-pr" / "debugger"
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for page in sorted(debugger.glob("bug-check-*.md")):
        body = page.read_text(encoding="utf-8", errors="replace")
        for no, line in enumerate(body.splitlines(), 1):
            m = _HEADING.match(line)
            if not m:
                continue
            code = int(m.group(1), 16)
            name = m.group(2).replace("\\_", "_").replace("\\", "")
            fmt = f"{name} ({code:x})"
            mid = f"windows.bugcheck.{_kebab(name)}"
            if mid in seen:
                mid = f"{mid}-{code:x}"
            seen.add(mid)
            entries.append({"id": mid, "format": fmt, "text": _text(fmt),
                            "where": f"{page.relative_to(root).as_posix()}:{no}",
                            "level": "live dump" if _LIVE_DUMP.search(body) else "bugcheck",
                            "code": f"0x{code:x}"})
            break
    entries.sort(key=lambda e: int(e["code"], 16))
    for mid, code_s, level, fmt, where in EVENTS:
        entries.append({"id": mid, "format": fmt, "text": _text(fmt), "where": where, "level": level,
                        "code": code_s})
    return entries
