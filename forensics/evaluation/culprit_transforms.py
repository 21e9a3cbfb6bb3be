"""Transforms that change how workers are named and how many there are: the same incident, another shape.

The culprit (the rank, node or process to look at) must not depend on the shape a log arrives in:

* ``strip-prefix``: torchrun's ``[default6]:`` / ``[rank6]:`` prefixes removed, the rank kept only inside
  the message (``… INFO [rank 6] drafter 6: step 800``), as a program that labels its own lines prints it;
  continuation lines (a traceback's frames) keep no rank;
* ``relabel-srun``, ``relabel-pdsh``, ``relabel-ray``, ``relabel-k8s``: the torchrun prefix replaced with
  another launcher's label for the same worker — ``srun -l``'s ``6: ``, pdsh's ``node06: `` (one rank per
  node), Ray's ``(RayTrainWorker pid=…, ip=…)``, ``kubectl logs --prefix``'s ``[pod/trainer-worker-6/…]``;
  the worker is then named by its node, its process or its pod (``FileInfo.renamed`` says how);
* ``shuffle-ranks``: the lines of a round of interleaved ranks in another order (each rank's own order
  kept), as an aggregated log receives them;
* ``scale-64``, ``scale-512``, ``scale-2048``: the job grown to that many ranks by adding ranks that do what
  a bystander rank did (the baseline's victim, ``FileInfo.bystander``): more victims, the same culprit.

``paste`` (all inputs as one text, both orders) works on a whole case: :mod:`forensics.evaluation.invariance`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from random import Random
from typing import TYPE_CHECKING

from forensics.lazy_re import lazy_compile

if TYPE_CHECKING:
    from forensics.evaluation.transforms import FileInfo

__all__ = ["relabel", "scale", "shuffle_ranks", "strip_prefix"]

#: Lines a launcher must have labelled for its label to be told from the text (a one-line paste is not).
MIN_LABELLED = 3
_TORCHRUN = lazy_compile(r"^\[(?:rank|default) ?(\d{1,5})\]:\s?")
#: A logging header the rank goes after (an ISO or glog stamp and a level).
_HEADER = lazy_compile(r"^(?:\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?\s+(?:[A-Z]{4,8}\s+)?"
                       r"|\[\d{4}-\d\d-\d\d[ T][^\]]{8,30}\]\s*(?:\[[A-Z]{4,8}\]\s*)?"
                       r"|[EWIF]\d{4} \d\d:\d\d:\d\d\.\d+ \d+ \S+:\d+\]\s)")
_NAMES_RANK = lazy_compile(r"\[(?:Rank|rank|RANK) ?\d+\]|\brank[ =:]\d+")


def _lines(text: str) -> tuple[list[str], str]:
    if text.endswith("\n"):
        return text[:-1].split("\n"), "\n"
    return text.split("\n"), ""


def _continuation(body: str) -> bool:
    return body[:1] in (" ", "\t") or body.startswith(("Traceback", "File ", "  "))


def _rewrite_labelled(lines: list[str], end: str, rewrite: Callable[[str, re.Match[str]], str]) -> str | None:
    """Each torchrun-labelled line through ``rewrite(line, its label match)``, the others as they are; None
    when no line is labelled."""
    out, changed = [], False
    for line in lines:
        m = _TORCHRUN.match(line)
        if m is None:
            out.append(line)
            continue
        changed = True
        out.append(rewrite(line, m))
    return "\n".join(out) + end if changed else None


def strip_prefix(text: str, info: FileInfo, rng: Random) -> str | None:
    def unlabel(line: str, m: re.Match[str]) -> str:
        body = line[m.end():]
        if _continuation(body) or _NAMES_RANK.search(body):
            return body
        h = _HEADER.match(body)
        at = h.end() if h else 0
        return f"{body[:at]}[rank {m.group(1)}] {body[at:]}"

    return _rewrite_labelled(*_lines(text), unlabel)


def _pid(rank: int, info: FileInfo) -> int:
    return 20000 + 37 * rank + info.index


def _label(launcher: str, rank: int, info: FileInfo) -> tuple[str, dict[str, str]]:
    """The launcher's label for worker ``rank`` and what it names it by."""
    if launcher == "srun":
        return f"{rank}: ", {"ranks": str(rank)}
    if launcher == "pdsh":
        return f"node{rank:02d}: ", {"hosts": f"node{rank:02d}"}
    if launcher == "ray":
        ip = f"10.1.{rank // 250}.{rank % 250 + 1}"
        return f"(RayTrainWorker pid={_pid(rank, info)}, ip={ip}) ", {"pids": str(_pid(rank, info)), "hosts": ip}
    pod = f"trainer-worker-{rank}"
    return f"[pod/{pod}/pytorch] ", {"hosts": pod}


