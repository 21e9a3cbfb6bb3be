"""``lspci -vv``/``-vvv`` (also ``-nn``, ``-D``, the ``-xxxx`` dumps of nvidia-bug-report) and the plain
``lspci`` / ``lspci -nn`` list: device headers and their PCIe ``LnkCap``/``LnkSta`` lines.

NVIDIA display devices (vendor 10de or "NVIDIA") give a ``gpu-info`` event; their link status a
``pcie-link`` event (``gen``/``width`` now and at most). A link excerpt pasted without its device
header is kept too (``gpu`` unknown). Speed below capability is normal at idle (GPUs drop to Gen1
to save power) and is reported at info; a narrower width is a warning.

When the text lists bridges, one ``pci-tree`` event at the end carries every device's name and class,
each bridge's ``Bus: primary=…, secondary=…, subordinate=…`` and its ``Express (v2) Root Port`` /
``Upstream Port`` / ``Downstream Port`` type (:class:`forensics.pcitree.PciTree`): the names and
port types that an ``lspci -tv`` drawing of the same host lacks, or the whole tree by itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import normalize_bus_id, smi_event

from forensics.events import Severity
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile
from forensics.pcitree import PciDevice, PciTree

__all__ = ["PARSER", "gen_of_speed"]

_DEVICE = lazy_compile(r"^((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+([^:]+?):\s+(.+)$")
_LNK = lazy_compile(r"^\s*(LnkCap|LnkSta):\s*(.*)$")
_SPEED = lazy_compile(r"Speed\s+(\d+(?:\.\d+)?)GT/s(?:\s*\((downgraded|ok)\))?")
_WIDTH = lazy_compile(r"Width\s+x(\d+)(?:\s*\((downgraded|ok)\))?")
_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
_BUS = lazy_compile(r"^\s+Bus:\s*primary=([0-9a-fA-F]{2}),\s*secondary=([0-9a-fA-F]{2}),"
                    r"\s*subordinate=([0-9a-fA-F]{2})")
_PORT = lazy_compile(r"^\s+Capabilities:.*\bExpress(?: \(v\d\))? (Root Port|Upstream Port|Downstream Port)")
_SUFFIX = lazy_compile(r"(?<!\s)\s*\((?:rev [0-9a-fA-F]+|prog-if [^)]*)\)\s*$")


def gen_of_speed(gts: float) -> int | None:
    """PCIe generation of a link speed in GT/s (2.5 → 1 … 64 → 6)."""
    return _GEN.get(gts)


class _Dev:
    def __init__(self, line: Line | None, bus: str | None, cls: str, desc: str) -> None:
        self.line, self.bus, self.cls, self.desc = line, bus, cls, desc
        self.cap: tuple[float | None, int | None] = (None, None)

    @property
    def nvidia(self) -> bool:
        return "NVIDIA" in self.desc or "[10de:" in self.desc

    @property
    def display(self) -> bool:
        return any(k in self.cls for k in ("VGA", "3D", "Display"))

    @property
    def wanted(self) -> bool:
        return self.line is None or (self.nvidia and self.display)


def _device_name(desc: str) -> str:
    """The device's name without lspci's ``(rev a1)`` / ``(prog-if 00 [VGA controller])`` tails."""
    prev = None
    while prev != desc:
        prev, desc = desc, _SUFFIX.sub("", desc)
    return desc.strip()


def _class_name(cls: str) -> str:
    return re.sub(r"\s*\[[0-9a-fA-F]{4}\]$", "", cls.strip())


class LspciParser:
    name = "lspci"
    samples = (
        # Real: LnkCap/LnkSta of an RTX 4090 on a riser, pasted without its header (corpus janhq183).
        """    LnkCap: Port #0, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <16us
    LnkSta: Speed 2.5GT/s (downgraded), Width x16 (ok)
""",
        # Shape: `lspci -vvv -nn` of an NVIDIA GPU (field layout as lspci prints it).
        """0c:00.0 VGA compatible controller [0300]: NVIDIA Corporation Device [10de:2c05] (rev a1) (prog-if 00 [VGA controller])
	Subsystem: Micro-Star International Co., Ltd. [MSI] Device [1462:5316]
	Capabilities: [60] Express (v2) Legacy Endpoint, MSI 00
		LnkCap:	Port #0, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <4us
		LnkSta:	Speed 16GT/s (ok), Width x4 (downgraded)
