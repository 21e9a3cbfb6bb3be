"""The ``TORCHELASTIC_ERROR_FILE`` JSON a worker writes when its ``@record``-decorated main raises.

Shape written by ``torch.distributed.elastic.multiprocessing.errors.ErrorHandler``::

    {"message": {"message": "RuntimeError: CUDA error: ...",
                 "extraInfo": {"py_callstack": "Traceback (most recent call last): ...",
                               "timestamp": "1716304983"}}}

(the agent may add ``"errorCode"``; a plain-string ``"message"`` is accepted too). It is the only
place with a machine-readable exception and an absolute time, so it becomes one ``traceback``
event whose time is the file's epoch timestamp.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import MappingProxyType
from typing import Any

from forensics.parsers.common.base import ParseContext, Record, whole_text
from forensics.parsers.producers import py_traceback

from forensics.events import Event, Origin, Severity, TsSource
from forensics.ingest.reader import loads_bounded
from forensics.ingest.textdoc import TextDocument

__all__ = ["PARSER"]


def _frames(callstack: str) -> list[str]:
    return [f for f in (py_traceback.frame_of(s.strip()) for s in callstack.splitlines()) if f]


class ElasticErrorFileParser:
    name = "elastic-error-file"
    # Shape written by torch/distributed/elastic/multiprocessing/errors/error_handler.py (_write_error);
    # the callstack is the illegal-address traceback shape of the corpus.
    samples = (
        '{"message": {"message": "RuntimeError: CUDA error: an illegal memory access was encountered", '
        '"extraInfo": {"py_callstack": "Traceback (most recent call last):\\n  File \\"/w/train.py\\", line 9, '
        'in main\\n    loss.backward()\\n  File \\"/usr/lib/python3.10/site-packages/torch/_tensor.py\\", '
        'line 522, in backward\\n    torch.autograd.backward(\\nRuntimeError: CUDA error: an illegal memory '
        'access was encountered\\n", "timestamp": "1716304983"}}}\n',
    )

    def detect(self, head: list[str]) -> float:
        if not head or not head[0].lstrip().startswith("{"):
            return 0.0
        text = "\n".join(head[:5])
        if '"message"' in text and ('"extraInfo"' in text or '"py_callstack"' in text or '"errorCode"' in text):
            return 0.95
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        raw = whole_text(doc, ctx)
        if raw is None:
            return
        try:
            data = loads_bounded(raw.decode("utf-8", errors="replace"))
        except (ValueError, RecursionError):
            ctx.warn("not a valid TORCHELASTIC_ERROR_FILE (JSON did not parse)")
            return
        outer = data.get("message") if isinstance(data, dict) else None
        if isinstance(outer, str):
            outer = {"message": outer}
        if not isinstance(outer, dict):
            ctx.warn("TORCHELASTIC_ERROR_FILE without a 'message' object")
            return
        message = str(outer.get("message") or "").strip()
        extra_raw = outer.get("extraInfo")
        extra: dict[str, Any] = extra_raw if isinstance(extra_raw, dict) else {}
        callstack = str(extra.get("py_callstack") or "")
        attrs: dict[str, Any] = {}
        exc_type = py_traceback.exception_type(message.splitlines()[0]) if message else None
        if exc_type:
            attrs["exc_type"] = exc_type
        frames = _frames(callstack)
        if frames:
            attrs["frames"] = frames
            phase = py_traceback.phase_of(frames)
            if phase:
                attrs["phase"] = phase
        if "errorCode" in outer:
            attrs["error_code"] = outer["errorCode"]
        attrs.update(py_traceback.oom_attrs(message + "\n" + callstack))
        ts, src = None, TsSource.NONE
        try:
            stamp = int(str(extra.get("timestamp", "")).strip())
            if 0 < stamp < 1 << 33:
                ts, src = stamp * 1_000_000_000, TsSource.EXACT
        except ValueError:
            pass
        yield Event(
            ts=ts,
            ts_source=src,
            source=ctx.source,
            kind="traceback",
            message=(message.splitlines()[0] if message else "worker error (no message)")[:4000],
            origin=Origin(ctx.path, 1, 0, raw.count(b"\n") + 1),
            severity=Severity.ERROR,
            host=ctx.host,
            gpu=str(attrs["gpu"]) if "gpu" in attrs else None,
            attrs=MappingProxyType(attrs),
            detail=(callstack or message)[:200_000],
        )


PARSER = ElasticErrorFileParser()
