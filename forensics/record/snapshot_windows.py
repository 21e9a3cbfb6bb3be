"""The Windows part of the host snapshot (:mod:`forensics.record.snapshot` runs it on native Windows).

Three CIM queries through ``powershell.exe``, each under the snapshot's deadline, each output kept
as it came in ``host/`` and read here:

``windows-os.txt``           ``Win32_OperatingSystem``: caption, version, build, boot time, memory
``windows-video.txt``        ``Win32_VideoController``: each display adapter's name, PnP device id,
                             Windows driver version and date, status and problem code
``windows-pnp-display.txt``  ``Win32_PnPSignedDriver`` of class DISPLAY: each adapter's location on
                             its bus (``PCI bus 1, device 0, function 0``)

and from them ``system.json`` (as on Linux: ``os.pretty_name``, ``kernel`` …) and ``windows-gpus.json``
(one entry per adapter: PCI ids, the NVIDIA driver version in NVIDIA's numbering, ``pci_bus_id``
from the location, the problem code Device Manager shows, e.g. 43). Only named properties are
asked for (never a serial number or a registered owner), printed with ``Format-List`` (property
names are not localized; values may be) and as UTF-8.

The parsing is plain text and platform-independent: it is tested on Linux against real outputs
through a fake ``powershell.exe`` (``tests/fakes/powershell.exe``); nothing here has run on Windows.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from forensics.lazy_re import lazy_compile
from forensics.record.bounded import Result
from forensics.record.writer import atomic_write_json

__all__ = ["QUERIES", "WindowsHost", "format_list", "nvidia_driver_version", "pci_location", "powershell_exe"]

#: (file, CIM class, properties, WQL filter)
QUERIES: tuple[tuple[str, str, tuple[str, ...], str], ...] = (
    ("windows-os.txt", "Win32_OperatingSystem",
     ("Caption", "Version", "BuildNumber", "OSArchitecture", "LastBootUpTime", "TotalVisibleMemorySize"), ""),
    ("windows-video.txt", "Win32_VideoController",
     ("Name", "AdapterCompatibility", "PNPDeviceID", "DriverVersion", "DriverDate", "Status",
      "ConfigManagerErrorCode", "AdapterRAM"), ""),
    ("windows-pnp-display.txt", "Win32_PnPSignedDriver",
     ("DeviceName", "DeviceID", "DriverVersion", "Location"), "DeviceClass='DISPLAY'"),
)
TIMEOUT_S = 60.0  # CIM on a busy host is slow (the PnP driver query walks every driver)

_PCI_IDS = lazy_compile(r"VEN_([0-9A-Fa-f]{4})&DEV_([0-9A-Fa-f]{4})")
_KEY_LINE = lazy_compile(r"^(\w+)\s*: ?(.*)$")


def powershell_exe(env: Mapping[str, str]) -> str | None:
    """Windows PowerShell from System32, else whichever PowerShell is on ``PATH``."""
    root = env.get("SystemRoot", r"C:\Windows")
    system = os.path.join(root, "System32", "WindowsPowerShell", "v1.0", "powershell.exe")
    if os.path.isfile(system):
        return system
    path = env.get("PATH")
    return shutil.which("powershell.exe", path=path) or shutil.which("pwsh", path=path)


def query_argv(exe: str, cim_class: str, props: tuple[str, ...], where: str = "") -> list[str]:
    flt = f' -Filter "{where}"' if where else ""
    script = ("[Console]::OutputEncoding = [System.Text.Encoding]::UTF8; "
              f"Get-CimInstance -ClassName {cim_class}{flt} | Format-List {','.join(props)} | Out-String -Width 4096")
    return [exe, "-NoProfile", "-NonInteractive", "-Command", script]


def format_list(text: str) -> list[dict[str, str]]:
    """``Format-List`` output as one dict per record (records are separated by blank lines; a long
    value wrapped onto indented lines is joined back)."""
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    last = ""
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip():
            if current:
                records.append(current)
            current, last = {}, ""
            continue
        m = _KEY_LINE.match(line)
        if m and not line[:1].isspace():
            last = m.group(1)
            current[last] = m.group(2).strip()
        elif last and line[:1].isspace():  # a wrapped value goes on at the value column
            current[last] += line.strip()
    if current:
        records.append(current)
    return records


def nvidia_driver_version(windows_version: str) -> str | None:
    """NVIDIA's number for a Windows driver version: the last five digits of its last two parts
    (``32.0.15.6590`` → ``565.90``, ``27.21.14.5167`` → ``451.67``)."""
    parts = windows_version.strip().split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    digits = (parts[2] + parts[3].rjust(4, "0"))[-5:]
    return f"{int(digits[:3])}.{digits[3:]}"


def pci_location(text: str) -> str | None:
    """A PnP location string (``PCI bus 1, device 0, function 0``, in any UI language:
    ``PCI-bus 3, apparaat 0, functie 0``) as a bus id ``0000:01:00.0``. Hyper-V and Azure put the
    PCI segment in the bus number's upper bits (``PCI bus 5598976`` = segment 0x556f, bus 0)."""
    nums = [int(n) for n in re.findall(r"\d+", text)]
    if len(nums) != 3 or not text.upper().startswith("PCI"):
        return None
    bus, device, function = nums
    if device > 31 or function > 7:
        return None
    return f"{bus >> 8:04x}:{bus & 0xFF:02x}:{device:02x}.{function:x}"


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value not in (None, "") else None
    except ValueError:
        return None


