"""``lspci -t`` / ``-tv`` / ``-tvnn``: the PCI tree as lspci draws it.

The drawing is read by columns: a bridge prints ``DD.F-[SS]-`` or ``DD.F-[SS-UU]-`` (its secondary
and subordinate bus) and its first child on the same line; the child's column is where every later
child of that bus starts (``+-`` / ``\\-`` under a ``|``). A root bus is ``[dddd:bb]`` (several root
buses: ``-+-[0000:00]-`` / `` +-[0000:40]-`` / `` \\-[0000:80]-``; an old lspci writes ``[bb]``).
With ``-v`` a device that is not a bridge ends in its name; bridges never show one.

Records: one ``pci-tree`` event for the whole drawing (every device with its bus range and name, for
:mod:`forensics.timeline.topology` to join with the GPUs other files name and with bridge names from a plain
``lspci`` list), and one ``pcie-path`` event per NVIDIA GPU the drawing names, on the GPU's own line:
its chain of bridges from the root port and what that chain shows (:func:`forensics.pcitree.place`).
Text around the drawing (a shell prompt, a heading) is skipped; an e-mail's ``> `` quoting is read as
part of the margin, so the columns stay where lspci put them (the presentation layer leaves this
format's margin alone for that reason).
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import smi_event

from forensics.events import Severity
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile
from forensics.pcitree import PciDevice, PciTree, place

__all__ = ["PARSER", "parse_tree_lines"]

_ROOT = lazy_compile(r"\[(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2})\]")
_DEV = lazy_compile(r"([0-9a-fA-F]{2})\.([0-7])(?:-\[([0-9a-fA-F]{2})(?:-([0-9a-fA-F]{2}))?\])?")
_NAME = lazy_compile(r"(?<!\s)\s+(\S(?:.*\S)?)\s*$")
#: A root bus followed by its first device: the line every drawing starts with.
_ROOT_LINE = lazy_compile(r"\[(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}\]-[-+\\]-[0-9a-fA-F]{2}\.[0-7]")
_CONT_LINE = lazy_compile(r"^(?:>[ >]*)?[ |]*[+\\]-(?:[0-9a-fA-F]{2}\.[0-7]|\[)")
_QUOTE = lazy_compile(r"(?:>[ >]*)?")
_ATTACHED = {"chipset": "behind the chipset", "switch": "behind a PCIe switch", "cpu": "on a CPU root port"}


def parse_tree_lines(lines: Iterator[Line]) -> tuple[PciTree, dict[str, Line], Line | None]:
    """The tree drawn in ``lines``, the line of each device, and the drawing's first line."""
    tree = PciTree()
    where: dict[str, Line] = {}
    first: Line | None = None
    bus_at: dict[int, tuple[int, int]] = {}  # column where a bus's children start → (domain, bus)
    for line in lines:
        text = line.text.rstrip()
        if not _ROOT_LINE.search(text) and not (first is not None and _CONT_LINE.match(text)):
            continue
        pending: tuple[int, int] | None = None  # the bus whose first child comes next on this line
        quote = _QUOTE.match(text)
        pos = quote.end() if quote else 0  # an e-mail's "> " margin: skipped, the columns kept
        while pos < len(text):
            if text[pos] in " |+-\\":
                pos += 1
                continue
            root = _ROOT.match(text, pos)
            if root is not None:
                pending = (int(root.group(1) or "0", 16), int(root.group(2), 16))
                tree.roots.add(pending)
                first = first or line
                pos = root.end()
                continue
            dev = _DEV.match(text, pos)
            if dev is None:
                break
            if pending is not None:
                bus_at[pos] = pending
            domain_bus = pending or bus_at.get(pos)
            pending = None
            if domain_bus is None:
                break  # a child whose bus the drawing never gave: a cut excerpt
            domain, bus = domain_bus
            bdf = f"{domain:04x}:{bus:02x}:{dev.group(1).lower()}.{dev.group(2)}"
            sec = int(dev.group(3), 16) if dev.group(3) else None
            sub = int(dev.group(4), 16) if dev.group(4) else sec
            name = ""
            if sec is None:
                m = _NAME.match(text, dev.end())
                name = m.group(1) if m else ""
            tree.add(PciDevice(bdf, name, "", sec, sub))
            where.setdefault(bdf, line)
            if sec is None:
                break  # a leaf: the rest of the line is its name
            pending = (domain, sec)
            pos = dev.end()
    return tree, where, first


class LspciTreeParser:
    name = "lspci-tree"
    samples = (
        # Real: NVIDIA/l2fwd-nv README.md, a Tesla V100 and a ConnectX-6 below a PLX PEX 8747 switch.
        """-+-[0000:b2]-+-00.0-[b3-b6]----00.0-[b4-b6]--+-08.0-[b5]--+-00.0  Mellanox Technologies MT28841
 |           |                               |            \\-00.1  Mellanox Technologies MT28841
 |           |                               \\-10.0-[b6]----00.0  NVIDIA Corporation GV100GL [Tesla V100 PCIe 32GB]
""",
        # Real: the `lspci -t` (no names) of a dual RTX 5090 bench report (noonghunna/club-3090 issue #858), cut.
        """-[0000:00]-+-00.0
           +-01.0
           +-01.1-[01]--+-00.0
           |            \\-00.1
           +-02.1-[04-10]----00.0-[05-10]--+-00.0-[06]----00.0
           |                               +-02.0-[07]----00.0
           |                               \\-0d.0-[10]----00.0
           \\-14.0
""",
    )

    def detect(self, head: list[str]) -> float:
        """Sure when the drawing is most of the head; when it is a small part of other text (a pasted
        issue with a traceback below), only ahead of the catch-all, so that a parser of that text wins."""
        lines = [t for t in head[:40] if t.strip()]
        for i, text in enumerate(lines):
            if _ROOT_LINE.search(text):
                drawn = 1 + sum(1 for t in lines[i + 1:] if _CONT_LINE.match(t) or _ROOT_LINE.search(t))
                if drawn < 0.5 * len(lines):
                    return 0.4
                return 0.95 if drawn > 1 else 0.9
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        tree, where, first = parse_tree_lines(doc.lines())
        if first is None or not tree.devices:
            ctx.warn("no PCI tree drawing found")
            return
        gpus = tree.gpus()
        bridges = sum(1 for d in tree.devices.values() if d.secondary is not None)
        listed = ", ".join(gpus) if gpus else "none named"
        yield smi_event(ctx, ctx.origin(first), "pci-tree",
                        f"PCI tree: {len(tree.devices)} devices, {bridges} bridges; NVIDIA GPUs: {listed}",
                        attrs={"tool": self.name, **tree.to_attrs()})
        for gpu in gpus:
            p = place(tree, gpu)
            if p is None:
                continue
            said = f" — {_ATTACHED[p.attachment]} ({p.why})" if p.attachment else ""
            yield smi_event(ctx, ctx.origin(where[gpu]), "pcie-path",
                            f"{gpu} {tree.devices[gpu].name}: {p.chain_text()}{said}", gpu=gpu,
                            severity=Severity.INFO,
                            attrs={"tool": self.name, "pci": gpu, "name": tree.devices[gpu].name,
                                   "chain": [h.to_json() for h in p.hops], "attachment": p.attachment or None,
                                   "why": p.why or None, "switch": p.switch or None})


PARSER = LspciTreeParser()
