"""The kernel's boot-time PCIe bandwidth line (``… available PCIe bandwidth, limited by …``): a
``pcie-link`` event that says what limits the link (width / speed) and whether the device is a GPU
(from the same file's PCI enumeration lines); a finding only for a GPU below its own capability."""

from __future__ import annotations

from pathlib import Path

from forensics.analysis import Options, analyze, parse_input
from forensics.ingest.sources import expand_inputs

DATA = Path(__file__).parent / "data" / "health"


def _links(name: str) -> list:
    (item,) = list(expand_inputs([str(DATA / name)]))
    _report, events, _m = parse_input(item, Options())
    return [e for e in events if e.kind == "pcie-link"]


def _risks(name: str) -> list[str]:
    return [f.signature for f in analyze([str(DATA / name)], Options()).findings if f.risk]


def test_gpu_behind_slower_port_is_a_speed_limited_gpu_link() -> None:
    (link,) = _links("kata-h100-vm-pcie-speed-limited.dmesg")
    assert link.attrs["device"] == "gpu" and link.gpu == "0000:02:00.0"
    assert link.attrs["limited"] == "speed"
    assert (link.attrs["gen"], link.attrs["gen_max"], link.attrs["width"], link.attrs["width_max"]) == (4, 5, 16, 16)
    assert "pcie-link-degraded" in _risks("kata-h100-vm-pcie-speed-limited.dmesg")
    assert analyze([str(DATA / "kata-h100-vm-pcie-speed-limited.dmesg")], Options()).verdict.root_cause is None


def test_speed_limit_of_an_unidentified_device_is_not_reported() -> None:
    links = _links("stas00-dmesg-grep-limited-by.txt")
    assert len(links) == 2 and all(e.attrs["device"] == "unknown" for e in links)
    assert "pcie-link-degraded" not in _risks("stas00-dmesg-grep-limited-by.txt")


def test_width_limited_bridge_is_not_a_gpu_finding() -> None:
    (link,) = _links("rpi712-bridge-x1-limited.dmesg")
    assert link.attrs["device"] == "other" and link.attrs["limited"] == "width"
    assert "pcie-link-degraded" not in _risks("rpi712-bridge-x1-limited.dmesg")
