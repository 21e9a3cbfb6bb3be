"""NVIDIA's Xid catalogue as data (``xid_catalog.toml``: every code with its mnemonic, description and
resolution buckets, from a pinned catalogue version named in the file and shown in verdicts)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["BUCKET_MEANING", "XidInfo", "catalog", "catalog_version", "describe", "lookup"]

#: What NVIDIA's resolution buckets ask for, in words (the catalogue page's own legend, paraphrased).
BUCKET_MEANING = {
    "RESTART_APP": "restart the application",
    "RESET_GPU": "reset the GPU: nvidia-smi -r, or drain and reset",
    "RESTART_BM": "reboot the node",
    "RESTART_VM": "restart the virtual machine",
    "CONTACT_SUPPORT": "contact NVIDIA support",
    "IGNORE": "no action needed on its own",
    "CHECK_MECHANICALS": "check power cables and seating",
    "CHECK_UVM": "check unified-memory (UVM) use",
    "UPDATE_SWFW": "update driver / firmware",
    "XID_154": "do the recovery action Xid 154 names",
    "WORKFLOW_XID_45": "follow the Xid that caused it; alone, restart the fabric manager",
    "WORKFLOW_XID_48": "follow the ECC workflow: contained, restart the app; uncontained or repeated, reset the GPU",
    "WORKFLOW_NVLINK_ERR": "follow the NVLink error workflow, decoding the link registers",
    "WORKFLOW_NVLINK5_ERR": "follow the NVLink5 decode table; fatal ones need a GPU reset",
}


@dataclass(frozen=True)
class XidInfo:
    code: int
    mnemonic: str
    description: str
    immediate: str  # NVIDIA's immediate resolution bucket ("" when the catalogue gives none)
    investigatory: str

    @property
    def meaning(self) -> str:
        desc = self.description if self.description != "Unused" else "unused in current drivers"
        return f"{self.mnemonic}: {desc}"


@cache
def _load() -> tuple[dict[str, object], dict[int, XidInfo]]:
    text = resources.files("forensics.match").joinpath("xid_catalog.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    table = {int(x["code"]): XidInfo(int(x["code"]), str(x["mnemonic"]), str(x["description"]),
                                     str(x["immediate"]), str(x["investigatory"])) for x in data["xid"]}
    header = {k: v for k, v in data.items() if k != "xid"}
    return header, table


def catalog() -> dict[int, XidInfo]:
    return _load()[1]


def catalog_version() -> str:
    """``"NVIDIA Xid catalog 2025-10, 172 codes"``."""
    header, table = _load()
    return f"NVIDIA Xid catalog {header['version']}, {len(table)} codes"


def lookup(code: int) -> XidInfo | None:
    return catalog().get(code)


def describe(code: int) -> str:
    """One sentence: number, name, meaning and bucket, or that the catalogue does not list it."""
    info = lookup(code)
    header, _ = _load()
    where = f"NVIDIA's Xid catalog {header['version']}"
    if info is None:
        return f"Xid {code} is not in {where} ({len(catalog())} codes)"
    bucket = info.immediate or "none given"
    action = BUCKET_MEANING.get(info.immediate, "")
    desc = info.description if info.description != "Unused" else "unused in current drivers"
    return (f"Xid {code} in {where}: {info.mnemonic}, \"{desc}\"; resolution bucket {bucket}"
            + (f" ({action})" if action else ""))
