"""Where each GPU sits on the PCIe tree, as facts read from the timeline: its link now and at most
(NVML samples ``pcie_gen``/``pcie_width`` and their ``_max``, ``nvidia-smi -q``, ``lspci -vv``, a
bundle's ``host/`` snapshots, which are parsed like any file), the path between each pair of GPUs
(``nvidia-smi topo -m``: ``NV#``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``) and what that says
about the GPU's attachment:

* **switch** — a pair joined by ``PIX``/``PXB`` shares a PCIe switch (no host bridge on the way);
* **chipset** — a GPU whose link is at most x4 while a peer runs x8 or wider, the two joined only
  through the host (``PHB``/``NODE``/``SYS``): desktop boards wire their second x16-sized slot as x4
  behind the chipset (DMI / the AMD chipset's uplink), as in the project's first field report;
* **cpu** — the wider peer of such a pair (on the CPU's own lanes).

Where an ``lspci`` tree of the host is among the inputs (``pci-tree`` events of ``lspci -t``/``-tv``
and of ``lspci``/``lspci -vv``, merged per host), each GPU's chain of bridges from its root port is
read by :func:`forensics.pcitree.place`, and what the chain shows — a chipset root port or switch, a
PCIe switch, a CPU root port — comes first: it is the wiring itself, where the link widths are a
sign of it. The width and path reasoning then fills in the GPUs the tree says nothing about, and
where it agrees with the tree its numbers are added to the reason. GPUs below one switch are stated
as a pair (traffic between them stays in the switch, as ``PIX``/``PXB`` say).

Nothing here is guessed from a model name; every statement names the numbers or the bridges it rests
on. ``nvidia-smi topo -m`` numbers GPUs in PCI bus order, so its ``GPU0``, ``GPU1`` … are matched to
the bus ids of the same host in ascending order when the counts agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.events import Event, MetricSample
from forensics.pci import normalize_pci
from forensics.pcitree import PciTree, Placement, place, shared_switches

__all__ = ["GpuLink", "GpuPath", "SharedSwitch", "Topology", "read_topology"]

_HOST_PATHS = ("PHB", "NODE", "SYS", "SOC")
_SWITCH_PATHS = ("PIX", "PXB")
_PATH_WORDS = {
    "PIX": "through one PCIe switch",
    "PXB": "through several PCIe switches, no host bridge",
    "PHB": "through a PCIe host bridge, the CPU or chipset root",
    "NODE": "between host bridges of one NUMA node",
    "SYS": "across the inter-socket / SMP interconnect",
    "SOC": "across CPU sockets",
}


@dataclass
class GpuLink:
    """One GPU's PCIe link: now and at most, and where the numbers came from."""

    host: str
    gpu: str  # bus id when known, else the index as the tool wrote it
    index: str = ""
    gen: float | None = None
    width: float | None = None
    gen_max: float | None = None
    width_max: float | None = None
    sources: list[str] = field(default_factory=list)
    attachment: str = ""  # "chipset", "switch", "cpu" or "" (unknown)
    why: str = ""
    placement: Placement | None = None  # where the host's lspci tree puts it, when there is one

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.gpu})" if self.index and self.index != self.gpu else f"GPU {self.gpu}"

    def link_text(self) -> str:
        def part(g: float | None, w: float | None) -> str:
            return " ".join(p for p in (f"Gen{g:g}" if g is not None else "", f"x{w:g}" if w is not None else "") if p)
        now, best = part(self.gen, self.width), part(self.gen_max, self.width_max)
        if now and best and now != best:
            return f"{now} (max {best})"
        return now or (f"max {best}" if best else "")

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "gpu": self.gpu, "index": self.index or None, "gen": self.gen,
                "width": self.width, "gen_max": self.gen_max, "width_max": self.width_max,
                "attachment": self.attachment or None, "why": self.why or None, "sources": self.sources,
                "chain": [h.to_json() for h in self.placement.hops] if self.placement else None}


@dataclass
class GpuPath:
    """The path between two GPUs of one host as ``nvidia-smi topo -m`` names it."""

    host: str
    a: str
    b: str
    link: str

    @property
    def through_host(self) -> bool:
        return self.link in _HOST_PATHS

    def text(self) -> str:
        words = "over NVLink" if self.link.startswith("NV") else _PATH_WORDS.get(self.link, "")
        return f"GPU {self.a} ↔ GPU {self.b}: {self.link}" + (f" ({words})" if words else "")

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "a": self.a, "b": self.b, "link": self.link, "through_host": self.through_host}


