"""How far ``analyze`` has read: a byte meter and its one-line stderr display.

The unit is input bytes as they lie on disk, so the total is known before anything is read
(one ``stat`` per file). Each disk file's bytes are credited in two steps: reading it
(and unpacking an archive) earns :data:`READ_SHARE` of them, parsing the files that came out of
it the rest, in proportion to how far the parser has got (``TextDocument.progress``).
The meter calls its sink at most every ``interval`` seconds, so hooks may call it often.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from forensics.units import si_bytes as human_bytes

__all__ = ["INTERVAL", "READ_SHARE", "Meter", "Progress", "ProgressLine", "describe", "human_bytes"]

#: Part of a file's bytes credited for reading and unpacking it; parsing earns the rest.
READ_SHARE = 0.2
#: Seconds between two updates of the sink (a few a second: readable, and cheap to draw).
INTERVAL = 0.2


@dataclass(frozen=True)
class Progress:
    """A snapshot: ``done`` of ``total`` input bytes after ``elapsed`` seconds, reading ``name``."""

    done: int
    total: int
    name: str
    elapsed: float

    @property
    def fraction(self) -> float:
        return min(1.0, self.done / self.total) if self.total > 0 else 0.0

    @property
    def rate(self) -> float:
        """Bytes per second since the start."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0


class Meter:
    """Counts input bytes done, one step (a file being read or parsed) at a time."""

    def __init__(self, total: int, sink: Callable[[Progress], None], interval: float | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.total = max(0, total)
        self._sink = sink
        self._interval = INTERVAL if interval is None else interval
        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._last = float("-inf")
        self._settled = 0.0  # bytes of the steps already finished
        self._weight = 0.0  # bytes the current step is worth
        self._current = 0.0  # bytes of the current step done
        self.name = ""

    @property
    def done(self) -> int:
        return int(self._settled + self._current)

    def step(self, name: str, weight: float) -> None:
        """A new step begins (the previous one counts as finished): ``weight`` bytes for ``name``."""
        self._settled += self._weight
        self._weight, self._current, self.name = max(0.0, weight), 0.0, name
        self._maybe_emit()

    def advance(self, fraction: float) -> None:
        """The current step is ``fraction`` (0–1) done; never goes back."""
        current = self._weight * min(1.0, fraction)
        if current > self._current:
            self._current = current
            self._maybe_emit()

    def finish(self, name: str = "") -> None:
        """Everything is read: show the full bar once (``name``: what happens next, if anything)."""
        self._settled, self._weight, self._current = float(self.total), 0.0, 0.0
        self.name = name
        self._emit()

    def snapshot(self) -> Progress:
        return Progress(min(self.done, self.total) if self.total else self.done, self.total, self.name,
                        self._clock() - self._start)

    def _maybe_emit(self) -> None:
        if self._clock() - self._last >= self._interval:
            self._emit()

    def _emit(self) -> None:
        self._last = self._clock()
        self._sink(self.snapshot())


def describe(p: Progress, name_width: int = 70) -> str:
    """One plain line for a loading screen: ``reading NAME: 340 MB of 1.0 GB (34%), 410 MB/s``."""
    rate = f"{human_bytes(p.rate)}/s"
    if not p.name and p.total and p.done >= p.total:
        return f"read {human_bytes(p.total)} at {rate}; matching the signatures…"
    amount = f"{human_bytes(p.done)} of {human_bytes(p.total)} ({p.fraction:.0%})" if p.total else human_bytes(p.done)
    what = f"reading {_shorten(p.name, name_width)}" if p.name else "reading"
    return f"{what}: {amount}, {rate}"


def _shorten(name: str, width: int, unicode: bool = True) -> str:
    """The end of ``name`` (the file name matters more than its directories) in ``width`` columns."""
    if width <= 0 or len(name) <= width:
        return name if width > 0 else ""
    mark = "…" if unicode else "..."
    return mark + name[len(name) - max(0, width - len(mark)):] if width > len(mark) else name[-width:]


class ProgressLine:
    """Draws :class:`Progress` as one line on a terminal through ``rich.progress`` (it ships with
    Textual): a bar, the percentage, bytes done of the total, the rate and the end of the file's name,
    within the terminal's width; redrawn in place, and ``clear`` removes it (the report then starts on
    a clean line). The caller draws it only on a terminal and never with ``--quiet`` (``cli.py``)."""

    BAR = 24

    def __init__(self, stream: TextIO, width: Callable[[], int] | None = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, TextColumn
        from rich.progress import Progress as RichProgress

        self.stream = stream
        self._width = width or (lambda: shutil.get_terminal_size((80, 24)).columns)
        self.console = Console(file=stream, force_terminal=True, width=max(20, self._width()), highlight=False,
                               emoji=False, soft_wrap=False)
        self._unicode = not self.console.options.ascii_only
        self._bar = RichProgress(BarColumn(bar_width=self.BAR), TextColumn("{task.fields[text]}", markup=False),
                                 console=self.console, auto_refresh=False, transient=True,
                                 redirect_stdout=False, redirect_stderr=False)
        self._task = self._bar.add_task("", total=1, text="")
        self.drawn = False

    def _text(self, p: Progress) -> str:
        amount = f"{human_bytes(p.done)} / {human_bytes(p.total)}" if p.total else human_bytes(p.done)
        head = f"{p.fraction:4.0%}  {amount}  {human_bytes(p.rate)}/s"
        room = self.console.width - self.BAR - 2  # the bar, the column gap, one spare column
        if len(head) >= room:
            return head[:room]
        return f"{head}  {_shorten(p.name, room - len(head) - 2, self._unicode)}".rstrip()

    def _update(self, p: Progress) -> None:
        self.console.width = max(20, self._width())
        total = p.total if p.total > 0 else None
        self._bar.update(self._task, completed=min(p.done, p.total) if total else 0, total=total,
                         text=self._text(p))

    def render(self, p: Progress) -> str:
        """The line as plain text (what :meth:`__call__` draws, without its colours)."""
        from rich.text import Text

        self._update(p)
        with self.console.capture() as captured:
            self.console.print(self._bar.make_tasks_table(self._bar.tasks))
        return Text.from_ansi(captured.get()).plain.rstrip("\n").rstrip()

    def __call__(self, p: Progress) -> None:
        self._update(p)
        if self.drawn:
            self._bar.refresh()
        else:
            self._bar.start()  # draws the first frame
            self.drawn = True

    def clear(self) -> None:
        if self.drawn:
            self._bar.stop()  # transient: the line is erased and the cursor shown again
            self.drawn = False
