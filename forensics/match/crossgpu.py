"""The verdict for a cross-GPU PCIe fault on a GPU behind the chipset (the first field report's machine).

When the root cause is ``p2p-sram-error`` (nvlddmkm 14 ``PCIE P2PREQ/REORDER, Uncorrectable SRAM
Error``, then a TDR and the application losing the GPU) and the topology facts
(:mod:`forensics.timeline.topology`) put one GPU behind the chipset while its peer runs on CPU lanes, the
verdict names that cross-GPU path as the cause, gives the report's remedies in its order (the
second GPU disabled at the device level, then the cross-GPU traffic off, then the platform
settings; the topology step is dropped because it is answered) and rules out the power supply and
thermals when the inputs say why: no Kernel-Power 41 and no WHEA-Logger event among the Windows
events read, and every GPU temperature read in range.
"""

from __future__ import annotations

from collections.abc import Sequence

from forensics.events import Event, MetricSample
from forensics.findings import Verdict
from forensics.timeline.topology import Topology, read_topology

__all__ = ["HOT_C", "refine_cross_gpu"]

ROOTS = ("p2p-sram-error",)
#: A GeForce/datacenter GPU starts to slow itself down for heat in the mid 80s °C; below this is in range.
HOT_C = 85.0
_TOPOLOGY_STEP = "nvidia-smi topo -m"


def _provider(e: Event) -> str:
    return str(e.attrs.get("provider") or "")


def _psu_reason(events: Sequence[Event]) -> str | None:
    """Why the power supply is ruled out, or None when the inputs cannot say (or say otherwise)."""
    win = [e for e in events if e.kind == "winevent"]
    if not win:
        return None
    power_loss = [e for e in win if "Kernel-Power" in _provider(e) and e.attrs.get("event_id") == 41]
    whea = [e for e in win if "WHEA" in _provider(e)]
    if power_loss or whea or any(e.kind == "bugcheck" for e in events):
        return None
    return (f"no Kernel-Power 41 (unexpected power loss) and no WHEA-Logger hardware error among the "
            f"{len(win)} Windows event(s) read; Windows reset the GPU driver (TDR) and stayed up, which a "
            "PSU trip or overcurrent shutdown does not do")


def _thermal_reason(samples: Sequence[MetricSample], topology: Topology) -> str | None:
    """Why thermals are ruled out: every GPU temperature read stayed below :data:`HOT_C`."""
    peaks: dict[tuple[str, str], float] = {}
    for m in samples:
        t = m.values.get("temp_c")
        if isinstance(t, int | float) and t == t:
            key = (m.host or "", m.gpu)
            peaks[key] = max(peaks.get(key, t), t)
    if not peaks or max(peaks.values()) >= HOT_C:
        return None
    names = {(g.host, g.gpu): g.label for g in topology.gpus}
    parts = [f"{names.get(k, 'GPU ' + k[1])} at most {v:g} °C" for k, v in sorted(peaks.items())]
    return f"temperatures in range: {', '.join(parts)} (below {HOT_C:g} °C, where GPUs begin to slow for heat)"


def refine_cross_gpu(verdict: Verdict, events: Sequence[Event], samples: Sequence[MetricSample],
                     topology: Topology | None = None) -> None:
    """Name the chipset cross-GPU path in a ``p2p-sram-error`` verdict; a no-op otherwise."""
    root = verdict.root_cause
    if root is None or root.signature not in ROOTS:
        return
    topology = topology or read_topology(events, samples)
    chip = topology.chipset_gpus()
    if not chip:
        return
    g = chip[0]
    peers = [p for p in topology.paths if p.host == g.host and g.index in (p.a, p.b) and p.through_host]
    path = peers[0] if peers else None
    other = (path.b if path.a == g.index else path.a) if path else "the other GPU"
    cause = (f"Cause: the cross-GPU PCIe path over the chipset. {g.label} sits behind the chipset ({g.why}); "
             "cross-GPU traffic on that path hit the PCIe peer-to-peer unit's SRAM, the driver reset the GPU "
             "and the application lost it.")
    verdict.summary = f"{cause} {verdict.summary}".strip()
    root.facts["cross_gpu_path"] = {"gpu": g.gpu, "index": g.index, "attachment": g.attachment, "why": g.why,
                                    "path": path.link if path else None, "peer": other if path else None}
    steps = [s for s in root.remedy if _TOPOLOGY_STEP not in s]
    first = (f"Test with the second GPU ({g.label}, behind the chipset) disabled at the device level: Device "
             "Manager → Disable device, or the card removed. `CUDA_VISIBLE_DEVICES` alone is not the same test: "
             "it hides the GPU from the application, but the OS and the driver still enumerate it and the "
             "cross-GPU PCIe topology stays active.")
    root.remedy = [first, *[s for s in steps if "Device Manager" not in s]]
    for sig, why in (("psu-power-loss", _psu_reason(events)),
                     ("thermal-or-power-throttle", _thermal_reason(samples, topology))):
        if why and all(s != sig for s, _ in verdict.ruled_out):
            verdict.ruled_out.append((sig, why))
