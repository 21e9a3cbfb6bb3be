"""The ``lspci -t`` / ``-tv`` tree (parsers/lspci_tree.py), the PCI model that reads a GPU's chain
(forensics/pcitree.py) and the topology facts built from it (forensics/timeline/topology.py), on real outputs
(tests/data/lspci_tree/SOURCES.md says where each comes from and which were held out)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from forensics.parsers.common.base import ParseContext
from forensics.parsers.lspci_tree import parse_tree_lines
from forensics.parsers.registry import detect

from forensics.analysis import analyze, to_json_dict
from forensics.events import Event, Origin, Severity, TsSource
from forensics.ingest.textdoc import TextDocument
from forensics.pcitree import PciDevice, PciTree, place
from forensics.text_report import render_text
from forensics.timeline.topology import Topology, read_topology

DATA = Path(__file__).parent / "data" / "lspci_tree"
ROOT = Path(__file__).resolve().parent.parent


def _tree(name: str) -> PciTree:
    doc = TextDocument.from_bytes((DATA / name).read_bytes(), name)
    tree, _, first = parse_tree_lines(doc.lines())
    assert first is not None
    return tree


def _topology(*names: str, extra: tuple[Event, ...] = ()) -> Topology:
    a = analyze([str(DATA / n) for n in names])
    return read_topology([*a.timeline.events, *extra], a.timeline.metrics)


def _roles(p: object) -> list[tuple[str, str]]:
    return [(h.role, h.bdf) for h in p.hops]  # type: ignore[attr-defined]


def _smi_gpu(bus: str, host: str | None = None) -> Event:
    """A GPU as nvidia-smi or NVML names it (the other inputs a bare ``lspci -t`` is joined with)."""
    return Event(ts=None, ts_source=TsSource.NONE, source="file:smi", kind="gpu-info", severity=Severity.INFO,
                 message=f"{bus} link", origin=Origin("smi.txt", 1), host=host, gpu=bus,
                 attrs={"tool": "nvidia-smi", "gen": 3, "width": 16, "gen_max": 3, "width_max": 16})


def smi_q_text(buses: list[str]) -> str:
    """An ``nvidia-smi -q`` text (its layout, invented values) naming ``buses`` at Gen3 x16: the GPUs
    that a bare ``lspci -t`` does not name, as a bundle's snapshot would give them."""
    out = ["==============NVSMI LOG==============", "", f"Attached GPUs                             : {len(buses)}"]
    for bus in buses:
        out += [f"GPU 0000{bus.upper()}", "    Product Name                          : Tesla M60", "    PCI",
                "        GPU Link Info", "            PCIe Generation", "                Max                       : 3",
                "                Current                   : 3", "            Link Width",
                "                Max                       : 16x",
                "                Current                   : 16x", ""]
    return "\n".join(out) + "\n"


# --- developed against -------------------------------------------------------------------------------


def test_a_v100_below_a_plx_switch_is_behind_a_switch_with_its_chain() -> None:
    doc = TextDocument.from_bytes((DATA / "l2fwd-nv-v100-plx.txt").read_bytes(), "t")
    parser, score = detect(doc.head())
    assert parser.name == "lspci-tree" and score >= 0.9
    records = list(parser.parse(doc, ParseContext(path="t", source="file:t")))
    tree_ev, path_ev = records
    assert tree_ev.kind == "pci-tree" and path_ev.kind == "pcie-path" and path_ev.origin.line == 3
    assert path_ev.gpu == "0000:b6:00.0" and path_ev.attrs["attachment"] == "switch"
    assert [(h["role"], h["pci"]) for h in path_ev.attrs["chain"]] == [
        ("root port", "0000:b2:00.0"), ("switch upstream", "0000:b3:00.0"), ("switch downstream", "0000:b4:10.0")]
    assert path_ev.attrs["switch"] == "0000:b3:00.0"
    # The NIC beside it is below the same switch but is no GPU.
    assert _tree("l2fwd-nv-v100-plx.txt").gpus() == ["0000:b6:00.0"]


