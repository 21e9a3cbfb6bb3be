"""The host snapshot's Windows part, run on Linux: real CIM outputs (tests/data/windows/cim, sources in
each file) replayed by a fake ``powershell.exe`` on ``PATH``, read into ``system.json`` and
``windows-gpus.json``, and the bundle read back by ``analyze`` and the report's facts."""

from __future__ import annotations

import ast
import json
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest
from recorder_helpers import bundle, run

from forensics.analysis import analyze, bundle_facts
from forensics.record import snapshot, snapshot_windows
from forensics.record.snapshot_windows import WindowsHost, format_list, nvidia_driver_version, pci_location

ROOT = Path(__file__).resolve().parents[1]
CIM = ROOT / "tests" / "data" / "windows" / "cim"
TOPO = ROOT / "tests" / "data" / "report1-machine" / "nvidia-smi-topo.txt"
PY = sys.executable

FAKE_SMI = f"""#!/bin/sh
case "$1" in
  topo) cat {TOPO}; exit 0;;
esac
echo "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest \
NVIDIA driver is installed and running."
exit 9
"""
FAKE_PYTHON = """#!/bin/sh
if [ "$2" = "pip" ]; then echo "torch==2.7.0"; exit 0; fi
echo '{"python": "3.12.4", "torch": "2.7.0+cu128", "torch_cuda": "12.8"}'
"""


