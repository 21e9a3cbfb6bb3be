"""``nvidia-smi -q -x``: the XML form of ``nvidia-smi -q`` (``<nvidia_smi_log>``, one ``<gpu id=…>``
per GPU). The XML is mapped onto the same section paths as the text form and read by
:func:`~forensics.parsers.nvidia_smi_q.facts_from_leaves`, so both give the same events.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record, whole_text
from forensics.parsers.common.nvidia_smi_common import GpuFacts, facts_records, normalize_bus_id, parse_ctime
from forensics.parsers.nvidia_smi_q import Leaves, facts_from_leaves

from forensics.events import TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

# XML tag → the section/key name `nvidia-smi -q` prints (only those facts_from_leaves reads).
_TAGS = {
    "product_name": "product name", "uuid": "gpu uuid", "serial": "serial number", "vbios_version": "vbios version",
    "ecc_errors": "ecc errors", "volatile": "volatile", "aggregate": "aggregate",
    "single_bit": "single bit", "double_bit": "double bit", "total": "total",
    "sram_correctable": "sram correctable", "sram_uncorrectable": "sram uncorrectable",
    "sram_uncorrectable_parity": "sram uncorrectable parity",
    "sram_uncorrectable_secded": "sram uncorrectable sec-ded",
    "dram_correctable": "dram correctable", "dram_uncorrectable": "dram uncorrectable",
    "aggregate_uncorrectable_sram_sources": "aggregate uncorrectable sram sources",
    "retired_pages": "retired pages", "pending_blacklist": "pending page blacklist",
    "pending_retirement": "pending page retirement",
    "remapped_rows": "remapped rows", "remapped_row_pending": "pending",
    "remapped_row_failure": "remapping failure occurred", "remapped_row_unc": "uncorrectable error",
    "gpu_recovery_action": "gpu recovery action",
    "pci": "pci", "pci_gpu_link_info": "gpu link info", "pcie_gen": "pcie generation",
    "max_link_gen": "max", "current_link_gen": "current", "device_current_link_gen": "device current",
    "max_device_link_gen": "device max", "link_widths": "link width", "max_link_width": "max",
    "current_link_width": "current", "replay_counter": "replays since reset",
    "clocks_event_reasons": "clocks event reasons", "clocks_throttle_reasons": "clocks throttle reasons",
    "temperature": "temperature", "gpu_temp": "gpu current temp",
    "gpu_power_readings": "gpu power readings", "power_readings": "power readings",
    "power_draw": "power draw", "average_power_draw": "average power draw",
    "instant_power_draw": "instantaneous power draw", "power_limit": "power limit",
    "current_power_limit": "current power limit",
    "fb_memory_usage": "fb memory usage", "used": "used",
    "utilization": "utilization", "gpu_util": "gpu", "memory_util": "memory",
    "clocks": "clocks", "sm_clock": "sm", "mem_clock": "memory",
}
_REASON_PREFIX = lazy_compile(r"^clocks_(?:event|throttle)_reasons?_")


def _leaves(elem: ET.Element, path: tuple[str, ...], out: Leaves) -> None:
    for child in elem:
        tag = child.tag
        if path and path[-1] in ("clocks event reasons", "clocks throttle reasons"):
            name = _REASON_PREFIX.sub("", tag).replace("_", " ")
        elif path and path[-1] == "aggregate uncorrectable sram sources":
            name = tag.replace("_", " ")
        else:
            name = _TAGS.get(tag, tag.replace("_", " "))
        if len(child):
            _leaves(child, path + (name,), out)
        else:
            out.append((path + (name,), (child.text or "").strip()))


class NvidiaSmiXmlParser:
    name = "nvidia-smi-xml"
    #: producer versions its real samples hold (the recorded samples' <driver_version>)
    tested_with = {"NVIDIA driver": ("580.159.04",)}
    samples = (
        # Shape: `nvidia-smi -q -x` (tag names as in NVIDIA's nvsmi DTD, including the SRAM-source
        # tags the catalog lists); values describe the report-1 RTX 5090 after a PCIe SRAM error.
        """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
	<timestamp>Thu Nov 14 10:12:00 2024</timestamp>
	<driver_version>566.14</driver_version>
	<attached_gpus>1</attached_gpus>
	<gpu id="00000000:01:00.0">
		<product_name>NVIDIA GeForce RTX 5090</product_name>
		<uuid>GPU-1c9d7c35-0f9e-4c1e-8f5e-3a2b1c0d9e8f</uuid>
		<pci>
			<pci_bus_id>00000000:01:00.0</pci_bus_id>
			<pci_gpu_link_info>
				<pcie_gen>
					<max_link_gen>5</max_link_gen>
					<current_link_gen>5</current_link_gen>
				</pcie_gen>
				<link_widths>
					<max_link_width>16x</max_link_width>
					<current_link_width>16x</current_link_width>
				</link_widths>
			</pci_gpu_link_info>
			<replay_counter>0</replay_counter>
		</pci>
		<ecc_errors>
			<volatile>
				<sram_correctable>0</sram_correctable>
				<sram_uncorrectable>2</sram_uncorrectable>
				<dram_correctable>0</dram_correctable>
				<dram_uncorrectable>0</dram_uncorrectable>
			</volatile>
			<aggregate>
				<sram_correctable>0</sram_correctable>
				<sram_uncorrectable>2</sram_uncorrectable>
				<dram_correctable>0</dram_correctable>
				<dram_uncorrectable>0</dram_uncorrectable>
				<aggregate_uncorrectable_sram_sources>
					<sram_l2>0</sram_l2>
					<sram_sm>0</sram_sm>
					<sram_microcontroller>0</sram_microcontroller>
					<sram_pcie>2</sram_pcie>
					<sram_other>0</sram_other>
				</aggregate_uncorrectable_sram_sources>
			</aggregate>
		</ecc_errors>
		<temperature>
			<gpu_temp>45 C</gpu_temp>
		</temperature>
	</gpu>