def test_four_gpus_on_four_root_complexes_are_each_on_a_cpu_root_port() -> None:
    tree = _tree("esc8000a-e12-4gpu.txt")
    assert {f"{d:04x}:{b:02x}" for d, b in tree.roots} == {f"0000:{b}" for b in ("00", "20", "40", "60", "80",
                                                                                  "a0", "c0", "e0")}
    # The audio functions (.1) of the cards and the ASPEED BMC are not GPUs.
    assert tree.gpus() == ["0000:01:00.0", "0000:41:00.0", "0000:c1:00.0", "0000:e1:00.0"]
    topo = _topology("esc8000a-e12-4gpu.txt")
    assert [(g.gpu, g.attachment) for g in topo.gpus] == [(g, "cpu") for g in tree.gpus()]
    assert [_roles(g.placement) for g in topo.gpus][2] == [("root port", "0000:c0:01.1")]
    assert topo.shared == []
    # The NVMe drives below two switch levels of root port 60:01.1: two switches, no chipset name.
    nvme = place(tree, "0000:65:00.0")
    assert nvme is not None and nvme.attachment == "switch" and nvme.switch == "0000:63:00.0"
    assert [r for r, _ in _roles(nvme)] == ["root port", "switch upstream", "switch downstream",
                                            "switch upstream", "switch downstream"]


def test_a_gpu_on_an_intel_pch_root_port_is_behind_the_chipset_and_the_list_names_the_port() -> None:
    alone = _topology("lpic-laptop-mx150-tree.txt")
    (gpu,) = alone.gpus
    assert gpu.gpu == "0000:01:00.0" and gpu.attachment == "chipset"
    assert "root port 0000:00:1c.0 is at device 1c of the root bus, where Intel's chipset (PCH)" in gpu.why
    joined = _topology("lpic-laptop-mx150-tree.txt", "lpic-laptop-mx150-lspci.txt")
    (gpu,) = joined.gpus
    assert gpu.placement is not None
    assert gpu.placement.hops[0].name == "Intel Corporation Sunrise Point-LP PCI Express Root Port #1"
    assert gpu.why.startswith("lspci tree: root port 0000:00:1c.0 (Intel Corporation Sunrise Point-LP PCI Express "
                              "Root Port #1) → GPU; root port 0000:00:1c.0 is at device 1c")
    # The plain list alone gives names and classes (which functions are bridges), not the bus ranges.
    (listed,) = [e for e in analyze([str(DATA / "lpic-laptop-mx150-lspci.txt")]).timeline.events
                 if e.kind == "pci-tree"]
    port = PciTree.from_attrs(listed.attrs).devices["0000:00:1c.0"]
    assert (port.cls, port.secondary, port.is_bridge) == ("PCI bridge", None, True)


def test_two_gpus_on_cpu_root_ports_beside_a_chained_amd_chipset() -> None:
    tree = _tree("hetero-node0-raphael.txt")
    topo = _topology("hetero-node0-raphael.txt")
    assert [(g.gpu, g.attachment, _roles(g.placement)) for g in topo.gpus] == [
        ("0000:01:00.0", "cpu", [("root port", "0000:00:01.1")]),
        ("0000:03:00.0", "cpu", [("root port", "0000:00:01.3")])]
    # The Wi-Fi card sits below the second of two daisy-chained chipsets on root port 02.1.
    wifi = place(tree, "0000:0e:00.0")
    assert wifi is not None and wifi.attachment == "chipset"
    assert [b for _, b in _roles(wifi)] == ["0000:00:02.1", "0000:04:00.0", "0000:05:08.0", "0000:0b:00.0",
                                            "0000:0c:04.0"]
    assert "600 Series Chipset" in wifi.why and wifi.switch == "0000:0b:00.0"


def test_a_quoted_tree_keeps_its_columns_and_names_the_switch_by_its_management_function() -> None:
    (gpu,) = _topology("aspeed-switchtec-quoted.txt").gpus
    assert gpu.gpu == "0008:05:00.0" and gpu.attachment == "switch"
    assert _roles(gpu.placement) == [("root port", "0008:00:00.0"), ("switch upstream", "0008:01:00.0"),
                                     ("switch downstream", "0008:02:02.0")]
    assert "PMC-Sierra Inc. Device 4028" in gpu.why