0c:00.1 Audio device [0403]: NVIDIA Corporation Device [10de:22e9] (rev a1)
		LnkSta:	Speed 16GT/s (ok), Width x4 (downgraded)
""",  # noqa: E501, W291
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:60])
        if re.search(r"^\s*LnkSta:\s*Speed", text, re.M) or re.search(r"^\s*LnkCap:\s*Port", text, re.M):
            return 0.9
        if head and _DEVICE.match(head[0]) and re.search(r"^\s+(Subsystem|Capabilities|Kernel driver in use):",
                                                         text, re.M):
            return 0.85
        lines = [t for t in head[:60] if t.strip()]
        listed = sum(1 for t in lines if _DEVICE.match(t))
        if listed >= 3 and listed >= 0.8 * len(lines):  # the plain `lspci` / `lspci -nn` list
            return 0.8
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        dev = _Dev(None, None, "", "")
        tree, pci, first = PciTree(), None, None
        for line in doc.lines():
            text = line.text
            m = _DEVICE.match(text)
            if m:
                bus = normalize_bus_id(m.group(1))
                dev = _Dev(line, bus, m.group(2), m.group(3))
                pci = PciDevice(bus, _device_name(m.group(3)), _class_name(m.group(2))) if bus else None
                if pci is not None:
                    tree.add(pci)
                    first = first or line
                if dev.wanted:
                    yield smi_event(ctx, ctx.origin(line), "gpu-info", f"{bus}: {m.group(3).strip()}", gpu=bus,
                                    attrs={"tool": self.name, "pci": bus, "class": m.group(2), "name": m.group(3)})
                continue
            if pci is not None and (bm := _BUS.match(text)):
                pci.secondary, pci.subordinate = int(bm.group(2), 16), int(bm.group(3), 16)
                continue
            if pci is not None and (pm := _PORT.match(text)):
                pci.port = pm.group(1)
                continue
            lm = _LNK.match(text)
            if not lm or not dev.wanted:
                continue
            sp, wd = _SPEED.search(lm.group(2)), _WIDTH.search(lm.group(2))
            speed = float(sp.group(1)) if sp else None
            width = int(wd.group(1)) if wd else None
            if lm.group(1) == "LnkCap":
                dev.cap = (speed, width)
                continue
            cap_speed, cap_width = dev.cap
            speed_down = (sp is not None and sp.group(2) == "downgraded") or (
                speed is not None and cap_speed is not None and speed < cap_speed)
            width_down = (wd is not None and wd.group(2) == "downgraded") or (
                width is not None and cap_width is not None and width < cap_width)
            attrs = {"tool": self.name, "pci": dev.bus, "speed_gts": speed, "gen": gen_of_speed(speed or 0),
                     "width": width, "gen_max": gen_of_speed(cap_speed or 0), "width_max": cap_width,
                     "speed_downgraded": speed_down, "width_downgraded": width_down}
            state = "width downgraded" if width_down else "speed downgraded (normal at idle)" if speed_down else "ok"
            cap = f" (capable of {cap_speed:g}GT/s x{cap_width})" if cap_speed and cap_width else ""
            yield smi_event(ctx, ctx.origin(line), "pcie-link",
                            f"{dev.bus + ' ' if dev.bus else ''}PCIe link {speed or '?'}GT/s x{width or '?'}{cap}: "
                            f"{state}", gpu=dev.bus,
                            severity=Severity.WARNING if width_down else Severity.INFO, attrs=attrs,
                            detail=f"{text.strip()}")
        if first is not None and any(d.is_bridge for d in tree.devices.values()):
            bridges = sum(1 for d in tree.devices.values() if d.is_bridge)
            yield smi_event(ctx, ctx.origin(first), "pci-tree",
                            f"PCI devices: {len(tree.devices)}, {bridges} bridges (names, classes, bus ranges)",
                            attrs={"tool": self.name, **tree.to_attrs()})


PARSER = LspciParser()
