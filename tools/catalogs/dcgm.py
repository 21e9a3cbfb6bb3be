"""Extract DCGM's failure messages from a snapshot of https://github.com/NVIDIA/DCGM (docs/catalogs.md).

What it reads:

* ``dcgmlib/dcgm_errors.h``: every ``DCGM_FR_*`` code of ``enum dcgmError_enum`` (its number), its
  ``DCGM_FR_*_MSG`` format string and its ``DCGM_FR_*_NEXT`` suggestion (macros such as
  ``TRIAGE_RUN_FIELD_DIAG_MSG`` or another code's ``_NEXT`` resolved). ``DCGM_FR_OK`` and the
  ``DCGM_FR_ERROR_SENTINEL`` end marker are not errors and are left out, and so are the codes whose
  ``_MSG`` is empty ("See message inplace": worded where they are raised, mostly in the EUD plugin that is
  not in the public tree; an empty text cannot be matched or stored); deprecated aliases
  (``DCGM_FR_CLOCK_THROTTLE_THERMAL`` = ``DCGM_FR_CLOCKS_EVENT_THERMAL``) are the same code.
* ``dcgmlib/src/dcgm_errors.c``: the table that gives each code its DCGM severity
  (``DCGM_ERROR_MONITOR``, ``_ISOLATE``, ``_RESET``, ``_TRIAGE``, ``_CONFIG``, ``_UNKNOWN``) and category
  (``DCGM_FR_EC_HARDWARE_MEMORY`` …). The severity word is the entry's ``level``; the category picks the
  id's area (``dcgm.memory.…``, ``dcgm.nvlink.…``).
* A short list of places (``_PLACES``) where ``dcgmi`` and the host engine word an outcome themselves: the
  health watch's log line, ``dcgmi diag`` / ``dcgmi health`` failure lines and result words, the host
  engine's Xid-from-kmsg line. Each is looked up in the snapshot (its literal pieces must all be on the
  line found, or the extraction stops), so the list cannot drift silently.
* Older wordings (``_OLDER``) of the messages mapped to a signature, as read from the release tags named
  beside them (``git show vX:dcgmlib/dcgm_errors.h``), so that logs of DCGM 2.x/3.x still match.

The level is DCGM's own word: the severity of the code's table entry, ``log_error`` for host-engine log
lines, ``stdout`` for what ``dcgmi`` prints. Our severity is decided by tools/catalogs/rules/dcgm.toml.
Each raw entry also carries ``next`` (DCGM's suggestion); build.py keeps only the fields of the format.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

HEADER = "dcgmlib/dcgm_errors.h"
TABLE = "dcgmlib/src/dcgm_errors.c"

_AREAS = {
    "DCGM_FR_EC_HARDWARE_MEMORY": "memory", "DCGM_FR_EC_HARDWARE_PCIE": "pcie",
    "DCGM_FR_EC_HARDWARE_NVLINK": "nvlink", "DCGM_FR_EC_HARDWARE_NVSWITCH": "nvswitch",
    "DCGM_FR_EC_HARDWARE_THERMAL": "thermal", "DCGM_FR_EC_HARDWARE_POWER": "power",
    "DCGM_FR_EC_HARDWARE_OTHER": "hardware", "DCGM_FR_EC_PERF_THRESHOLD": "perf",
    "DCGM_FR_EC_PERF_VIOLATION": "perf", "DCGM_FR_EC_SOFTWARE_CONFIG": "config",
    "DCGM_FR_EC_SOFTWARE_LIBRARY": "library", "DCGM_FR_EC_SOFTWARE_XID": "xid",
    "DCGM_FR_EC_SOFTWARE_CUDA": "cuda", "DCGM_FR_EC_SOFTWARE_EUD": "eud",
    "DCGM_FR_EC_SOFTWARE_OTHER": "software", "DCGM_FR_EC_INTERNAL_OTHER": "internal",
    "DCGM_FR_EC_NONE": "general",
}

#: (id, path, format as printed, level): outcome wording of dcgmi and the host engine. `format` is the
#: message with each streamed / fmt operand written ``{}``; its longest literal piece (pieces end at a ``{}``
#: or at a `` | `` marking where one streamed literal ends, not part of the format) must be on a line of
#: `path` and every other word of it close to that line (a stream statement spans several lines).
_PLACES: list[tuple[str, str, str, str]] = [
    ("dcgm.health.detected-incident", "modules/health/DcgmHealthWatch.cpp",
     "Detected a {} in health system {}: '{}'", "log_error"),
    ("dcgm.hostengine.xid-in-kmsg", "dcgmlib/src/DcgmCacheManager.cpp",
     "XID {} detected on GPU {}({}) in /dev/kmsg.", "log_error"),
    ("dcgm.hostengine.xid-in-kmsg-restart-required", "dcgmlib/src/DcgmCacheManager.cpp",
     "XID {} detected in /dev/kmsg. Hostengine restart required. Ensure nvidia-smi is responsive before "
     "attempting to restart the hostengine.", "log_error"),
    ("dcgm.dcgmi-diag.unable-to-complete-group", "dcgmi/Diag.cpp",
     "Error: Unable to complete diagnostic for group {}. Return: ({}) : {}", "stdout"),
    ("dcgm.dcgmi-diag.unable-to-complete-entities", "dcgmi/Diag.cpp",
     "Error: Unable to complete diagnostic for entities {}. Return: ({}) : {}", "stdout"),
    ("dcgm.dcgmi-diag.unable-to-complete", "dcgmi/Diag.cpp",
     "Error: Unable to complete diagnostic. | Return: ({}) : {}", "stdout"),
    ("dcgm.dcgmi-diag.iterations-aborted", "dcgmi/Diag.cpp",
     "Aborting the iterative runs of the diagnostic due to failure: {}", "stdout"),
    ("dcgm.dcgmi-diag.error-in-diagnostic", "dcgmi/Diag.cpp",
     "Error in diagnostic for group with ID: {}. Return: {} '{}'", "log_error"),
    ("dcgm.dcgmi-diag.not-homogeneous", "dcgmi/Diag.cpp",
     "Error: Diagnostic can only be performed on a homogeneous group of GPUs.", "stdout"),
    ("dcgm.dcgmi-diag.driver-not-recommended", "dcgmi/Diag.cpp",
     "Error: Diagnostic could not be run because the Tesla recommended driver is not being used.", "stdout"),
    ("dcgm.dcgmi-diag.dcgm-paused", "dcgmi/Diag.cpp",
     "Error: Diagnostic could not be run while DCGM is paused.", "stdout"),
    ("dcgm.dcgmi-diag.result-fail", "dcgmi/Diag.cpp", "Fail", "stdout"),
    ("dcgm.dcgmi-diag.result-warn", "dcgmi/Diag.cpp", "Warn", "stdout"),
    ("dcgm.dcgmi-health.unable-to-check", "dcgmi/Health.cpp",
     "Error: Unable to check health watches. Return: {}", "stdout"),
    ("dcgm.dcgmi-health.watches-not-enabled", "dcgmi/Health.cpp",
     "Error: Health watches not enabled. Please enable watches.", "stdout"),
    ("dcgm.dcgmi-health.result-failure", "dcgmi/Health.cpp", "Failure", "stdout"),
    ("dcgm.dcgmi-health.result-warning", "dcgmi/Health.cpp", "Warning", "stdout"),
    ("dcgm.dcgmi.no-connection-to-host", "dcgmi/Command.cpp",
     "Error: unable to establish a connection to the specified host: {}", "stdout"),
    ("dcgm.dcgmi.unable-to-connect", "dcgmi/Command.cpp", "Error: Unable to connect to host engine. {}.", "stdout"),
]

#: Older wordings of messages mapped to a signature: code -> [(format, first tag, last tag)], each read with
#: ``git show TAG:dcgmlib/dcgm_errors.h`` (DCGM 4.0 renamed "clock throttling" to "clocks event").
_OLDER: dict[str, list[tuple[str, str, str]]] = {
    "DCGM_FR_CLOCKS_EVENT_THERMAL": [
        ("Detected clock throttling due to thermal violation in GPU %u.", "v2.1.4", "v3.3.9")],
    "DCGM_FR_CLOCKS_EVENT_VIOLATION": [
        ("Clocks are being throttled for GPU %u because of clock throttling starting %.1f seconds into the "
         "test. %s", "v2.1.4", "v3.3.9")],
    "DCGM_FR_PENDING_ROW_REMAP": [
        ("GPU %u has uncorrectable memory errors and row remappings are pending", "v2.3.4", "v3.2.6")],
    "DCGM_FR_ROW_REMAP_FAILURE": [("Row remapping failed.", "v2.1.4", "v2.1.4")],
}

_PRINTF = re.compile(r"%(?:%|[-+ #0]*(?:\d+|\*)?(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspn])")
_STRINGS = re.compile(r'"((?:[^"\\]|\\.)*)"')


def c_unescape(s: str) -> str:
    return re.sub(r'\\(["\\\'nt])', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def printf_text(fmt: str) -> str:
    """``text`` of a printf format: each conversion written ``{}``, ``%%`` as ``%``, braces doubled."""
    out: list[str] = []
    pos = 0
    for m in _PRINTF.finditer(fmt):
        out.append(fmt[pos:m.start()].replace("{", "{{").replace("}", "}}"))
        out.append("%" if m.group() == "%%" else "{}")
        pos = m.end()
    out.append(fmt[pos:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


def _defines(src: str) -> dict[str, tuple[str, int]]:
    """``#define NAME <string literals and/or other names>`` → (raw body, line)."""
    out: dict[str, tuple[str, int]] = {}
    lines = src.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"#define\s+(\w+)\s*(.*)$", lines[i])
        start = i
        if m:
            body = m.group(2)
            while body.rstrip().endswith("\\"):
                i += 1
                body = body.rstrip()[:-1] + " " + lines[i]
            body = re.sub(r"/\*.*?\*/", "", body).split("//")[0].strip()
            out[m.group(1)] = (body, start + 1)
        i += 1
    return out