# --- held out: expectations written before these files were first run --------------------------------


def test_held_out_wrx90_two_gpus_on_cpu_root_ports_and_the_chipset_elsewhere() -> None:
    tree = _tree("wrx90-2gpu.txt")
    topo = _topology("wrx90-2gpu.txt")
    assert [(g.gpu, g.attachment, _roles(g.placement)) for g in topo.gpus] == [
        ("0000:c1:00.0", "cpu", [("root port", "0000:c0:01.1")]),
        ("0000:c2:00.0", "cpu", [("root port", "0000:c0:03.1")])]
    assert topo.shared == []
    beside_sata = place(tree, "0000:8d:00.0")  # AMD Device 43f8, next to the 600 Series Chipset SATA controller
    assert beside_sata is not None and beside_sata.attachment == "chipset"
    assert "600 Series Chipset SATA Controller (0000:8e:00.0)" in beside_sata.why


def test_held_out_b550_the_gtx_on_the_cpu_and_the_radeon_behind_the_chipset() -> None:
    tree = _tree("b550-vfio-gtx1060.txt")
    assert tree.gpus() == ["0000:08:00.0"]  # the Radeon is no NVIDIA GPU
    (gpu,) = _topology("b550-vfio-gtx1060.txt").gpus
    assert (gpu.gpu, gpu.attachment) == ("0000:08:00.0", "cpu")
    radeon = place(tree, "0000:04:00.0")
    assert radeon is not None and radeon.attachment == "chipset"
    assert _roles(radeon) == [("root port", "0000:00:01.2"), ("switch upstream", "0000:02:00.2"),
                              ("switch downstream", "0000:03:00.0")]
    assert "500 Series Chipset" in radeon.why


def test_held_out_intel_desktop_gpu_on_the_cpu_and_the_nic_on_the_pch() -> None:
    tree = _tree("hetero-node1-intel.txt")
    (gpu,) = _topology("hetero-node1-intel.txt").gpus
    assert (gpu.gpu, gpu.attachment, _roles(gpu.placement)) == ("0000:01:00.0", "cpu",
                                                                [("root port", "0000:00:01.0")])
    nic = place(tree, "0000:02:00.0")
    assert nic is not None and nic.attachment == "chipset" and "device 1c" in nic.why


def test_held_out_k1_and_m60_gpus_below_their_on_card_switches_share_them() -> None:
    buses = ["0000:44:00.0", "0000:45:00.0", "0000:46:00.0", "0000:47:00.0", "0000:06:00.0", "0000:07:00.0"]
    topo = _topology("k1-m60-plx-quoted.txt", extra=tuple(_smi_gpu(b) for b in buses))
    shared = {s.switch: [g.gpu for g in s.gpus] for s in topo.shared}
    assert shared == {"0000:42:00.0": buses[:4], "0000:04:00.0": sorted(buses[4:])}
    m60 = next(s for s in topo.shared if s.switch == "0000:04:00.0")
    assert m60.root == "0000:00:03.0"
    assert ("GPU 0000:06:00.0 and GPU 0000:07:00.0 share the PCIe switch at 0000:04:00.0, below root port "
            "0000:00:03.0: traffic between them stays in the switch") in topo.facts()
    # No names at all (`lspci -t`): the chain is stated, the attachment is not claimed.
    assert all(g.placement is not None and not g.attachment for g in topo.gpus)


def test_held_out_unnamed_tree_joined_with_bus_ids_from_nvidia_smi() -> None:
    topo = _topology("club3090-858-t-excerpt.txt", extra=(_smi_gpu("0000:01:00.0"), _smi_gpu("0000:03:00.0")))
    assert [(g.gpu, _roles(g.placement), g.attachment) for g in topo.gpus] == [
        ("0000:01:00.0", [("root port", "0000:00:01.1")], ""), ("0000:03:00.0", [("root port", "0000:00:01.4")], "")]
    assert _topology("club3090-858-t-excerpt.txt").gpus == []  # nothing names a GPU: none is invented
    fact = topo.facts()[0]
    assert fact == "GPU 0000:01:00.0: PCIe Gen3 x16 — lspci tree: root port 0000:00:01.1 → GPU"


