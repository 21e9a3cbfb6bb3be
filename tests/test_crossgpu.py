"""The verdict for the first report's machine and the PCIe topology facts (forensics/timeline/topology.py,
forensics/match/crossgpu.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from forensics.analysis import analyze, to_json_dict
from forensics.events import Event, MetricSample, Origin, Severity, TsSource
from forensics.text_report import render_text
from forensics.timeline.topology import Topology, read_topology

DATA = Path(__file__).parent / "data"
HOST = DATA / "windows" / "report1-p2p-sram.xml"
MACHINE = DATA / "report1-machine"
GUEST = Path(__file__).parent / "corpus" / "cases" / "windows-unknown-error-optimizer-step" / "train.log"
RECORDED = Path(__file__).parent.parent / "samples" / "recorded"


def _report1(*extra: Path) -> list[str]:
    return [str(HOST), str(MACHINE / "nvidia-smi-topo.txt"), str(MACHINE / "nvidia-smi-q.txt"), str(GUEST),
            *map(str, extra)]


def test_report1_verdict_names_the_chipset_path_with_the_reports_remedies_and_rules_out_psu_and_heat() -> None:
    a = analyze(_report1())
    v = a.verdict
    assert v.root_cause_id == "p2p-sram-error"
    assert [f.signature for f in v.consequences] == ["tdr-reset", "cuda-unknown-error"]
    assert v.summary.startswith("Cause: the cross-GPU PCIe path over the chipset. GPU 1 (0000:0c:00.0) sits behind "
                                "the chipset (x4 link while GPU 0 runs x16; path PHB")
    assert v.root_cause is not None
    assert v.root_cause.facts["cross_gpu_path"] == {"gpu": "0000:0c:00.0", "index": "1", "attachment": "chipset",
                                                    "why": "x4 link while GPU 0 runs x16; path PHB, only through "
                                                           "the host", "path": "PHB", "peer": "0"}
    remedy = v.root_cause.remedy
    # The report's order: the second GPU off at the device level, then the cross-GPU traffic, then the platform.
    assert remedy[0].startswith("Test with the second GPU (GPU 1 (0000:0c:00.0), behind the chipset) disabled at "
                                "the device level") and "CUDA_VISIBLE_DEVICES" in remedy[0]
    assert "NCCL_P2P_DISABLE=1" in remedy[1] and "custom all-reduce" in remedy[1] and "offload" in remedy[1]
    assert all(k in remedy[2] for k in ("ReBAR", "ASPM", "IOMMU"))
    assert not any("nvidia-smi topo -m" in s for s in remedy)  # answered by the facts, not asked again
    assert sum("Device Manager" in s for s in remedy) == 1
    ruled = dict(v.ruled_out)
    assert ruled["psu-power-loss"].startswith("no Kernel-Power 41 (unexpected power loss) and no WHEA-Logger "
                                              "hardware error among the 4 Windows event(s) read")
    assert ruled["thermal-or-power-throttle"] == ("temperatures in range: GPU 0 (0000:01:00.0) at most 69 °C, "
                                                  "GPU 1 (0000:0c:00.0) at most 63 °C (below 85 °C, where GPUs "
                                                  "begin to slow for heat)")
    text = render_text(a)
    assert "  PCIe topology (facts):\n    - GPU 0 (0000:01:00.0): PCIe Gen5 x16 — on CPU lanes" in text
    assert "GPU 1 (0000:0c:00.0): PCIe Gen4 x4 — behind the chipset" in text
    assert "GPU 0 ↔ GPU 1: PHB (through a PCIe host bridge" in text
    assert "    - psu-power-loss: no Kernel-Power 41" in text
    data = json.loads(json.dumps(to_json_dict(a)))
    gpus = {g["gpu"]: g for g in data["topology"]["gpus"]}
    assert gpus["0000:0c:00.0"]["attachment"] == "chipset" and gpus["0000:0c:00.0"]["width"] == 4
    assert gpus["0000:01:00.0"]["attachment"] == "cpu" and gpus["0000:01:00.0"]["width_max"] == 16
    assert data["topology"]["paths"] == [{"host": "", "a": "0", "b": "1", "link": "PHB", "through_host": True}]
    assert {"signature": "psu-power-loss", "why": ruled["psu-power-loss"]} in data["verdict"]["ruled_out"]


def test_without_topology_the_p2p_verdict_keeps_the_topology_question_and_rules_nothing_out() -> None:
    v = analyze([str(HOST), str(GUEST)]).verdict
    assert v.root_cause_id == "p2p-sram-error" and not v.summary.startswith("Cause:")
    assert v.root_cause is not None and any("nvidia-smi topo -m" in s for s in v.root_cause.remedy)
    assert "psu-power-loss" not in dict(v.ruled_out)


def _winevent(provider: str, event_id: int) -> Event:
    return Event(ts=1773522450000000000, ts_source=TsSource.EXACT, source="winevent", kind="winevent",
                 severity=Severity.ERROR, message=f"{provider} {event_id}", origin=Origin("x.xml", 1),
                 attrs={"provider": provider, "event_id": event_id})


def test_a_whea_or_kernel_power_41_event_keeps_the_psu_in_question(tmp_path: Path) -> None:
    from forensics.match.crossgpu import _psu_reason

    for extra in (_winevent("Microsoft-Windows-WHEA-Logger", 17), _winevent("Microsoft-Windows-Kernel-Power", 41)):
        assert _psu_reason([_winevent("nvlddmkm", 14), extra]) is None
    assert _psu_reason([_winevent("nvlddmkm", 14)]) is not None
    assert _psu_reason([]) is None  # no Windows events read: nothing to say about Kernel-Power 41


def test_hot_gpu_keeps_thermals_in_question() -> None:
    hot = (DATA / "report1-machine" / "nvidia-smi-q.txt").read_text().replace("69 C", "91 C")
    from forensics.match.crossgpu import _thermal_reason

    samples = [MetricSample(ts=1, ts_source=TsSource.EXACT, gpu="0000:01:00.0", values={"temp_c": 91.0},
                            origin=Origin("nvml.jsonl", 1))]
    assert "91 C" in hot and _thermal_reason(samples, read_topology([], samples)) is None


def _topo_event(a: str, b: str, link: str, host: str = "n1") -> Event:
    return Event(ts=None, ts_source=TsSource.NONE, source="file:topo", kind="gpu-info", severity=Severity.INFO,
                 message=f"GPU{a} ↔ GPU{b}: {link}", origin=Origin("topo.txt", 1), host=host, gpu=a,
                 attrs={"tool": "nvidia-smi-topo", "a": a, "b": b, "link": link})


def _link(bus: str, width: float, width_max: float, host: str = "n1") -> MetricSample:
    return MetricSample(ts=1, ts_source=TsSource.EXACT, gpu=bus, host=host, origin=Origin("nvml.jsonl", 1),
                        values={"pcie_gen": 4.0, "pcie_gen_max": 4.0, "pcie_width": width, "pcie_width_max": width_max})


def _pair(link: str, a: tuple[str, float, float], b: tuple[str, float, float]) -> Topology:
    return read_topology([_topo_event("0", "1", link)], [_link(*a), _link(*b)])


def test_topology_facts_tell_chipset_switch_and_cpu_apart() -> None:
    chip = _pair("SYS", ("0000:01:00.0", 16, 16), ("0000:41:00.0", 4, 4))
    assert [g.attachment for g in chip.gpus] == ["cpu", "chipset"] and chip.gpus[1].index == "1"
    switch = _pair("PIX", ("0000:01:00.0", 16, 16), ("0000:02:00.0", 16, 16))
    assert [g.attachment for g in switch.gpus] == ["switch", "switch"] and not switch.chipset_gpus()
    # Two x16 GPUs across sockets: a SYS path, but no GPU is called chipset-attached.
    sockets = _pair("SYS", ("0000:01:00.0", 16, 16), ("0000:81:00.0", 16, 16))
    assert [g.attachment for g in sockets.gpus] == ["", ""] and sockets.paths[0].through_host
    # A narrow link behind a switch (PIX) is not a chipset slot.
    narrow = _pair("PIX", ("0000:01:00.0", 16, 16), ("0000:02:00.0", 4, 16))
    assert not narrow.chipset_gpus()
    assert "PCIe Gen4 x4 (max Gen4 x16)" in " ".join(narrow.facts())


def test_recorded_two_gpu_nvlink_bundle_has_paths_but_no_chipset_claim_or_ruled_out_psu() -> None:
    a = analyze([str(RECORDED / "collective-desync-2gpu" / "bundle")])
    topo = a.topology
    assert [p.link for p in topo.paths] == ["NV18"] and not topo.chipset_gpus()
    assert "psu-power-loss" not in dict(a.verdict.ruled_out)
    assert "GPU 0 ↔ GPU 1: NV18 (over NVLink)" in render_text(a)


def test_report1_verdict_holds_when_nvidia_smi_reports_the_cards_own_x16_as_max(tmp_path: Path) -> None:
    """Newer nvidia-smi prints the card's own width as `Max` (16x) in a x4 chipset slot: the link is then also a
    `pcie-link-degraded` risk, never the root, and the chipset fact and verdict stay."""
    q = tmp_path / "nvidia-smi-q.txt"
    q.write_text((MACHINE / "nvidia-smi-q.txt").read_text().replace("Max                       : 4x",
                                                                    "Max                       : 16x"))
    a = analyze([str(HOST), str(MACHINE / "nvidia-smi-topo.txt"), str(q), str(GUEST)])
    assert a.verdict.root_cause_id == "p2p-sram-error" and a.verdict.summary.startswith("Cause: the cross-GPU")
    assert [f.signature for f in a.verdict.contributing] == ["pcie-link-degraded"]
    (chip,) = a.topology.chipset_gpus()
    assert chip.link_text() == "Gen4 x4 (max Gen4 x16)" and chip.index == "1"


def test_one_gpu_named_in_several_bus_id_spellings_is_one_gpu() -> None:
    samples = [_link("00000000:01:00.0", 16, 16), _link("00000000:0C:00.0", 4, 4)]
    lspci = Event(ts=None, ts_source=TsSource.NONE, source="file:lspci", kind="pcie-link", severity=Severity.INFO,
                  message="0c:00.0 PCIe link", origin=Origin("lspci.txt", 1), host="n1", gpu="0c:00.0",
                  attrs={"tool": "lspci", "gen": 4, "width": 4, "gen_max": 4, "width_max": 16})
    topo = read_topology([_topo_event("0", "1", "PHB"), lspci], samples)
    assert [g.gpu for g in topo.gpus] == ["0000:01:00.0", "0000:0c:00.0"]
    assert topo.gpus[1].attachment == "chipset" and topo.gpus[1].sources == ["lspci", "nvml"]


@pytest.mark.slow
def test_the_post_mortem_reports_state_the_chipset_attached_gpu() -> None:
    from forensics.analysis import analyze, bundle_facts
    from forensics.postmortem.html_report import render_html
    from forensics.postmortem.markdown import render_markdown
    from forensics.postmortem.model import build_report

    paths = _report1()
    analysis = analyze(paths)
    data = build_report(analysis, bundle_facts(paths))
    md, page = render_markdown(analysis, data), render_html(analysis, data)
    assert "**PCIe attachment**" in md and "behind the chipset (x4 link while GPU 0 runs x16" in md
    assert "<h3>PCIe attachment</h3>" in page and "behind the chipset" in page
    nvlink = [str(RECORDED / "silent-stall-2gpu" / "bundle")]  # two x16 GPUs on NVLink: nothing to say
    plain = analyze(nvlink)
    assert "PCIe attachment" not in render_markdown(plain, build_report(plain, bundle_facts(nvlink)))
