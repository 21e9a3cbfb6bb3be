"""How fast ``forensics open`` paints and answers keys with a million timeline events, headless.

Builds a synthetic analysis (``forensics.tui.demo.synthetic``: 4 hosts, 3 sources each, ~1 %
errors) of N events, then runs the app under Textual's headless driver and measures:

* **first paint**: from starting the app (analysis already in memory, as after ``analyze``) to the
  first frame that shows the overview with data; then the first frame of the timeline view;
* **keypress → repaint** on the timeline: the time from sending a key to the next frame the
  compositor hands to the (headless) driver, for ``down``, ``pagedown``, ``pageup``, ``end``,
  ``home``, ``n`` (next error) and ``N``, repeated; p50 / p95 / max;
* **background work**, off the UI thread: building the filter index, a few filters, a time jump.

Usage::

    python bench/bench_tui.py                 # 1 000 000 events
    python bench/bench_tui.py --events 200000 --reps 40

``bench/README.md`` (TUI) records the figures. Targets: first paint ≤ 1 s, keypress p95 ≤ 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from forensics.timeline.query import parse_query, parse_time  # noqa: E402
from forensics.tui import demo  # noqa: E402
from forensics.tui.app import ForensicsApp  # noqa: E402
from forensics.tui.timeline_pane import TimelinePane  # noqa: E402

KEYS = ("down", "down", "pagedown", "pagedown", "pageup", "n", "n", "N", "end", "home", "up")


class TimedApp(ForensicsApp):
    """The app, noting when each frame reaches the driver."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.frames: list[float] = []

    def _display(self, screen: Any, renderable: Any) -> None:
        if renderable is not None:
            self.frames.append(time.perf_counter())
        super()._display(screen, renderable)


async def _next_frame(app: TimedApp, pilot: Any, after: float, timeout: float = 10.0) -> float:
    """When the first frame after ``after`` was drawn (waiting for it if need be)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        later = [t for t in app.frames if t > after]
        if later:
            return later[0]
        await asyncio.sleep(0.001)
    raise TimeoutError("no frame drawn")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(round(q * (len(ordered) - 1))), len(ordered) - 1)]


async def run(events: int, reps: int, size: tuple[int, int]) -> dict[str, Any]:
    t = time.perf_counter()
    analysis = demo.synthetic(events)
    build_s = time.perf_counter() - t
    app = TimedApp(analysis=analysis)
    app.animation_level = "none"
    out: dict[str, Any] = {"events": len(analysis.timeline.events), "build_s": build_s}
    start = time.perf_counter()
    async with app.run_test(size=size) as pilot:
        while app.model is None:
            if app.load_error or time.perf_counter() - start > 120:
                raise RuntimeError(f"the app did not load: {app.load_error or 'timeout'}")
            await asyncio.sleep(0.001)
        loaded = time.perf_counter()
        out["first_paint_s"] = await _next_frame(app, pilot, loaded) - start
        await pilot.pause()
        t = time.perf_counter()
        await pilot.press("3")
        out["timeline_paint_s"] = await _next_frame(app, pilot, t) - t
        await app.workers.wait_for_complete()  # the filter index, built on a worker after the first paint
        out["index_ready_s"] = time.perf_counter() - start
        await pilot.pause()
        latencies: dict[str, list[float]] = {}
        for _ in range(reps):
            for key in KEYS:
                t = time.perf_counter()
                await pilot.press(key)
                frame = await _next_frame(app, pilot, t)
                latencies.setdefault(key, []).append(frame - t)
                await pilot.pause()
        every = [v for vs in latencies.values() for v in vs]
        out["keys"] = {k: (statistics.median(v), _pct(v, 0.95), max(v)) for k, v in latencies.items()}
        out["all_keys"] = (statistics.median(every), _pct(every, 0.95), max(every), len(every))
        pane = app.query_one(TimelinePane)
        index = app.event_index()
        work = {}
        for text in ("sev:error", "host:node-02 kind:c10d", "watchdog", "/SeqNum=9\\d\\d/"):
            t = time.perf_counter()
            rows = index.select(parse_query(text))
            work[f"filter {text}"] = (time.perf_counter() - t, len(rows))
        t = time.perf_counter()
        row = index.row_at_time(pane.view.view, parse_time("+5m", app.model.span))
        work["jump to +5m"] = (time.perf_counter() - t, row)
        out["work"] = work
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=20, help="rounds of the key sequence")
    parser.add_argument("--size", default="120x40", help="terminal WxH")
    args = parser.parse_args(argv)
    w, h = (int(x) for x in args.size.split("x"))
    r = asyncio.run(run(args.events, args.reps, (w, h)))
    ms = 1000
    print(f"events {r['events']:,} (synthetic analysis built in {r['build_s']:.1f} s, not counted)")
    print(f"first paint (overview with data)   {r['first_paint_s'] * ms:7.0f} ms")
    print(f"timeline view first paint          {r['timeline_paint_s'] * ms:7.0f} ms")
    print(f"filter index ready (background)    {r['index_ready_s'] * ms:7.0f} ms after start")
    p50, p95, worst, n = r["all_keys"]
    print(f"keypress -> repaint, all keys      p50 {p50 * ms:5.1f} ms  p95 {p95 * ms:5.1f} ms  max {worst * ms:5.1f} ms"
          f"  ({n} presses)")
    for key, (k50, k95, kmax) in r["keys"].items():
        print(f"  {key:<10} p50 {k50 * ms:5.1f} ms  p95 {k95 * ms:5.1f} ms  max {kmax * ms:5.1f} ms")
    for name, (secs, result) in r["work"].items():
        print(f"{name:<34} {secs * ms:7.0f} ms  -> {result:,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