# --- the tree beside the other PCIe facts ------------------------------------------------------------


def test_the_tree_has_the_last_word_and_agreeing_widths_are_added() -> None:
    """Link widths and the topology matrix say chipset for a x4 GPU; the tree agrees for one GPU and
    puts the other on a CPU root port (a CPU x4 slot would read the same by width alone)."""
    tree_events = analyze([str(DATA / "lpic-laptop-mx150-tree.txt")]).timeline.events
    topo_ev = Event(ts=None, ts_source=TsSource.NONE, source="file:topo", kind="gpu-info", severity=Severity.INFO,
                    message="GPU0 GPU1 PHB", origin=Origin("topo.txt", 2),
                    attrs={"tool": "nvidia-smi-topo", "a": "0", "b": "1", "link": "PHB"})

    def smi(bus: str, width: int) -> Event:
        return Event(ts=None, ts_source=TsSource.NONE, source="file:smi", kind="gpu-info", severity=Severity.INFO,
                     message=bus, origin=Origin("smi.txt", 1), gpu=bus,
                     attrs={"tool": "nvidia-smi", "gen": 3, "width": width, "gen_max": 3, "width_max": 16})

    # The laptop's MX150 (01:00.0, PCH root port) at x4 beside a x16 peer the tree does not show.
    topo = read_topology([*tree_events, topo_ev, smi("0000:01:00.0", 4), smi("0000:02:00.0", 16)], [])
    chip, peer = topo.gpus
    assert chip.attachment == "chipset" and chip.why.startswith("lspci tree: root port 0000:00:1c.0")
    assert chip.why.endswith("; x4 link while GPU 1 runs x16; path PHB, only through the host")
    assert peer.attachment == "cpu"  # by width, the peer of the chipset GPU
    # A tree that puts the x4 GPU on a CPU root port overrules the width reasoning.
    cpu_tree = PciTree(roots={(0, 0)})
    for dev in (PciDevice("0000:00:00.0", "Intel Corporation Host Bridge"), PciDevice("0000:00:01.0", "", "", 1, 1),
                PciDevice("0000:01:00.0", "NVIDIA Corporation GA102")):
        cpu_tree.add(dev)
    tree_ev = Event(ts=None, ts_source=TsSource.NONE, source="file:t", kind="pci-tree", severity=Severity.INFO,
                    message="tree", origin=Origin("t.txt", 1), attrs={"tool": "lspci-tree", **cpu_tree.to_attrs()})
    topo = read_topology([tree_ev, topo_ev, smi("0000:01:00.0", 4), smi("0000:02:00.0", 16)], [])
    assert topo.gpus[0].attachment == "cpu" and topo.gpus[1].attachment == ""


