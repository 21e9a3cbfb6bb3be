"""Does the culprit line name the right worker? The comparison behind ``eval``'s culprit score and the
culprit invariance of ``eval --transforms``.

A culprit is a set of names per dimension: ``ranks``, ``gpus`` (a PCI bus id, normalized to
``dddd:bb:dd.f``, or an index), ``hosts``, ``pids``. Two culprits are the same when, in every dimension both
name, they name the same set, and they share at least one dimension (a verdict that names rank 62 and
GPU 6 names the culprit labelled ``ranks = [62]``; one that names rank 61 does not). Where no culprit was
named (an untransformed text), any is accepted: a shape may reveal which worker printed an error.

A case's label is its ``case.toml`` ``[culprit]`` table (``ranks``, ``gpus``, ``hosts``, ``pids``, ``basis``:
tests/realcases2/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from forensics.findings import Blame

__all__ = ["DIMENSIONS", "CulpritKey", "culprit_key", "describe_key", "label_key", "same_culprit"]

DIMENSIONS = ("ranks", "gpus", "hosts", "pids")
CulpritKey = dict[str, frozenset[str]]
_PCI = re.compile(r"^(?:([0-9a-f]{4,8}):)?([0-9a-f]{2}):([0-9a-f]{2})(?:\.([0-7]))?$")


def _gpu(value: object) -> str:
    """``00000000:3B:00.0`` / ``0000:3b:00`` / ``3b:00.0`` → ``0000:3b:00.0``; an index stays a number."""
    text = str(value).strip().lower()
    m = _PCI.match(text)
    if m:
        return f"{(m.group(1) or '0000')[-4:]}:{m.group(2)}:{m.group(3)}.{m.group(4) or '0'}"
    return str(int(text)) if text.isdigit() else text


def _set(values: object, norm: Any = str) -> frozenset[str]:
    if not isinstance(values, list | tuple | set | frozenset):
        return frozenset()
    return frozenset(norm(v) for v in values if v is not None and str(v).strip())


def culprit_key(blame: Blame | None, renamed: Mapping[int, Mapping[str, str]] | None = None) -> CulpritKey:
    """The culprit a verdict names; ``renamed`` (a relabelling transform's) names ranks as their worker
    is named now (a pdsh host, a Ray pid)."""
    if blame is None:
        return {d: frozenset() for d in DIMENSIONS}
    pids = getattr(blame, "culprit_pids", [])  # (a Blame before culprit_pids: an older analyzer, scored the same way)
    out: dict[str, set[str]] = {"ranks": {str(r) for r in blame.culprit_ranks},
                                 "gpus": {_gpu(g) for g in blame.culprit_gpus},
                                 "hosts": set(blame.culprit_hosts), "pids": {str(p) for p in pids}}
    for rank, names in (renamed or {}).items():
        if str(rank) in out["ranks"] and names:
            if "ranks" not in names:
                out["ranks"].discard(str(rank))
            for dim, value in names.items():
                out.setdefault(dim, set()).add(value)
    if renamed:  # hosts the untransformed run named are not how the relabelled workers are named
        renamed_dims = {d for names in renamed.values() for d in names}
        if "hosts" in renamed_dims:
            out["hosts"] = {h for h in out["hosts"] if any(h == n.get("hosts") for n in renamed.values())}
    return {d: frozenset(out.get(d, set())) for d in DIMENSIONS}


def label_key(table: Mapping[str, Any]) -> CulpritKey:
    """A case's ``[culprit]`` table as a key."""
    return {"ranks": _set(table.get("ranks"), lambda r: str(int(r))), "gpus": _set(table.get("gpus"), _gpu),
            "hosts": _set(table.get("hosts")), "pids": _set(table.get("pids"), lambda p: str(int(p)))}


def same_culprit(want: CulpritKey, got: CulpritKey) -> bool:
    """See the module docstring. Wanting no culprit constrains nothing: a shape may name the worker an
    untransformed text did not (a launcher's label says which rank printed an error)."""
    shared = [d for d in DIMENSIONS if want.get(d) and got.get(d)]
    if not any(want.get(d) for d in DIMENSIONS):
        return True
    return bool(shared) and all(want[d] == got[d] for d in shared)


def describe_key(key: CulpritKey) -> str:
    """``ranks 6,7; gpus 0000:c1:00.0`` (empty for no culprit)."""
    parts = []
    for d in DIMENSIONS:
        values = sorted(key.get(d, frozenset()), key=lambda v: (len(v), v))
        if values:
            shown = ",".join(values[:8]) + (f",…(+{len(values) - 8})" if len(values) > 8 else "")
            parts.append(f"{d} {shown}")
    return "; ".join(parts)