@dataclass
class SharedSwitch:
    """Two or more GPUs of one host below the same PCIe switch (by the lspci tree)."""

    host: str
    switch: str  # bus id of the switch's upstream port
    name: str
    root: str
    gpus: list[GpuLink]

    def text(self) -> str:
        named = f" ({self.name})" if self.name else ""
        below = f", below root port {self.root}" if self.root else ""
        return (f"{' and '.join(g.label for g in self.gpus)} share the PCIe switch at {self.switch}{named}{below}: "
                "traffic between them stays in the switch")

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "switch": self.switch, "name": self.name or None, "root": self.root or None,
                "gpus": [g.gpu for g in self.gpus]}


@dataclass
class Topology:
    gpus: list[GpuLink] = field(default_factory=list)
    paths: list[GpuPath] = field(default_factory=list)
    shared: list[SharedSwitch] = field(default_factory=list)

    def chipset_gpus(self) -> list[GpuLink]:
        return [g for g in self.gpus if g.attachment == "chipset"]

    def facts(self) -> list[str]:
        """One sentence per GPU link and per pair, the attachment first where it is known."""
        out = []
        for g in self.gpus:
            text = f"{g.label}{' on ' + g.host if g.host else ''}: PCIe {g.link_text() or 'link unknown'}"
            if g.attachment:
                text += f" — {_ATTACHED[g.attachment]} ({g.why})"
            elif g.placement is not None:
                text += f" — lspci tree: {g.placement.chain_text()}"
            out.append(text)
        out += [p.text() + (f" on {p.host}" if p.host else "") for p in self.paths]
        out += [s.text() + (f" on {s.host}" if s.host else "") for s in self.shared]
        return out

    def to_json(self) -> dict[str, Any]:
        return {"gpus": [g.to_json() for g in self.gpus], "paths": [p.to_json() for p in self.paths],
                "shared": [s.to_json() for s in self.shared], "facts": self.facts()}


_ATTACHED = {"chipset": "behind the chipset", "switch": "behind a PCIe switch", "cpu": "on CPU lanes"}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v and v > 0 else None


def _put(link: GpuLink, src: str, gen: Any, width: Any, gen_max: Any, width_max: Any) -> None:
    values = (_num(gen), _num(width), _num(gen_max), _num(width_max))
    if not any(v is not None for v in values):
        return
    link.gen, link.width, link.gen_max, link.width_max = (
        new if new is not None else old for new, old in zip(values, (link.gen, link.width, link.gen_max,
                                                                      link.width_max), strict=True))
    if src not in link.sources:
        link.sources.append(src)


def read_topology(events: Sequence[Event], samples: Sequence[MetricSample]) -> Topology:
    """The GPUs' links and pair paths from ``gpu-info`` / ``pcie-link`` events and NVML samples."""
    links: dict[tuple[str, str], GpuLink] = {}

    def link(host: str | None, gpu: object) -> GpuLink:
        gpu = normalize_pci(str(gpu)) or str(gpu)  # NVML's 00000000:0C:00.0 and lspci's 0c:00.0 are one GPU
        key = (host or "", str(gpu))
        if key not in links:
            links[key] = GpuLink(host or "", str(gpu))
        return links[key]

    paths: dict[tuple[str, str, str], GpuPath] = {}
    trees: dict[str, PciTree] = {}
    for e in events:
        a = e.attrs
        if e.kind == "pci-tree":
            trees.setdefault(e.host or "", PciTree()).merge(PciTree.from_attrs(a))
        elif e.kind == "gpu-info" and a.get("tool") == "nvidia-smi-topo" and "link" in a:
            paths[(e.host or "", str(a["a"]), str(a["b"]))] = GpuPath(e.host or "", str(a["a"]), str(a["b"]),
                                                                       str(a["link"]))
        elif e.kind in ("gpu-info", "pcie-link") and e.gpu and any(k in a for k in ("gen", "width")):
            _put(link(e.host, e.gpu), str(a.get("tool") or e.kind), a.get("gen"), a.get("width"),
                 a.get("gen_max"), a.get("width_max"))
    latest: dict[tuple[str, str], MetricSample] = {}
    for m in samples:  # the last sample that reports a link: the link under load, not at start
        if "pcie_width" in m.values or "pcie_gen" in m.values:
            latest[(m.host or "", m.gpu)] = m
    for m in latest.values():
        v = m.values
        _put(link(m.host, m.gpu), "nvml", v.get("pcie_gen"), v.get("pcie_width"), v.get("pcie_gen_max"),
             v.get("pcie_width_max"))
    _place(trees, links, link)
    topo = Topology(sorted(links.values(), key=lambda g: (g.host, g.gpu)), list(paths.values()))
    _name_indexes(topo)
    _attach_tree(topo)
    _attach(topo)
    return topo


