"""Lines that say a run pauses on purpose: a checkpoint being saved, an evaluation or validation.

A long silence right after such a line is the run at work, not a stall: the watcher holds a
stall alert (no progress, a GPU idle or spinning while its peers wait) while the newest such line
is newer than the newest progress line and younger than ``--pause-max`` (default 30 min).
"""

from __future__ import annotations

import re

__all__ = ["PAUSE_WORDS", "PauseMarkers"]

PAUSE_WORDS = re.compile(
    rb"(?i)sav(?:e|ing)[ _](?:the )?(?:model|checkpoint|ckpt|state|weights)|checkpoint(?:ing)?\b|save_pretrained"
    rb"|\beval(?:uat(?:e|es|ing|ion))?\b|\bvalidat(?:e|ing|ion)\b|running (?:eval|validation|test)")


_HINTS = (b"sav", b"checkpoint", b"ckpt", b"eval", b"validat", b"running ")


class PauseMarkers:
    """The newest pause line seen, and when (``last_ts``: the data's clock when it was read, so it compares
    with the progress lines' times however late those are parsed)."""

    def __init__(self) -> None:
        self.last_ts: int | None = None
        self.text = ""
        self.count = 0

    def scan(self, data: bytes, at_ns: int) -> bool:
        """Whether ``data`` (new lines of a stream) holds a pause line; the last one is remembered."""
        low = data.lower()
        if not any(w in low for w in _HINTS):  # the common case, in C: no such word at all
            return False
        found = None
        for m in PAUSE_WORDS.finditer(data):
            found = m
        if found is None:
            return False
        start = data.rfind(b"\n", 0, found.start()) + 1
        end = data.find(b"\n", found.end())
        self.text = data[start: end if end >= 0 else len(data)].decode("utf-8", "replace").strip()[:200]
        self.last_ts = at_ns
        self.count += 1
        return True
