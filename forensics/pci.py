"""PCI bus addresses in the one spelling the whole tool uses: ``dddd:bb:dd.f`` (lower case).

Every layer writes the same GPU differently: the NVIDIA kernel driver ``PCI:0000:3b:00``
(no function), the kernel ``0000:3b:00.0``, nvidia-smi ``00000000:3B:00.0`` (8-digit domain,
upper case) or ``GPU0000:03:00.0``, DMAR ``[06:00.0]`` (no domain), NCCL ``busId b2000``
(the address as one hex number). :func:`normalize_pci` maps them all to one key so that an
Xid line, an NCCL init line and an NVML sample can be joined.
"""

from __future__ import annotations

import re
from functools import lru_cache

from forensics.lazy_re import lazy_compile

__all__ = ["find_pci", "normalize_pci", "pci_from_aer_id"]

_ADDR_RE = lazy_compile(
    r"^(?:(?P<dom>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<dev>[0-9a-f]{1,2})(?:\.(?P<fn>[0-7]))?$"
)
_PREFIX_RE = lazy_compile(r"^(?:pci:|gpu|busid\s*[:=]?\s*|\[)", re.IGNORECASE)
_NCCL_HEX_RE = lazy_compile(r"^[0-9a-f]{5,12}$")
# With a domain the function is optional (``PCI:0000:3b:00``); without one it is required, so
# that clock times such as ``10:37`` are never taken for an address.
_FIND_RE = lazy_compile(
    r"(?<![0-9A-Za-z:])(?:PCI:|GPU)?"
    r"([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?|[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])"
    r"(?![0-9A-Za-z]|:[0-9A-Za-z])"
)


def _format(domain: int, bus: int, dev: int, fn: int) -> str | None:
    if domain > 0xFFFF or bus > 0xFF or dev > 0x1F or fn > 7:
        return None
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn}"


def normalize_pci(value: str | int | None) -> str | None:
    """``dddd:bb:dd.f`` for any common spelling of a PCI address, else ``None``.

    Accepts ``PCI:0000:3b:00``, ``0000:3b:00.0``, ``00000000:3B:00.0``, ``GPU0000:03:00.0``,
    ``3b:00.0``, ``[06:00.0]``, NCCL ``busId b2000`` / ``b2000`` (hex, last digit = function,
    two before it = device, two before those = bus, the rest = domain) and that number as int.
    """
    if value is None:
        return None
    if isinstance(value, int):
        if value < 0:
            return None
        return _format(value >> 20, (value >> 12) & 0xFF, (value >> 4) & 0xFF, value & 0xF)
    return _normalize_text(value)


@lru_cache(maxsize=4096)
def _normalize_text(value: str) -> str | None:
    """:func:`normalize_pci` of a string, kept per spelling: a log names the same few addresses on
    thousands of lines."""
    text = value.strip().lower()
    prev = None
    while prev != text:  # strip stacked prefixes such as "busId [" or "PCI:"
        prev = text
        text = _PREFIX_RE.sub("", text, count=1).strip().rstrip("]").strip()
    m = _ADDR_RE.match(text)
    if m:
        dom = m.group("dom")
        # nvidia-smi pads the domain to 8 digits; only the low 16 bits are the PCI domain.
        domain = int(dom, 16) if dom else 0
        return _format(domain, int(m.group("bus"), 16), int(m.group("dev"), 16), int(m.group("fn") or 0))
    if _NCCL_HEX_RE.match(text):
        return normalize_pci(int(text, 16))
    return None


def find_pci(text: str) -> str | None:
    """The first PCI address written anywhere in ``text``, normalized (``None`` if none)."""
    for m in _FIND_RE.finditer(text):
        found = normalize_pci(m.group(1))
        if found:
            return found
    return None


def pci_from_aer_id(aer_id: str) -> str | None:
    """Old AER lines name the source as ``id=00e8`` (bus << 8 | device << 3 | function)."""
    try:
        n = int(aer_id, 16)
    except ValueError:
        return None
    if n < 0 or n > 0xFFFF:
        return None
    return _format(0, n >> 8, (n >> 3) & 0x1F, n & 0x7)
