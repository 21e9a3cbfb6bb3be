"""``nvidia-smi topo -m``: the GPU/NIC connection matrix and its legend.

One ``gpu-info`` event per GPU pair (``link`` = X, NV#, PIX, PXB, PHB, NODE, SYS) and one per GPU
with its CPU and NUMA affinity. A pair joined only through a host bridge or the inter-socket
link (PHB, NODE, SYS) has no direct PCIe peer-to-peer path: that matters for P2P faults and
NCCL transport choice (report 1: the second GPU behind the chipset).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import smi_event

from forensics.events import Severity
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["LINK_MEANING", "PARSER"]

_ANSI = lazy_compile(r"\x1b\[[0-9;]*m|\[\d+m")
_DEVICE = lazy_compile(r"^(GPU\d{1,6}|NIC\d{1,6}|mlx\d*_\d+|mlx5_\w+)$")
_LINK = lazy_compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")

#: The legend nvidia-smi prints, shortened.
LINK_MEANING = {
    "X": "self",
    "PIX": "at most one PCIe bridge",
    "PXB": "several PCIe bridges, no host bridge",
    "PHB": "PCIe and a PCIe host bridge (typically the CPU)",
    "NODE": "PCIe and the interconnect between host bridges of one NUMA node",
    "SYS": "PCIe and the SMP interconnect between NUMA nodes (QPI/UPI)",
    "SOC": "PCIe and the SMP interconnect between CPU sockets",
}
_NO_P2P = ("PHB", "NODE", "SYS", "SOC")


def _meaning(link: str) -> str:
    if link.startswith("NV"):
        return f"a bonded set of {link[2:]} NVLinks"
    return LINK_MEANING.get(link, link)


class NvidiaSmiTopoParser:
    name = "nvidia-smi-topo"
    #: producer versions its real samples hold (the recorded samples (their README))
    tested_with = {"NVIDIA driver": ("580.159", "580.159.04")}
    samples = (
        # Shape: `nvidia-smi topo -m` on a two-GPU desktop (matrix, affinity columns and legend as
        # nvidia-smi prints them); the PHB link matches report 1's CPU-slot + chipset-slot layout.
        """\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tPHB\t0-31\t0\t\tN/A
GPU1\tPHB\t X \t0-31\t0\t\tN/A

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(_ANSI.sub("", h) for h in head[:40])
        if "CPU Affinity" in text and re.search(r"^\s*GPU0\s", text, re.M):
            return 0.95
        if "Legend:" in text and "X    = Self" in text:
            return 0.9
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        devices: list[str] = []
        for line in doc.lines():
            text = _ANSI.sub("", line.text).rstrip()
            tokens = text.split()
            if not tokens:
                continue
            if _DEVICE.match(tokens[0]) and (len(tokens) == 1 or not _LINK.match(tokens[1])):
                devices = [t for t in tokens if _DEVICE.match(t)]  # the header row (maybe repeated)
                continue
            if not devices or not re.match(r"^GPU\d{1,6}$", tokens[0]):
                continue
            row = tokens[0]
            links = tokens[1: 1 + len(devices)]
            if len(links) < len(devices) or not all(_LINK.match(t) for t in links):
                continue
            rest = tokens[1 + len(devices):]
            me = row[3:]
            for other, link in zip(devices, links, strict=True):
                if not other.startswith("GPU") or other == row or int(other[3:]) <= int(me):
                    continue
                note = " — no direct PCIe peer-to-peer path" if link in _NO_P2P else ""
                yield smi_event(ctx, ctx.origin(line), "gpu-info",
                                f"{row} ↔ {other}: {link} ({_meaning(link)}){note}", gpu=me,
                                severity=Severity.INFO,
                                attrs={"tool": self.name, "a": me, "b": other[3:], "link": link,
                                       "p2p_direct": link not in _NO_P2P})
            if rest:
                attrs = {"tool": self.name, "cpu_affinity": rest[0]}
                if len(rest) > 1:
                    attrs["numa_affinity"] = rest[1]
                yield smi_event(ctx, ctx.origin(line), "gpu-info",
                                f"{row}: CPU affinity {rest[0]}" + (f", NUMA {rest[1]}" if len(rest) > 1 else ""),
                                gpu=me, attrs=attrs)


PARSER = NvidiaSmiTopoParser()