def _exe(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.fixture
def windows_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with the fake powershell.exe and nvidia-smi, the CIM records to replay, the Windows part chosen."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(ROOT / "tests" / "fakes" / "powershell.exe", bin_dir / "powershell.exe")
    _exe(bin_dir / "nvidia-smi", FAKE_SMI)
    store = tmp_path / "cim"
    shutil.copytree(CIM, store)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    monkeypatch.setenv("FAKE_POWERSHELL_CIM", str(store))
    monkeypatch.setenv(snapshot.PLATFORM_ENV, "windows")
    monkeypatch.setenv("SystemRoot", str(tmp_path / "no-windows"))
    return tmp_path


def test_the_windows_part_is_chosen_on_windows_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(snapshot.PLATFORM_ENV, raising=False)
    assert isinstance(snapshot.host_part("win32"), WindowsHost)
    assert isinstance(snapshot.host_part("linux"), snapshot.PosixHost)
    assert isinstance(snapshot.host_part("darwin"), snapshot.PosixHost)
    assert isinstance(snapshot.host_part(), snapshot.PosixHost if sys.platform != "win32" else WindowsHost)
    monkeypatch.setenv(snapshot.PLATFORM_ENV, "windows")
    assert isinstance(snapshot.host_part(), WindowsHost)


def _records(name: str) -> list[dict[str, str]]:
    text = "\n".join(line for line in (CIM / name).read_text().splitlines() if not line.startswith("#"))
    return format_list(text)


def test_format_list_reads_real_records_and_joins_wrapped_values() -> None:
    [os_rec] = _records("Win32_OperatingSystem.txt")
    assert os_rec["Caption"] == "Microsoft Windows 11 Pro" and os_rec["BuildNumber"] == "22621"
    assert os_rec["Description"] == "" and os_rec["SystemDirectory"] == r"C:\Windows\system32"
    nvidia, intel = _records("Win32_VideoController.txt")
    assert nvidia["PNPDeviceID"] == r"PCI\VEN_10DE&DEV_25A0&SUBSYS_12EC1462&REV_A1\4&36DBEA65&0&0008"
    assert intel["InstalledDisplayDrivers"].endswith(r"iigd_dch.inf_amd64_357acc06f2c40efb\igd12umd64.dll")
    # another machine, another thread: wrapped at about 120 columns
    [gtx] = _records("Win32_VideoController-gtx970m.txt")
    assert gtx["InstalledDisplayDrivers"].count("nvldumdx.dll") == 4 and " " not in gtx["InstalledDisplayDrivers"]
    assert gtx["DriverVersion"] == "27.21.14.5167" and gtx["VideoProcessor"] == "GeForce GTX 970M"
    crlf = "\r\n\r\nName          : A\r\nDriverVersion : 1.2\r\n\r\nName          : B\r\n\r\n\r\n"
    assert format_list(crlf) == [{"Name": "A", "DriverVersion": "1.2"}, {"Name": "B"}]


@pytest.mark.parametrize(("windows", "nvidia"), [
    ("32.0.15.6590", "565.90"),   # RTX 3050 Ti Laptop, driver dated 2024-09-26 (tests/data/windows/cim)
    ("27.21.14.5167", "451.67"),  # GTX 970M, dated 2020-07-05
    ("22.21.13.8253", "382.53"),  # GTX 980 Ti, dated 2017-06-07
])
def test_the_nvidia_driver_number_is_read_from_the_windows_version(windows: str, nvidia: str) -> None:
    assert nvidia_driver_version(windows) == nvidia


def test_a_malformed_driver_version_gives_none() -> None:
    assert nvidia_driver_version("") is None and nvidia_driver_version("32.0.15") is None
    assert nvidia_driver_version("32.0.x.6590") is None


@pytest.mark.parametrize(("location", "bus_id"), [
    ("PCI bus 1, device 0, function 0", "0000:01:00.0"),     # Win32_PnPSignedDriver (tests/data/windows/cim)
    ("PCI-bus 3, apparaat 0, functie 0", "0000:03:00.0"),    # Dutch UI: MultiPoolMiner/MultiPoolMiner#2448
    ("PCI 总线 1, 设备 0, 功能 0", "0000:01:00.0"),            # Chinese UI, as a Go tool's comment quotes it
    ("PCI bus 5598976, device 0, function 0", "556f:00:00.0"),  # Hyper-V/Azure: segment 0x556f in the bus number
    ("PCI bus 0, device 31, function 7", "0000:00:1f.7"),
])
def test_a_pnp_location_in_any_ui_language_is_a_bus_id(location: str, bus_id: str) -> None:
    assert pci_location(location) == bus_id


def test_a_location_that_is_no_pci_address_gives_none() -> None:
    assert pci_location("Port_#0001.Hub_#0004") is None
    assert pci_location("PCI bus 1, device 40, function 0") is None
    [_, net] = _records("Win32_PnPSignedDriver.txt")
    assert pci_location(net["Location"]) == "0000:01:00.0"


def _snapshot(tmp_path: Path) -> Path:
    b = tmp_path / "bundle"
    b.mkdir()
    python = _exe(tmp_path / "python", FAKE_PYTHON)
    assert snapshot.main([str(b), str(python)]) == 0
    return b / "host"


@pytest.mark.slow
def test_the_windows_snapshot_writes_what_the_report_reads(windows_host: Path) -> None:
    host = _snapshot(windows_host)
    system = json.loads((host / "system.json").read_text())
    assert system["os"]["pretty_name"] == "Microsoft Windows 11 Pro" and system["kernel"] == "Windows NT 10.0.22621"
    assert system["mem_total_kib"] == 66273592 and system["os"]["build"] == "22621"
    gpus = json.loads((host / "windows-gpus.json").read_text())["adapters"]
    nvidia, intel = gpus
    assert (nvidia["vendor_id"], nvidia["device_id"], nvidia["driver_version"]) == ("10de", "25a0", "565.90")
    assert nvidia["problem_code"] == 0 and nvidia["status"] == "OK" and nvidia["location"] is None
    assert intel["vendor_id"] == "8086" and intel["driver_version"] is None
    versions = json.loads((host / "versions.json").read_text())
    assert versions["driver"] == "NVIDIA 565.90 (Windows driver 32.0.15.6590)" and versions["torch"] == "2.7.0+cu128"
    log = json.loads((host / "snapshot.json").read_text())
    assert log["platform"] == "windows"
    names = {c["name"]: c for c in log["commands"]}
    for cim_class in ("Win32_OperatingSystem", "Win32_VideoController", "Win32_PnPSignedDriver"):
        assert names[f"Get-CimInstance {cim_class}"]["rc"] == 0
    assert names["nvidia-smi -q -x"]["rc"] == 9  # what it said is kept, for analyze
    assert b"couldn't communicate with the NVIDIA driver" in (host / "nvidia-smi-q.xml").read_bytes()
    assert (host / "nvidia-smi-topo.txt").read_bytes() == TOPO.read_bytes()
    # only the properties asked for reach the bundle (the stored record has the serial number and owner)
    os_text = (host / "windows-os.txt").read_text()
    assert "Caption" in os_text and "SerialNumber" not in os_text and "RegisteredUser" not in os_text
    calls = [ast.literal_eval(line)[-1] for line in (windows_host / "cim" / "calls.log").read_text().splitlines()]
    assert len(calls) == 3 and all(c.startswith("[Console]::OutputEncoding = ") for c in calls)
    assert "-Filter \"DeviceClass='DISPLAY'\"" in calls[2]


def test_a_display_adapter_with_its_location_gets_a_bus_id(windows_host: Path) -> None:
    """The PnP record is joined to the adapter by device id (the NET record stands in for a display
    adapter whose driver record has a location: none of the public display records has one)."""
    store = windows_host / "cim"
    pnp = (store / "Win32_PnPSignedDriver.txt").read_text()
    (store / "Win32_PnPSignedDriver.txt").write_text(pnp.replace("DeviceClass             : NET",
                                                                 "DeviceClass             : DISPLAY"))
    video = (store / "Win32_VideoController.txt").read_text()
    (store / "Win32_VideoController.txt").write_text(video.replace(
        r"PCI\VEN_10DE&DEV_25A0&SUBSYS_12EC1462&REV_A1\4&36DBEA65&0&0008",
        r"PCI\VEN_8086&DEV_24FD&SUBSYS_01508086&REV_78\34415DFFFF33CFE800"))
    gpus = json.loads((_snapshot(windows_host) / "windows-gpus.json").read_text())["adapters"]
    assert gpus[0]["location"] == "PCI bus 1, device 0, function 0" and gpus[0]["pci_bus_id"] == "0000:01:00.0"


@pytest.mark.slow
def test_hung_cim_queries_are_given_up_at_their_deadline(windows_host: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_POWERSHELL_HANG", "1")
    monkeypatch.setattr(snapshot_windows, "TIMEOUT_S", 0.5)
    start = time.monotonic()
    host = _snapshot(windows_host)
    assert time.monotonic() - start < 30
    names = {c["name"]: c for c in json.loads((host / "snapshot.json").read_text())["commands"]}
    assert names["Get-CimInstance Win32_VideoController"]["problem"] == "timed out after 0.5 s"
    assert json.loads((host / "windows-gpus.json").read_text()) == {"adapters": []}
    assert json.loads((host / "system.json").read_text())["os"]["pretty_name"] is None


def test_without_powershell_the_snapshot_says_so(windows_host: Path) -> None:
    (windows_host / "bin" / "powershell.exe").unlink()
    host = _snapshot(windows_host)
    log = json.loads((host / "snapshot.json").read_text())["commands"]
    assert {"name": "powershell", "problem": "neither powershell.exe nor pwsh found"} in log


@pytest.mark.slow
def test_record_with_the_windows_snapshot_and_analyze_it(windows_host: Path) -> None:
    """``forensics record`` with the Windows snapshot part; ``analyze`` reads the bundle without taking
    the CIM outputs for evidence, and the report's facts name the Windows version and the driver."""
    out = windows_host / "out"
    res = run(out, PY, "-c", "print('step 1 loss 2.0')", FORENSICS_SNAPSHOT_WAIT_S="60",
              PATH=f"{windows_host / 'bin'}:/usr/bin:/bin", FORENSICS_FAKE_NVML="absent")  # the driver: from CIM
    assert res.returncode == 0, res.stderr
    b = bundle(out)
    assert (b / "host" / "windows-video.txt").exists()
    analysis = analyze([str(b)])
    from_cim = [e for e in analysis.timeline.events
                if e.origin is not None and "windows-" in str(e.origin.path)]
    assert from_cim == []
    [facts] = bundle_facts([str(b)])
    software = facts.software()
    assert software["OS"] == "Microsoft Windows 11 Pro" and software["NVIDIA driver"] == "565.90"
