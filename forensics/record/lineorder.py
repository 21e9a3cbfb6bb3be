"""Keep lines whole when two of the child's streams lead to one place (``> log 2>&1``, Slurm, nohup).

Without the recorder the child's stdout and stderr writes land in the one file in the order the
child made them, so a line written in two pieces (``print`` under ``python -u`` writes the text,
then the newline) is never cut by a line of the other stream. The recorder reads two pipes; had it
passed each chunk on as it came, a stdout line's text could go out, then a stderr line, then the
stdout newline: ``step 3/5 loss=1.000[rank0] progress 60%``.

:class:`LineOrder` is the echo's queue, one per destination. Each chunk read from a stream becomes a
*segment*; a segment that does not end a line (``\\n`` or ``\\r``) stays *open*, and the stream's next
bytes up to their first line end complete it in place. Segments leave in the order they were read,
and an open one at the head holds the ones behind it, until its line ends or :data:`HOLD_S` passes
(a prompt or a progress bar without a newline then goes out as it is). So a line is never cut by
the other stream, and a line the child began first goes out first. The order in which two lines of
*different* streams were written is known to the recorder only as far as its reads show it: the
caller reads every stream each round, the one with an open line on the output first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["HOLD_S", "LineOrder"]

HOLD_S = 0.05  # how long an unfinished line may hold the output (a prompt shows within this)
_ENDS = (b"\n", b"\r")


def _line_end(data: bytes) -> int:
    """Index just past the first line end in ``data`` (0: none)."""
    ends = [i for i in (data.find(b"\n"), data.find(b"\r")) if i >= 0]
    return min(ends) + 1 if ends else 0


@dataclass
class _Segment:
    key: int  # the stream it came from
    data: bytearray
    since: float  # when its first byte was read
    done: bool  # ends a line (or was let go)


class LineOrder:
    """The echo queue of one destination; ``emit(key, data)`` writes bytes out (the caller's echo)."""

    def __init__(self, emit: Callable[[int, bytes], None], hold_s: float = HOLD_S) -> None:
        self._emit = emit
        self.hold_s = hold_s
        self._queue: deque[_Segment] = deque()
        self._open: dict[int, _Segment] = {}  # per stream: its unfinished segment still in the queue
        #: the stream whose unfinished line is on the output (let go by the deadline), if any
        self.owner: int | None = None

    def add(self, key: int, data: bytes, now: float) -> None:
        """Bytes read from stream ``key`` at ``now`` (monotonic seconds)."""
        seg = self._open.get(key)
        if seg is not None:
            cut = _line_end(data)
            if cut == 0:
                seg.data += data
                data = b""
            else:
                seg.data += data[:cut]
                seg.done = True
                del self._open[key]
                data = data[cut:]
        if data:
            cut = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1  # whole lines go as they are, the rest waits
            if cut:
                self._queue.append(_Segment(key, bytearray(data[:cut]), now, True))
            if cut < len(data):
                seg = _Segment(key, bytearray(data[cut:]), now, False)
                self._queue.append(seg)
                self._open[key] = seg
        self.pump(now)

    def pump(self, now: float) -> None:
        """Pass on what may go: complete segments at the head, and an open head held past its time."""
        while self._queue:
            head = self._queue[0]
            if not head.done and now - head.since < self.hold_s:
                return
            self._queue.popleft()
            if not head.done:
                self._open.pop(head.key, None)
            data = bytes(head.data)
            self.owner = None if data.endswith(_ENDS) else head.key
            self._emit(head.key, data)

    def close(self, key: int) -> None:
        """Stream ``key`` ended: its unfinished line is complete as it is."""
        seg = self._open.pop(key, None)
        if seg is not None:
            seg.done = True

    def flush(self) -> None:
        """Pass on everything still queued (at the end, or before handing the streams over)."""
        self._open.clear()
        for seg in self._queue:
            seg.done = True
        self.pump(float("inf"))

    def next_deadline(self) -> float | None:
        """When the open head (if any) must be let go."""
        if self._queue and not self._queue[0].done:
            return self._queue[0].since + self.hold_s
        return None

    @property
    def held(self) -> int:
        return sum(len(s.data) for s in self._queue)