def adapters(video: list[dict[str, str]], pnp: list[dict[str, str]]) -> list[dict[str, Any]]:
    """One entry per display adapter, its PnP location joined on the PnP device id."""
    where = {r.get("DeviceID", "").upper(): r for r in pnp if r.get("DeviceID")}
    out = []
    for v in video:
        pnp_id = v.get("PNPDeviceID", "")
        loc = where.get(pnp_id.upper(), {}).get("Location", "")
        ids = _PCI_IDS.search(pnp_id)
        nvidia = (ids is not None and ids.group(1).upper() == "10DE") or "NVIDIA" in v.get("AdapterCompatibility", "")
        entry: dict[str, Any] = {
            "name": v.get("Name", ""),
            "pnp_device_id": pnp_id,
            "vendor_id": ids.group(1).lower() if ids else None,
            "device_id": ids.group(2).lower() if ids else None,
            "windows_driver_version": v.get("DriverVersion") or None,
            "driver_version": nvidia_driver_version(v.get("DriverVersion", "")) if nvidia else None,
            "driver_date": v.get("DriverDate") or None,
            "status": v.get("Status") or None,
            "problem_code": _int(v.get("ConfigManagerErrorCode")),
            "location": loc or None,
            "pci_bus_id": pci_location(loc) if loc else None,
        }
        out.append(entry)
    return out


def system_facts(os_record: dict[str, str], hostname: str) -> dict[str, Any]:
    """``system.json`` as the report reads it on Linux (``os.pretty_name``, ``kernel`` …)."""
    version = os_record.get("Version", "")
    mem = _int(os_record.get("TotalVisibleMemorySize"))
    return {
        "hostname": hostname,
        "kernel": f"Windows NT {version}" if version else None,
        "machine": os_record.get("OSArchitecture") or None,
        "os": {"pretty_name": os_record.get("Caption") or None, "id": "windows", "version_id": version or None,
               "build": os_record.get("BuildNumber") or None},
        "cpus": os.cpu_count(),
        "mem_total_kib": mem,
        "boot_time": os_record.get("LastBootUpTime") or None,
    }


class WindowsHost:
    """The snapshot's platform part on Windows (the POSIX one is ``snapshot.PosixHost``)."""

    name = "windows"

    def be_idle(self) -> None:
        """Nothing to do: the recorder starts the snapshot at ``IDLE_PRIORITY_CLASS``, which the
        commands it runs inherit (``lifeline.helper_flags``)."""

    def nvidia_smi(self, env: Mapping[str, str]) -> str | None:
        found = shutil.which("nvidia-smi", path=env.get("PATH"))
        if found:
            return found
        for base in (env.get("ProgramW6432"), env.get("ProgramFiles")):
            if base:
                old = os.path.join(base, "NVIDIA Corporation", "NVSMI", "nvidia-smi.exe")  # drivers before DCH
                if os.path.isfile(old):
                    return old
        return None

    def facts(self, host: Path, env: Mapping[str, str], hostname: str, run: Callable[[list[str], float], Result],
              record: Callable[[str, Result], None], log: list[dict[str, Any]]) -> str | None:
        """Run the CIM queries, keep their outputs, write ``system.json`` and ``windows-gpus.json``;
        returns the driver line for ``versions.json``."""
        exe = powershell_exe(env)
        texts: dict[str, str] = {}
        if exe is None:
            log.append({"name": "powershell", "problem": "neither powershell.exe nor pwsh found"})
        else:
            for out, cim_class, props, where in QUERIES:
                res = run(query_argv(exe, cim_class, props, where), TIMEOUT_S)
                record(f"Get-CimInstance {cim_class}", res)
                if res.stdout:
                    raw = res.stdout.removeprefix(b"\xef\xbb\xbf")
                    (host / out).write_bytes(raw)
                    texts[out] = raw.decode("utf-8", "replace")
        os_records = format_list(texts.get("windows-os.txt", ""))
        atomic_write_json(host / "system.json", system_facts(os_records[0] if os_records else {}, hostname))
        gpus = adapters(format_list(texts.get("windows-video.txt", "")),
                        format_list(texts.get("windows-pnp-display.txt", "")))
        atomic_write_json(host / "windows-gpus.json", {"adapters": gpus})
        nvidia = [g for g in gpus if g["driver_version"]]
        if not nvidia:
            return None
        g = nvidia[0]
        return f"NVIDIA {g['driver_version']} (Windows driver {g['windows_driver_version']})"
