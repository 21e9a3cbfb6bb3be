"""The facts people ask for first, read from a finding's evidence: where in training it
failed (the phase the framework parser read from the traceback's frames) and, for an
out-of-memory error, how much was asked for, how much was free and of what.

``Finding.facts`` keys (all optional): ``phase`` (``load``, ``forward``, ``backward``,
``optimizer-step``, ``eval``), ``first`` (true when this was the first training step:
the frames create optimizer state, which PyTorch optimizers do on the first ``step()``
only, or the file's progress bar still read ``0/N``), ``oom`` (``cuda``/``hip``),
``tried_mib``, ``free_mib``, ``total_mib``, ``gpu``; ``stop_code`` (a Windows bug check's, ``0x116``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from forensics.events import Event
from forensics.lazy_re import lazy_compile
from forensics.units import mib

__all__ = ["finding_facts", "oom_sentence", "stop_code_sentence"]

_PHASE_WORDS = {
    "load": ("while loading the model", "while loading the model"),
    "forward": ("in the forward pass", "in the first forward pass"),
    "backward": ("in the backward pass", "in the first backward pass"),
    "optimizer-step": ("at the optimizer step", "at the first optimizer step"),
    "eval": ("during evaluation", "during evaluation"),
}
#: Frames/lines that create optimizer state, which PyTorch optimizers do on the first step() only.
_STATE_INIT_FRAME = ":_init_group"
_STATE_INIT_LINE = lazy_compile(r"""state\[["'](?:exp_avg|exp_avg_sq|momentum_buffer|square_avg|sum)["']\]\s*=""")
_KINDS = ("traceback", "cuda-error")


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None


def _creates_optimizer_state(e: Event) -> bool:
    frames = e.attrs.get("frames")
    if isinstance(frames, list) and any(isinstance(f, str) and f.endswith(_STATE_INIT_FRAME) for f in frames):
        return True
    return bool(_STATE_INIT_LINE.search(e.detail or ""))


def _no_step_done(e: Event, progress: Sequence[Event]) -> bool:
    """True when the same file's progress bar (``n/total``) had counted no step before ``e``."""
    before = [p for p in progress if p.origin.path == e.origin.path and p.origin.line <= e.origin.line]
    if not before:
        return False
    last = before[-1]
    steps = [n for p in before if (n := _number(p.attrs.get("step"))) is not None]
    return last.attrs.get("total") is not None and steps[-1:] == [0.0] and max(steps) == 0


def finding_facts(evidence: Sequence[Event],
                  progress: Callable[[], Sequence[Event]] = lambda: ()) -> dict[str, Any]:
    """Facts from the first traceback (an OOM one preferred) among a finding's evidence;
    ``progress()`` gives the timeline's progress events (to tell the first step), asked
    only when there is a traceback."""
    facts: dict[str, Any] = {}
    stop = next((c for e in evidence if (c := _stop_code(e)) is not None), None)
    if stop is not None:
        facts["stop_code"] = stop
    errors = [e for e in evidence if e.kind in _KINDS and (e.attrs.get("oom") or e.attrs.get("phase"))]
    if not errors:
        return facts
    e = next((x for x in errors if x.attrs.get("oom")), errors[0])
    phase = e.attrs.get("phase")
    if isinstance(phase, str) and phase:
        facts["phase"] = phase
        if (phase == "optimizer-step" and _creates_optimizer_state(e)) or (
                phase in ("forward", "backward", "optimizer-step") and _no_step_done(e, progress())):
            facts["first"] = True
    oom = e.attrs.get("oom")
    if isinstance(oom, str) and oom:
        facts["oom"] = oom
        for key in ("tried_mib", "free_mib", "total_mib"):
            if (n := _number(e.attrs.get(key))) is not None:
                facts[key] = n
        gpu = e.attrs.get("gpu")
        if isinstance(gpu, int | str) and not isinstance(gpu, bool):
            facts["gpu"] = gpu
    return facts


def _stop_code(e: Event) -> str | None:
    """A Windows stop code a bug check event carries (``0x116``), None for none or 0 (a power loss)."""
    raw = e.attrs.get("code") if e.kind == "bugcheck" else e.attrs.get("bugcheck_code")
    if isinstance(raw, str):
        try:
            raw = int(raw, 16) if raw.lower().startswith("0x") else int(raw)
        except ValueError:
            return None
    if not isinstance(raw, int) or isinstance(raw, bool) or raw <= 0:
        return None
    return f"0x{raw:X}"


def stop_code_sentence(facts: Mapping[str, Any]) -> str:
    """``Stop code 0x116``, or ``""``."""
    return f"Stop code {facts['stop_code']}" if facts.get("stop_code") else ""


def oom_sentence(facts: Mapping[str, Any]) -> str:
    """``CUDA out of memory at the first optimizer step (tried 256 MiB with 201 MiB free of
    139.8 GiB)``, or ``""`` when the facts hold no out-of-memory error."""
    oom = facts.get("oom")
    if not oom:
        return ""
    text = f"{'HIP' if oom == 'hip' else 'CUDA'} out of memory"
    words = _PHASE_WORDS.get(str(facts.get("phase")))
    if words:
        text += " " + words[1 if facts.get("first") else 0]
    tried, free, total = (_number(facts.get(k)) for k in ("tried_mib", "free_mib", "total_mib"))
    sizes = []
    if tried is not None:
        sizes.append(f"tried {mib(tried)}")
    if free is not None:
        sizes.append(f"with {mib(free)} free" + (f" of {mib(total)}" if total is not None else ""))
    elif total is not None:
        sizes.append(f"on a {mib(total)} GPU")
    return text + (f" ({' '.join(sizes)})" if sizes else "")