def test_lspci_vv_bridges_give_the_chain_and_port_types_without_a_drawing() -> None:
    text = """00:01.0 PCI bridge: Intel Corporation Xeon E3-1200 v3/4th Gen Core Processor PCI Express x16 Controller (rev 06)
\tBus: primary=00, secondary=01, subordinate=03, sec-latency=0
\tCapabilities: [a0] Express (v2) Root Port (Slot+), MSI 00
01:00.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
\tBus: primary=01, secondary=02, subordinate=03, sec-latency=0
\tCapabilities: [68] Express (v2) Upstream Port, MSI 00
02:08.0 PCI bridge: PLX Technology, Inc. PEX 8747 48-Lane, 5-Port PCI Express Gen 3 (8.0 GT/s) Switch (rev ca)
\tBus: primary=02, secondary=03, subordinate=03, sec-latency=0
\tCapabilities: [68] Express (v2) Downstream Port (Slot+), MSI 00
03:00.0 VGA compatible controller: NVIDIA Corporation GP102 [GeForce GTX 1080 Ti] (rev a1) (prog-if 00 [VGA controller])
\tCapabilities: [78] Express (v2) Legacy Endpoint, MSI 00
\t\tLnkCap:\tPort #0, Speed 8GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <512ns, L1 <4us
\t\tLnkSta:\tSpeed 8GT/s (ok), Width x16 (ok)
"""  # noqa: E501  (shape of lspci -vv; the bridge names are those of the PEX 8747 and Haswell ports)
    doc = TextDocument.from_bytes(text.encode(), "vv")
    parser, _ = detect(doc.head())
    records = list(parser.parse(doc, ParseContext(path="vv", source="file:vv")))
    (tree_ev,) = [r for r in records if r.kind == "pci-tree"]
    tree = PciTree.from_attrs(tree_ev.attrs)
    assert tree.devices["0000:01:00.0"].port == "Upstream Port" and tree.devices["0000:00:01.0"].secondary == 1
    gpu = place(tree, "0000:03:00.0")
    assert gpu is not None and gpu.attachment == "switch"
    assert gpu.why == "a PCIe switch between the root port and the GPU"
    assert gpu.hops[1].name.startswith("PLX Technology, Inc. PEX 8747")


def test_analyze_text_json_and_the_reports_state_the_tree_facts() -> None:
    from forensics.analysis import bundle_facts
    from forensics.postmortem.html_report import render_html
    from forensics.postmortem.markdown import render_markdown
    from forensics.postmortem.model import build_report

    paths = [str(DATA / "lpic-laptop-mx150-tree.txt"), str(DATA / "lpic-laptop-mx150-lspci.txt")]
    a = analyze(paths)
    text = " ".join(render_text(a).split())
    assert ("PCIe topology (facts): - GPU 0000:01:00.0: PCIe link unknown — behind the chipset (lspci tree: "
            "root port") in text
    data = json.loads(json.dumps(to_json_dict(a)))
    schema = json.loads((ROOT / "docs" / "analyze.schema.json").read_text())
    jsonschema.validate(data, schema)
    (gpu,) = data["topology"]["gpus"]
    assert gpu["attachment"] == "chipset" and gpu["chain"][0] == {
        "pci": "0000:00:1c.0", "role": "root port",
        "name": "Intel Corporation Sunrise Point-LP PCI Express Root Port #1"}
    assert {s["kind"] for s in data["sources"]} == {"lspci-tree", "lspci"}
    report = build_report(a, bundle_facts(paths))
    md, page = render_markdown(a, report), render_html(a, report)
    assert "**PCIe attachment** (from the link widths, the topology matrix and the lspci tree)" in md
    assert "behind the chipset (lspci tree: root port 0000:00:1c.0" in md
    assert "<h3>PCIe attachment</h3>" in page and "behind the chipset (lspci tree: root port" in page


def test_a_shared_switch_is_in_the_text_and_json_and_a_tree_of_any_bytes_never_raises(tmp_path: Path) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    buses = ["0000:06:00.0", "0000:07:00.0"]
    smi = tmp_path / "nvidia-smi-q.txt"
    smi.write_text(smi_q_text(buses))
    a = analyze([str(DATA / "k1-m60-plx-quoted.txt"), str(smi)])
    assert {"host": "", "switch": "0000:04:00.0", "name": None, "root": "0000:00:03.0",
            "gpus": buses} in to_json_dict(a)["topology"]["shared"]
    text = " ".join(render_text(a).split())
    assert "GPU 0000:06:00.0: PCIe Gen3 x16 — lspci tree: root port 0000:00:03.0 → switch upstream 0000:04:00.0" in text
    assert "share the PCIe switch at 0000:04:00.0, below root port 0000:00:03.0" in text

    @settings(max_examples=150, deadline=None)
    @given(st.text(alphabet="-+\\| []0123456789abcdef.:>\nNVIDIA", max_size=400))
    def fuzz(text: str) -> None:
        tree, _, _ = parse_tree_lines(TextDocument.from_bytes(("-[0000:00]-+-00.0\n" + text).encode(), "f").lines())
        for gpu in list(tree.devices)[:20]:
            place(tree, gpu)

    fuzz()