def _place(trees: dict[str, PciTree], links: dict[tuple[str, str], GpuLink], link: Any) -> None:
    """Put each GPU with a bus id on its host's lspci tree. A tree that names no host (a loose file)
    serves the one host the other inputs name. A host whose other inputs name no GPU by bus id takes
    the GPUs the tree itself names (an NVSwitch that pci.ids does not name could be among those, so a
    bus id from NVML or nvidia-smi is preferred)."""
    hosts = {h for h, g in links if ":" in g}
    for host, tree in trees.items():
        targets = [host] if host or len(hosts) != 1 else sorted(hosts)
        for h in targets:
            if not any(lh == h and ":" in g for lh, g in links):
                for gpu in tree.gpus():
                    g = link(h or None, gpu)
                    if "lspci-tree" not in g.sources:
                        g.sources.append("lspci-tree")
            for (lh, gpu), g in links.items():
                if lh == h and ":" in gpu and g.placement is None:
                    g.placement = place(tree, gpu)


def _attach_tree(topo: Topology) -> None:
    """The attachment each GPU's lspci chain shows, and the GPUs that share a switch."""
    for g in topo.gpus:
        p = g.placement
        if p is not None and p.attachment:
            g.attachment, g.why = p.attachment, f"lspci tree: {p.chain_text()}; {p.why}"
    by_placement = {id(g.placement): g for g in topo.gpus if g.placement is not None}
    for switch, group in shared_switches(g.placement for g in topo.gpus if g.placement is not None).items():
        members = [by_placement[id(p)] for p in group]
        topo.shared.append(SharedSwitch(members[0].host, switch, group[0].switch_name, group[0].root, members))


def _name_indexes(topo: Topology) -> None:
    """Give the topology matrix's indexes to the bus ids of the same host, in PCI bus order."""
    for host in {p.host for p in topo.paths}:
        indexes = sorted({i for p in topo.paths if p.host == host for i in (p.a, p.b)}, key=int)
        buses = sorted((g for g in topo.gpus if g.host == host and ":" in g.gpu), key=lambda g: g.gpu.lower())
        plain = {g.gpu: g for g in topo.gpus if g.host == host and ":" not in g.gpu}
        if len(buses) == len(indexes):
            for i, g in zip(indexes, buses, strict=True):
                g.index = i
        for i in indexes:  # GPUs known by index only (or not at all) get an entry to hold the attachment
            if not any(g.index == i for g in buses):
                g = plain.get(i) or GpuLink(host, i)
                g.index = i
                if i not in plain:
                    topo.gpus.append(g)


def _width(g: GpuLink) -> float | None:
    return g.width if g.width is not None else g.width_max


def _attach(topo: Topology) -> None:
    by_index = {(g.host, g.index): g for g in topo.gpus if g.index}
    for p in topo.paths:
        a, b = by_index.get((p.host, p.a)), by_index.get((p.host, p.b))
        if a is None or b is None:
            continue
        if p.link in _SWITCH_PATHS:
            for g in (a, b):
                if not g.attachment:
                    g.attachment, g.why = "switch", f"{p.link} to GPU {(b if g is a else a).index}"
                elif g.attachment == "switch" and _from_tree(g):
                    g.why += f"; {p.link} to GPU {(b if g is a else a).index}"
            continue
        wa, wb = _width(a), _width(b)
        if not p.through_host or wa is None or wb is None:
            continue
        for narrow, wide in ((a, b), (b, a)):
            wn, ww = _width(narrow), _width(wide)
            if wn is None or ww is None or wn > 4 or ww < 8:
                continue
            widths = f"x{wn:g} link while GPU {wide.index} runs x{ww:g}; path {p.link}, only through the host"
            if _from_tree(narrow):  # the tree has the last word; agreeing numbers are added to its reason
                if narrow.attachment != "chipset":
                    continue
                narrow.why += f"; {widths}"
            else:
                narrow.attachment, narrow.why = "chipset", widths
            if not wide.attachment:
                wide.attachment, wide.why = "cpu", f"x{ww:g}, the peer of chipset-attached GPU {narrow.index}"


def _from_tree(g: GpuLink) -> bool:
    return g.placement is not None and bool(g.placement.attachment) and g.attachment == g.placement.attachment