def relabel(launcher: str) -> Callable[[str, FileInfo, Random], str | None]:
    def fn(text: str, info: FileInfo, rng: Random) -> str | None:
        lines, end = _lines(text)
        labelled = [m.group(1) for line in lines if (m := _TORCHRUN.match(line))]
        if len(labelled) < MIN_LABELLED or len(set(labelled)) < 2:
            return None  # a label on a line or two, or on one worker only, names no worker of a job

        def label_line(line: str, m: re.Match[str]) -> str:
            rank = int(m.group(1))
            label, names = _label(launcher, rank, info)
            info.renamed[rank] = names
            return label + line[m.end():]

        return _rewrite_labelled(lines, end, label_line)

    return fn


def shuffle_ranks(text: str, info: FileInfo, rng: Random) -> str | None:
    """Each run of consecutive rank-prefixed lines, cut in rounds (as many lines as ranks), with every round
    merged in a random order that keeps each rank's own lines in order."""
    lines, end = _lines(text)
    ranks = {m.group(1) for line in lines if (m := _TORCHRUN.match(line))}
    if len(ranks) < 2:
        return None
    size = max(2, len(ranks))
    out: list[str] = []
    block: list[tuple[str, str]] = []

    def flush() -> None:
        per: dict[str, list[str]] = {}
        for rank, line in block:
            per.setdefault(rank, []).append(line)
        queues = list(per.values())
        while queues:
            q = rng.choice(queues)
            out.append(q.pop(0))
            if not q:
                queues.remove(q)
        block.clear()

    for line in lines:
        m = _TORCHRUN.match(line)
        if m is None:
            flush()
            out.append(line)
            continue
        block.append((m.group(1), line))
        if len(block) >= size:
            flush()
    flush()
    new = "\n".join(out) + end
    return new if new != text else None


_WORLD = lazy_compile(r"(\bnranks[ =:]\s?|\bworld_size[ =:]\s?|\bWORLD_SIZE[ =:]\s?|world size:? )(\d{1,6})")


def _mentions(rank: int) -> re.Pattern[str]:
    """Where a line names rank ``rank``: a prefix, ``[Rank r]``, ``rank r`` / ``rank=r``, NCCL's ``[r]`` device tag
    is not a rank and stays."""
    return re.compile(rf"(?<![\w.])(\[(?:rank|default|Rank|RANK) ?|(?:rank|Rank|RANK)[ =:]\s?){rank}(?!\d)")


def _renumber(rank: int) -> Callable[[re.Match[str]], str]:
    return lambda m: f"{m.group(1)}{rank}"


def scale(n: int) -> Callable[[str, FileInfo, Random], str | None]:
    def fn(text: str, info: FileInfo, rng: Random) -> str | None:
        lines, end = _lines(text)
        named = {int(m.group(1)) for line in lines if (m := _TORCHRUN.match(line))}
        worlds = [int(m.group(2)) for line in lines for m in _WORLD.finditer(line)]
        world = max([*worlds, *(r + 1 for r in named)], default=0)
        if len(named) < 2 or world >= n:
            return None
        template = info.bystander if info.bystander in named else min(named - set(info.culprits), default=None)
        if template is None:
            return None
        mention = _mentions(template)
        out: list[str] = []
        run: list[str] = []  # the bystander's consecutive lines: one record (a traceback) or one line

        def flush() -> None:
            out.extend(run)
            for new in range(world, n):  # the record again, once for each added rank, whole
                out.extend(mention.sub(_renumber(new), ln) for ln in run)
            run.clear()

        for line in lines:
            line = _WORLD.sub(lambda m: f"{m.group(1)}{n}" if int(m.group(2)) == world else m.group(0), line)
            m = _TORCHRUN.match(line)
            if m is not None and int(m.group(1)) == template:
                run.append(line)
                continue
            flush()
            out.append(line)
        flush()
        return "\n".join(out) + end

    return fn
