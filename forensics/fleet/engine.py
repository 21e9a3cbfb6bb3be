"""The Dask side of ``forensics fleet``: a ``dask.bag`` of (input id, path) mapped through
:func:`forensics.fleet.tasks.analyze_one`, computed on a ``distributed`` cluster.

By default a :class:`distributed.LocalCluster` of worker *processes* (one thread each: the analysis is
CPU-bound Python, threads would share one GIL); with ``scheduler`` an existing cluster
(``tcp://host:8786``), whose workers must have gpu-forensics installed and see the same paths.
Results stream back partition by partition, so the caller writes them while the rest still run; a
partition whose worker died (``KilledWorker``, lost connection …) becomes one error row per input in it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from forensics.errors import UsageError

__all__ = ["INSTALL_HINT", "Run", "require", "run_fleet"]

INSTALL_HINT = "forensics fleet needs Dask and DuckDB: pip install 'gpu-forensics[fleet]'"


def require() -> None:
    """Raise :class:`UsageError` with the install line when the fleet extra is missing."""
    from importlib.util import find_spec

    for name in ("dask", "distributed", "duckdb"):  # found, not imported: the import happens where used
        try:
            found = find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise UsageError(f"{INSTALL_HINT} ({name} is not installed)")


@dataclass
class Run:
    """Where the work ran: the scheduler's address and how many worker processes/threads it had."""

    scheduler: str
    workers: int
    threads: int
    local: bool


@contextmanager
def _client(scheduler: str | None, workers: int) -> Iterator[Any]:
    import distributed

    if scheduler:
        try:
            client = distributed.Client(scheduler, timeout="20s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise UsageError(f"cannot reach the Dask scheduler at {scheduler}: {exc}") from None
        try:
            try:
                client.wait_for_workers(1, timeout=60)
            except TimeoutError:
                raise UsageError(f"the Dask scheduler at {scheduler} has no workers (waited 60 s)") from None
            yield client
        finally:
            client.close()
        return
    cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=logging.CRITICAL)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


#: Dask's own loggers in this process and, through the environment, in its worker processes. A worker
#: whose scheduler closes first logs a CommClosedError traceback from its next heartbeat, a nanny a
#: CancelledError one — at every run's end (issue 24); what matters of a worker's failure comes back
#: as the error row of its inputs, so only Dask's critical lines are printed.
_QUIET_DASK = {"DASK_LOGGING__DISTRIBUTED": "critical"}


def _quiet_dask_logs() -> None:
    for name, value in _QUIET_DASK.items():
        os.environ.setdefault(name, value)
    for name in ("distributed", "tornado", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def default_workers() -> int:
    """At least 2 worker processes, at most one per CPU core."""
    return max(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 2))


def _partition_size(n: int, workers: int) -> int:
    """Small enough to keep every worker busy to the end, large enough that Dask's per-task cost stays
    small beside the ~0.1 s one bundle takes."""
    return max(1, min(16, n // max(1, workers * 8)))


def lost_rows(ids: Sequence[tuple[int, str]], why: str) -> list[dict[str, Any]]:
    """An error row for each (input id, path) whose result never came back."""
    from forensics.fleet.tasks import _input_row

    out = []
    for input_id, path in ids:
        row = _input_row(input_id, path)
        row["worker"] = None
        row["error"] = why[:500]
        out.append({"input": row, "findings": [], "gpus": []})
    return out


def run_fleet(paths: Sequence[str], options: dict[str, Any], scheduler: str | None, workers: int,
              on_results: Callable[[list[dict[str, Any]]], None]) -> Run:
    """Analyse every path (one task each) and hand each partition's results to ``on_results`` as they
    arrive (in the caller's process). Returns where it ran."""
    _quiet_dask_logs()  # before distributed is imported here and in the workers it starts
    import dask.bag as db
    import distributed

    from forensics.fleet.tasks import analyze_one

    items = list(enumerate(paths))
    with _client(scheduler, workers) as client:
        info = client.scheduler_info()
        workers_info = info.get("workers", {})
        run = Run(str(info.get("address", scheduler or "")), len(workers_info),
                  sum(int(w.get("nthreads", 1)) for w in workers_info.values()), scheduler is None)
        size = _partition_size(len(items), max(1, run.threads))
        bag = db.from_sequence(items, partition_size=size)
        parts = bag.starmap(analyze_one, options=options).to_delayed()
        # from_sequence cuts ``items`` in runs of ``size``: the inputs of a partition that is lost
        chunks = [items[i:i + size] for i in range(0, len(items), size)]
        futures = client.compute(parts)
        which = {f.key: chunks[i] if i < len(chunks) else [] for i, f in enumerate(futures)}
        for future in distributed.as_completed(futures):
            try:
                results = future.result()
            except Exception as exc:  # a worker died or the task could not run: its inputs become error rows
                results = lost_rows(which[future.key], f"{type(exc).__name__}: {exc}")
            on_results(list(results))
            future.release()
    return run