</nvidia_smi_log>
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:10])
        return 0.97 if "<nvidia_smi_log" in text else 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        raw = whole_text(doc, ctx)
        if raw is None:
            return
        text = raw.decode("utf-8", errors="replace")
        text = re.sub(r"<!DOCTYPE[^>\[]*>", "", text, count=1)  # the external DTD line only
        if "<!ENTITY" in text or "<!DOCTYPE" in text:
            ctx.warn("XML with an inline DTD refused")
            return
        start = text.find("<nvidia_smi_log")
        end = text.find("</nvidia_smi_log>")
        if start < 0 or end < 0:
            ctx.warn("no complete <nvidia_smi_log> element (file cut?)")
            return
        try:
            root = ET.fromstring(text[start:end + len("</nvidia_smi_log>")])
        except ET.ParseError as exc:
            ctx.warn(f"unreadable nvidia-smi XML ({exc})")
            return
        ts, ts_source = parse_ctime(root.findtext("timestamp") or "", ctx)
        if ts is None:
            ts_source = TsSource.NONE
        driver = (root.findtext("driver_version") or "").strip() or None
        gpu_offsets = [m.start() for m in re.finditer(rb"<gpu[\s>]", raw)]
        for i, gpu in enumerate(root.findall("gpu")):
            bus_text = gpu.get("id") or gpu.findtext("pci/pci_bus_id") or str(i)
            bus = normalize_bus_id(bus_text) or bus_text
            offset = gpu_offsets[i] if i < len(gpu_offsets) else 0
            facts = GpuFacts(gpu=bus, origin=ctx.origin(doc.line_at(offset)), driver=driver)
            leaves: Leaves = []
            _leaves(gpu, (), leaves)
            yield from facts_records(facts_from_leaves(facts, leaves), ctx, ts, ts_source, self.name)


PARSER = NvidiaSmiXmlParser()