def _resolve(name: str, defs: dict[str, tuple[str, int]], depth: int = 0) -> str:
    body = defs[name][0]
    parts: list[str] = []
    for tok in re.finditer(r'"(?:[^"\\]|\\.)*"|\w+', body):
        t = tok.group()
        if t.startswith('"'):
            parts.append(c_unescape(t[1:-1]))
        elif t in defs and depth < 5:
            parts.append(_resolve(t, defs, depth + 1))
        else:
            raise SystemExit(f"dcgm: cannot resolve {t!r} in #define {name}")
    return "".join(parts)


def _kebab(code: str) -> str:
    return code.removeprefix("DCGM_FR_").lower().replace("_", "-")


def _place(root: Path, path: str, marked: str) -> int:
    """The line of `path` holding the longest literal piece of `marked` (a short lone word quoted), checked by
    finding every other word of it near that line."""
    pieces = [p.strip() for part in marked.split(" | ") for p in part.split("{}") if p.strip()]
    anchor = max(pieces, key=len)
    if len(pieces) == 1 and len(anchor) < 12:
        anchor = f'"{anchor}"'
    lines = (root / path).read_text(errors="replace").split("\n")
    for no, line in enumerate(lines, 1):
        window = "\n".join(lines[max(0, no - 9):no + 14])
        if anchor in line and all(w in window for w in re.findall(r"\w{3,}", marked)):
            return no
    raise SystemExit(f"dcgm: {marked!r} not found in {path}")