def test_the_tree_and_list_sections_of_an_nvidia_bug_report_are_read() -> None:
    """nvidia-bug-report.sh writes ``lspci -nntv`` then ``lspci -nn``. Shape: its rulers and headers; the
    lines are those of the B550 sample with the ids its page's IOMMU listing gives."""
    ruler = "_" * 44
    text = "\n".join([
        ruler, "", "Start of NVIDIA bug report log file.  Please include this file, along", "",
        "nvidia-bug-report.sh Version: 33782476", "", ruler, "", "/usr/bin/lspci -nntv", "",
        "-[0000:00]-+-00.0  Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex [1022:1480]",
        "           +-01.2-[02-07]--+-00.0  Advanced Micro Devices, Inc. [AMD] 500 Series Chipset USB 3.1 XHCI "
        "Controller [1022:43ee]",
        "           |               \\-00.2-[03-07]----00.0-[04]----00.0  NVIDIA Corporation GP106 [GeForce GTX "
        "1060 3GB] [10de:1c02]",
        "           \\-03.1-[08]--+-00.0  NVIDIA Corporation GP106 [GeForce GTX 1060 3GB] [10de:1c02]",
        "                        \\-00.1  NVIDIA Corporation GP106 High Definition Audio Controller [10de:10f1]",
        "", ruler, "", "/usr/bin/lspci -nn", "",
        "00:00.0 Host bridge [0600]: Advanced Micro Devices, Inc. [AMD] Starship/Matisse Root Complex [1022:1480]",
        "00:01.2 PCI bridge [0604]: Advanced Micro Devices, Inc. [AMD] Starship/Matisse GPP Bridge [1022:1483]",
        "02:00.0 USB controller [0c03]: Advanced Micro Devices, Inc. [AMD] 500 Series Chipset USB 3.1 XHCI "
        "Controller [1022:43ee]",
        "02:00.2 PCI bridge [0604]: Advanced Micro Devices, Inc. [AMD] 500 Series Chipset Switch Upstream Port "
        "[1022:43e9]",
        "03:00.0 PCI bridge [0604]: Advanced Micro Devices, Inc. [AMD] Device [1022:43ea]",
        "04:00.0 VGA compatible controller [0300]: NVIDIA Corporation GP106 [GeForce GTX 1060 3GB] [10de:1c02] "
        "(rev a1)",
        "08:00.0 VGA compatible controller [0300]: NVIDIA Corporation GP106 [GeForce GTX 1060 3GB] [10de:1c02] "
        "(rev a1)",
        "", ruler, ""])
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "nvidia-bug-report.log"
        path.write_text(text)
        a = analyze([str(path)])
    assert a.sources[0].kind == "nvidia-bug-report"
    gpus = {g.gpu: g for g in a.topology.gpus}
    assert gpus["0000:08:00.0"].attachment == "cpu"
    chip = gpus["0000:04:00.0"]
    assert chip.attachment == "chipset" and chip.placement is not None
    assert chip.placement.hops[1].name == ("Advanced Micro Devices, Inc. [AMD] 500 Series Chipset Switch Upstream Port "
                                           "[1022:43e9]")
    assert "switch upstream 0000:02:00.2 is the chipset's" in chip.why


def test_a_small_tree_above_a_traceback_leaves_the_file_to_the_process_output_reader(tmp_path: Path) -> None:
    train = Path(__file__).parent / "corpus" / "cases" / "windows-unknown-error-optimizer-step" / "train.log"
    pasted = tmp_path / "issue.txt"
    pasted.write_bytes((DATA / "l2fwd-nv-v100-plx.txt").read_bytes() + b"\n" + train.read_bytes())
    a = analyze([str(pasted)])
    assert a.sources[0].kind != "lspci-tree"
    assert a.verdict.root_cause_id == analyze([str(train)]).verdict.root_cause_id == "cuda-unknown-error"
