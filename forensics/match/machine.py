"""What the GPUs are: each GPU's model and class of machine (datacenter / workstation / consumer), read
from what the inputs name — nvidia-smi and NVML product names, lspci names, PCI device ids in kernel and
lspci lines — and classified by the data in ``gpu_models.toml`` (rules on the name) and ``gpu_ids.tsv``
(device id → name, from the PCI ID Repository). The verdict uses it to choose each finding's remedy steps
(:meth:`forensics.findings.Finding.fit_remedy`)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from forensics.events import Event
from forensics.findings import MACHINE_CLASSES, Machine
from forensics.lazy_re import lazy_compile
from forensics.pci import normalize_pci

__all__ = ["Model", "classify_name", "read_machine"]


@dataclass(frozen=True, slots=True)
class Model:
    name: str  # as the input printed it, or the PCI ID Repository's name for a bare device id
    cls: str  # datacenter | workstation | consumer
    form: str  # sxm | pcie | card


@lru_cache(maxsize=1)
def _rules() -> tuple[tuple[object, str, str], ...]:
    import regex

    data = tomllib.loads(resources.files("forensics.match").joinpath("gpu_models.toml").read_text("utf-8"))
    rules = []
    for rule in data["rule"]:
        if rule["class"] not in MACHINE_CLASSES:
            raise ValueError(f"gpu_models.toml: unknown class {rule['class']!r}")
        rules.append((regex.compile(rule["names"]), rule["class"], rule["form"]))
    return tuple(rules)


@lru_cache(maxsize=1)
def _device_names() -> dict[str, str]:
    text = resources.files("forensics.match").joinpath("gpu_ids.tsv").read_text("utf-8")
    return dict(line.split("\t", 1) for line in text.splitlines() if line and not line.startswith("#"))


@lru_cache(maxsize=256)
def classify_name(name: str) -> Model | None:
    """The model a product name stands for, or None when no rule knows it."""
    text = " ".join(name.split())
    for pattern, cls, form in _rules():
        if pattern.search(text):  # type: ignore[attr-defined]
            return Model(text, cls, form)
    return None


def classify_device(device_id: str) -> Model | None:
    """The model of an NVIDIA PCI device id (``2330``), through the PCI ID Repository's name."""
    name = _device_names().get(device_id.lower())
    return classify_name(name) if name else None


#: An NVIDIA device id as the kernel and lspci -nn print it (``[10de:2330]``, ``PCI ID: 10de:26b5``).
_NVIDIA_ID = lazy_compile(r"\b10de:([0-9a-fA-F]{4})\b")
#: Kinds whose lines name a device by its id (a GPU's AER report, the driver's probe lines, lspci).
_ID_KINDS = frozenset({"gpu-info", "nvrm", "aer", "kernel", "xid", "pcie-path", "gpu-lost"})
#: Kinds whose GPU field is the GPU the name belongs to (an AER or other kernel line's device may be a bridge).
_BUS_KINDS = frozenset({"gpu-info", "pcie-path", "nvrm", "xid", "gpu-lost"})
_TOOLS = {"nvidia-smi-xml": "nvidia-smi -q", "nvidia-smi-q": "nvidia-smi -q", "nvidia-smi": "nvidia-smi",
          "nvidia-smi-csv": "nvidia-smi --query-gpu", "lspci": "lspci"}


def _names(e: Event) -> Iterable[tuple[str, str]]:
    """(name, where) pairs an event gives for its GPU."""
    name = e.attrs.get("name")
    if e.kind in ("gpu-info", "pcie-path") and isinstance(name, str) and name.strip():
        yield name, _TOOLS.get(str(e.attrs.get("tool", "")), e.source)
    if e.kind in _ID_KINDS and "10de:" in (text := e.text):
        for m in _NVIDIA_ID.finditer(text):
            dev = _device_names().get(m.group(1).lower())
            if dev:
                yield dev, f"PCI id 10de:{m.group(1).lower()}"


def read_machine(events: Iterable[Event]) -> Machine:
    """Every GPU the inputs name, with its model and class (a GPU by its bus id where the line gives one)."""
    machine = Machine()
    unplaced: dict[str, str] = {}  # model -> class, for names without a bus id
    for e in events:
        for name, where in _names(e):
            model = classify_name(name)
            if model is None:
                continue
            bus = normalize_pci(str(e.gpu or e.attrs.get("pci") or "")) if e.kind in _BUS_KINDS else None
            if bus:
                machine.gpus.setdefault(bus, (_short(model.name), model.cls))
            else:
                unplaced.setdefault(_short(model.name), model.cls)
            if where not in machine.basis:
                machine.basis.append(where)
    if not machine.gpus:  # a GPU by its bus id is a better count than the models a log mentions
        machine.gpus.update((name, (name, cls)) for name, cls in unplaced.items())
    return machine


# (?<!\s): a run of spaces is tried from its first space only (linear on adversarial lines)
_VENDOR = lazy_compile(r"^NVIDIA Corporation (?:Device [0-9a-f]{4} )?|(?:(?<!\s)\s+)?\[10de:[0-9a-f]{4}\].*$"
                       r"|(?:(?<!\s)\s+)?\(rev [0-9a-f]+\)$")
_BRACKETED = lazy_compile(r"\[([^\[\]]+)\]")  # an innermost bracket: "[[[[" fails at once at each "["


def _short(name: str) -> str:
    """``NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)`` → ``H100 SXM5 80GB``."""
    text = _VENDOR.sub("", name).strip()
    m = _BRACKETED.search(text)
    return m.group(1) if m else text
