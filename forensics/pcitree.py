"""The host's PCI hierarchy as ``lspci`` shows it, and where a GPU sits in it.

:class:`PciTree` holds devices by bus id (``dddd:bb:dd.f``) with what is known of each: the name
``lspci`` printed, the class (``PCI bridge``, ``3D controller`` …, from ``lspci``/``lspci -vv``), a
bridge's secondary..subordinate bus range (the ``-[05-10]-`` of ``lspci -tv``, the ``Bus: primary=…,
secondary=…, subordinate=…`` of ``lspci -vv``) and its PCIe port type (``Root Port``, ``Upstream
Port``, ``Downstream Port`` from ``Express (v2) … Port``). A device's parent is the bridge whose
secondary bus is the device's bus, so trees from several files of one host merge by bus id: a tree
without names (``lspci -t``) gets them from a plain ``lspci`` list of the same host.

:func:`place` reads one GPU's chain of upstream bridges from the root port down and what it says:

* **chipset** — a hop named for a chipset (``PCH``, ``Chipset``, ``FCH``, ``Promontory``, the X570's
  ``Matisse Switch Upstream``); an Intel root port at device ``1a``–``1e`` of the root bus, where
  Intel's chipset (the PCH) puts its root ports and its PCI bridge; or a switch whose hierarchy under
  the same root port also holds the chipset's own functions (AMD boards hang the chipset, a switch
  with USB and SATA controllers, off one CPU root port);
* **switch** — otherwise a switch (an upstream + downstream port pair) between the root port and the
  GPU, named by its port names or by a non-bridge function of the upstream port (the management
  endpoint of a Broadcom/PLX or Microsemi/PMC Switchtec part);
* **cpu** — otherwise directly on a root port of a host whose vendor the tree names.

Nothing is claimed from an unnamed ``lspci -t`` alone except the chain itself (and that GPUs share a
switch, which is true of any switch).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from forensics.lazy_re import lazy_compile
from forensics.pci import normalize_pci

__all__ = ["Hop", "PciDevice", "PciTree", "Placement", "is_nvidia_gpu", "place"]

#: Names of chipset parts (Intel PCH, AMD FCH / Promontory / "500 Series Chipset", the X570's upstream port).
_CHIPSET = lazy_compile(r"\bPCH\b|\bchipset\b|\bFCH\b|Promontory|Matisse Switch Upstream", re.IGNORECASE)
#: Words that make an NVIDIA function something other than the GPU itself.
_NOT_GPU = lazy_compile(r"audio|usb|ucsi|serial|smbus|nvswitch|\bbridge\b|\bmcp\d|nforce|ethernet|sata|\bide\b"
                        r"|\blpc\b|memory controller|co-processor|host bridge", re.IGNORECASE)
#: Device numbers of Intel PCH root ports (D26–D29) and of its PCI bridge (D30) on the root bus.
_INTEL_PCH_DEVICES = range(0x1A, 0x1F)


@dataclass
class PciDevice:
    """One PCI function and what the inputs say of it (empty / ``None`` = not said)."""

    bdf: str
    name: str = ""
    cls: str = ""
    secondary: int | None = None
    subordinate: int | None = None
    port: str = ""

    @property
    def domain(self) -> int:
        return int(self.bdf[:4], 16)

    @property
    def bus(self) -> int:
        return int(self.bdf[5:7], 16)

    @property
    def device(self) -> int:
        return int(self.bdf[8:10], 16)

    @property
    def function(self) -> int:
        return int(self.bdf[11])

    @property
    def is_bridge(self) -> bool:
        return self.secondary is not None or self.cls.startswith(("PCI bridge", "CardBus bridge"))

    def update(self, other: PciDevice) -> None:
        """Fill what this one lacks from ``other`` (another file's view of the same function)."""
        self.name = self.name or other.name
        self.cls = self.cls or other.cls
        self.port = self.port or other.port
        if self.secondary is None:
            self.secondary, self.subordinate = other.secondary, other.subordinate

    def to_attr(self) -> list[Any]:
        return [self.bdf, self.name, self.cls, self.secondary, self.subordinate, self.port]

    @classmethod
    def from_attr(cls, row: Sequence[Any]) -> PciDevice | None:
        if not isinstance(row, list | tuple) or len(row) < 6:
            return None
        bdf = normalize_pci(str(row[0]))
        sec, sub = (v if isinstance(v, int) and not isinstance(v, bool) else None for v in row[3:5])
        if bdf is None:
            return None
        return cls(bdf, str(row[1] or ""), str(row[2] or ""), sec, sub if sub is not None else sec, str(row[5] or ""))


def is_nvidia_gpu(dev: PciDevice) -> bool:
    """An NVIDIA GPU function: vendor 10de or an NVIDIA name, a display class when the class is known,
    else function 0 without a word that names another function (audio, USB, NVSwitch, chipset parts)."""
    nvidia = dev.name.upper().startswith("NVIDIA") or "[10de:" in dev.name.lower()
    if not nvidia:
        return False
    if dev.cls:
        return any(k in dev.cls for k in ("VGA", "3D", "Display"))
    return dev.function == 0 and not _NOT_GPU.search(dev.name)


@dataclass
class PciTree:
    """Devices by bus id, and the buses ``lspci -t`` drew as roots."""

    devices: dict[str, PciDevice] = field(default_factory=dict)
    roots: set[tuple[int, int]] = field(default_factory=set)
    _by_secondary: dict[tuple[int, int], PciDevice] | None = field(default=None, init=False, repr=False,
                                                                     compare=False)

    def add(self, dev: PciDevice) -> None:
        known = self.devices.get(dev.bdf)
        if known is None:
            self.devices[dev.bdf] = dev
        else:
            known.update(dev)
        self._by_secondary = None

    def merge(self, other: PciTree) -> None:
        for dev in other.devices.values():
            self.add(PciDevice(dev.bdf, dev.name, dev.cls, dev.secondary, dev.subordinate, dev.port))
        self.roots |= other.roots

    def to_attrs(self) -> dict[str, Any]:
        return {"devices": [d.to_attr() for d in self.devices.values()],
                "roots": [f"{d:04x}:{b:02x}" for d, b in sorted(self.roots)]}

    @classmethod
    def from_attrs(cls, attrs: Any) -> PciTree:
        tree = cls()
        rows = attrs.get("devices") if hasattr(attrs, "get") else None
        for row in rows if isinstance(rows, list | tuple) else ():
            dev = PciDevice.from_attr(row)
            if dev is not None:
                tree.add(dev)
        for root in attrs.get("roots") or () if hasattr(attrs, "get") else ():
            m = re.fullmatch(r"([0-9a-f]{4}):([0-9a-f]{2})", str(root))
            if m:
                tree.roots.add((int(m.group(1), 16), int(m.group(2), 16)))
        return tree

    def bridge_to(self, domain: int, bus: int) -> PciDevice | None:
        """The bridge whose secondary bus is ``bus`` (the parent of the devices on it). A bridge whose
        secondary bus is not above its own (``secondary=00`` of a port the firmware left unconfigured) is
        the parent of nothing."""
        if self._by_secondary is None:
            self._by_secondary = {(d.domain, d.secondary): d for d in self.devices.values()
                                  if d.secondary is not None and d.secondary > d.bus}
        return self._by_secondary.get((domain, bus))

    def chain(self, bdf: str) -> list[PciDevice]:
        """The bridges above ``bdf``, root port first; empty when its bus has no known bridge."""
        out: list[PciDevice] = []
        domain, bus = int(bdf[:4], 16), int(bdf[5:7], 16)
        while (parent := self.bridge_to(domain, bus)) is not None and parent not in out:
            out.append(parent)
            bus = parent.bus
        return out[::-1]

    def on_bus(self, domain: int, bus: int) -> Iterator[PciDevice]:
        return (d for d in self.devices.values() if d.domain == domain and d.bus == bus)

    def below(self, bridge: PciDevice) -> Iterator[PciDevice]:
        """Every device in the bus range of ``bridge``."""
        lo, hi = bridge.secondary, bridge.subordinate if bridge.subordinate is not None else bridge.secondary
        if lo is None or hi is None:
            return iter(())
        return (d for d in self.devices.values() if d.domain == bridge.domain and lo <= d.bus <= hi)

    def gpus(self) -> list[str]:
        return sorted(d.bdf for d in self.devices.values() if is_nvidia_gpu(d))

    def is_root_bus(self, dev: PciDevice) -> bool:
        return (dev.domain, dev.bus) in self.roots or self.bridge_to(dev.domain, dev.bus) is None and (
            dev.port == "Root Port" or not self.roots)


@dataclass
class Hop:
    """One bridge on a GPU's way up: its bus id, its role and its name when known."""

    bdf: str
    role: str  # "root port", "switch upstream", "switch downstream", "bridge"
    name: str = ""

    def text(self) -> str:
        return f"{self.role} {self.bdf}" + (f" ({self.name})" if self.name else "")

    def to_json(self) -> dict[str, Any]:
        return {"pci": self.bdf, "role": self.role, "name": self.name or None}


@dataclass
class Placement:
    """Where one GPU sits: its chain, the attachment it shows and why, and its nearest switch."""

    gpu: str
    hops: list[Hop]
    attachment: str = ""  # "chipset", "switch", "cpu" or ""
    why: str = ""
    switch: str = ""  # bus id of the nearest switch's upstream port, "" when none
    switch_name: str = ""
    root: str = ""  # bus id of the root port, "" when the chain does not reach one

    def chain_text(self) -> str:
        return " → ".join([*(h.text() for h in self.hops), "GPU"])


_PORT_ROLES = {"Root Port": "root port", "Upstream Port": "switch upstream", "Downstream Port": "switch downstream"}


def _roles(tree: PciTree, chain: list[PciDevice]) -> list[Hop]:
    """Each bridge's role: its PCIe port type when ``lspci -vv`` gave it, else by position (a root port
    on a root bus, then upstream / downstream pairs, one pair per switch)."""
    hops: list[Hop] = []
    expect_up = True
    for i, dev in enumerate(chain):
        role = _PORT_ROLES.get(dev.port, "")
        if not role:
            if i == 0 and tree.is_root_bus(dev):
                role = "root port"
            elif i == 0:
                role = "bridge"
            else:
                role = "switch upstream" if expect_up else "switch downstream"
        if role == "switch upstream":
            expect_up = False
        elif role == "switch downstream":
            expect_up = True
        hops.append(Hop(dev.bdf, role, dev.name))
    if hops and hops[-1].role == "switch upstream":  # an upstream port with no downstream one: a plain bridge
        hops[-1].role = "bridge"
    return hops


def _switch_name(tree: PciTree, up: PciDevice) -> str:
    """The switch's name: its upstream port's, else a non-bridge function of the same device (the
    management endpoint that Broadcom/PLX and Microsemi/PMC switches expose)."""
    if up.name:
        return up.name
    for d in tree.on_bus(up.domain, up.bus):
        if d.device == up.device and d is not up and d.name and not d.is_bridge:
            return d.name
    return ""


def _intel_host(tree: PciTree, root_port: PciDevice) -> bool:
    if root_port.name:
        return root_port.name.startswith("Intel")
    host = [d for d in tree.on_bus(root_port.domain, root_port.bus) if d.device == 0 and d.name]
    return bool(host) and host[0].name.startswith("Intel")


def _named_host(tree: PciTree, root_port: PciDevice) -> bool:
    """Whether the inputs name the devices around ``root_port`` (``lspci -tv`` or a list), so that the
    absence of a chipset name means something."""
    return bool(root_port.name) or any(d.name for d in tree.on_bus(root_port.domain, root_port.bus)) or any(
        d.name for d in tree.below(root_port))


def _chipset_reason(tree: PciTree, gpu: str, chain: list[PciDevice], hops: list[Hop]) -> str:
    for dev, hop in zip(chain, hops, strict=True):
        if dev.name and _CHIPSET.search(dev.name):
            return f"{hop.role} {dev.bdf} is the chipset's ({dev.name})"
    root = chain[0]
    if hops[0].role == "root port" and root.device in _INTEL_PCH_DEVICES and _intel_host(tree, root):
        return (f"root port {root.bdf} is at device {root.device:02x} of the root bus, where Intel's chipset (PCH) "
                "puts its root ports")
    if any(h.role == "switch upstream" for h in hops) and hops[0].role == "root port":
        for dev in tree.below(root):
            if dev.bdf != gpu and dev.name and _CHIPSET.search(dev.name) and not dev.is_bridge:
                return f"the switch below root port {root.bdf} also carries the chipset's {dev.name} ({dev.bdf})"
    return ""


def place(tree: PciTree, gpu: str) -> Placement | None:
    """Where ``gpu`` (a normalized bus id) sits in ``tree``; ``None`` when no bridge above it is known."""
    chain = tree.chain(gpu)
    if not chain:
        return None
    hops = _roles(tree, chain)
    p = Placement(gpu, hops, root=hops[0].bdf if hops[0].role == "root port" else "")
    ups = [dev for dev, h in zip(chain, hops, strict=True) if h.role == "switch upstream"]
    if ups:
        p.switch, p.switch_name = ups[-1].bdf, _switch_name(tree, ups[-1])
    if reason := _chipset_reason(tree, gpu, chain, hops):
        p.attachment, p.why = "chipset", reason
    elif not _named_host(tree, chain[0]):
        pass  # `lspci -t` without names: a switch there may be the chipset, a root port the PCH's
    elif ups:
        named = f" ({p.switch_name})" if p.switch_name and not ups[-1].name else ""
        p.attachment, p.why = "switch", f"a PCIe switch{named} between the root port and the GPU"
    elif p.root and len(hops) == 1:
        p.attachment, p.why = "cpu", "no switch or chipset bridge between the CPU's root port and the GPU"
    return p


def shared_switches(placements: Iterable[Placement]) -> dict[str, list[Placement]]:
    """GPUs grouped by their nearest switch, for switches above two or more GPUs."""
    groups: dict[str, list[Placement]] = {}
    for p in placements:
        if p.switch:
            groups.setdefault(p.switch, []).append(p)
    return {k: v for k, v in groups.items() if len(v) > 1}
