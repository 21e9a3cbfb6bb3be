"""The on-disk bundle that ``forensics record`` writes, seen from the reading side.

A bundle is a directory with ``manifest.json`` whose ``format`` is
``gpu-forensics-bundle``. The full layout is documented in docs/bundle-format.md.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from forensics.sources import InputFile, Limits

__all__ = ["FORMAT", "MANIFEST", "is_bundle", "read_bundle_files", "read_manifest"]

FORMAT = "gpu-forensics-bundle"
MANIFEST = "manifest.json"


def read_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of bundle directory ``path``, or ``None`` when it is not a bundle."""
    try:
        data = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == FORMAT else None


def is_bundle(path: Path) -> bool:
    return read_manifest(path) is not None


def read_bundle_files(path: Path, limits: Limits) -> Iterator[InputFile]:
    """Every file of the bundle, tagged with what the manifest says about it."""
    from forensics.sources import _walk

    manifest = read_manifest(path) or {}
    host = manifest.get("host")
    for item in _walk(path, limits, bundles=False):
        item.host = item.host or host
        yield item