def extract(root: Path) -> list[dict[str, Any]]:
    header = (root / HEADER).read_text()
    defs = _defines(header)
    enum_body = header[header.index("typedef enum dcgmError_enum"):]
    enum_body = enum_body[:enum_body.index("} dcgmError_t;")]
    codes = [(m.group(1), int(m.group(2))) for m in re.finditer(r"\b(DCGM_FR_\w+)\s*=\s*(\d+)", enum_body)]
    table = {m.group(1): (m.group(2), m.group(3)) for m in re.finditer(
        r"DCGM_ERROR_TABLE_ENTRY\(\s*(DCGM_FR_\w+)\s*,\s*(DCGM_ERROR_\w+)\s*,\s*(DCGM_FR_EC_\w+)\s*\)",
        (root / TABLE).read_text())}
    out: list[dict[str, Any]] = []
    for code, _number in codes:
        if code in ("DCGM_FR_OK", "DCGM_FR_ERROR_SENTINEL"):
            continue
        level, category = table[code]
        fmt = _resolve(f"{code}_MSG", defs)
        if not fmt:  # "See message inplace": worded where raised (mostly the closed EUD plugin); nothing to match
            continue
        entry: dict[str, Any] = {
            "id": f"dcgm.{_AREAS[category]}.{_kebab(code)}", "format": fmt, "text": printf_text(fmt),
            "where": f"{HEADER}:{defs[code + '_MSG'][1]}", "level": level, "code": code,
            "next": _resolve(f"{code}_NEXT", defs),
        }
        out.append(entry)
        for old, first, last in _OLDER.get(code, []):
            out.append({**entry, "id": f"{entry['id']}@{last.lstrip('v')}", "format": old, "text": printf_text(old),
                        "versions": [first.lstrip("v"), last.lstrip("v")]})
    for ident, path, marked, level in _PLACES:
        fmt = marked.replace(" | ", " ")
        out.append({"id": ident, "format": fmt, "text": fmt.replace("{}", "\0").replace("{", "{{").replace(
            "}", "}}").replace("\0", "{}"), "where": f"{path}:{_place(root, path, marked)}", "level": level})
    return out


if __name__ == "__main__":
    import json
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
