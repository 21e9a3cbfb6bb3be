"""Which worker wrote a line: a rank, a launcher's label (host, pod, pid), or a role and number.

A worker's identity arrives in many shapes. Launchers put it in front of the line (torchrun ``--tee``'s
``[default6]:`` / ``[rank6]:``, ``srun -l``'s ``6: ``, Open MPI's ``[1,6]<stdout>:``, a pdsh host, a Ray
actor's ``(Worker pid=…, ip=…)``, a pod); programs put it inside the message (``[rank 6]``, ``rank=6``,
``local_rank: 6``, ``[RANK:6]``) or name their workers by role (``worker 6:``, ``[drafter 6]``). This
module finds them in one bytes pass per form over a whole (small) file:

* fixed forms (:data:`_PREFIX`, :data:`_KEYED`) at the start of the line's message;
* learned forms: a word followed by a number (``drafter 6:``, ``[worker 2]``) is a role when, in this
  file, the word comes with several numbers that *alternate* from line to line (writers interleave)
  rather than climb (``epoch 3:``, ``step 40:`` are counters), and no two role words share a number;
* labels the presentation learner kept as the stream's writer tag (``\\x1fnode07:\\x1f``, see
  parsers/common/presentation.py), read with its ``label_fields``.

:func:`identify` gives the rank (or label) of every labelled line start; the stream parser gives it to
events that carry none (parsers/process_output.py) and ``rank_activity`` counts each worker's lines.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

from forensics.parsers.common.presentation import label_fields
from forensics.parsers.common.stream_text import WRITER_TAG

from forensics.ingest.textdoc import Data
from forensics.lazy_re import lazy_compile

__all__ = ["MAX_RANK", "Identities", "Worker", "identify", "message_rank"]

#: No job has this many ranks: a larger number is not a rank.
MAX_RANK = 1 << 16
#: How far into a line (bytes) an in-message form may start: past this it names someone else.
HEAD = 160
#: Words that count things rather than name writers (``step 40:``, ``epoch 3:``), never learned as roles.
_COUNTERS = frozenset(b"""step steps epoch epochs iter iteration iterations batch batches sample samples layer layers
line lines round rounds try attempt attempts retry seq chunk chunks shard shards file files version part phase
cuda gpu gpus device devices port thread threads frame block blocks stage item items page pages loss test tests
row rows col column task tasks job jobs pid tid run runs trial case node nodes slot slots level warning
error""".split())
#: Words that name a writer outright, learned from a single occurrence.
_WORKER_WORDS = frozenset({b"rank", b"default", b"worker", b"process", b"proc"})

_PREFIX = lazy_compile(rb"^\[(?:rank|default) ?(\d{1,5})\](?::\s?| )", re.M)
#: Ray's actor prefix, read by the stream reader itself: ``(RayTrainWorker pid=4106, ip=10.0.0.7)``.
_RAY = lazy_compile(rb"^\((?:[A-Za-z_][\w.-]*)(?: rank=(\d+))? pid=(\d+)(?:, ip=([\d.:a-f]+))?\)", re.M)
_SRUN = lazy_compile(rb"^\s{0,4}(\d{1,5}): ", re.M)
_OMPI = lazy_compile(rb"^\[\d+,(\d{1,5})\]<std(?:out|err|diag)>:", re.M)
#: ``[rank 6]``, ``[Rank 6]``, ``[RANK:6]``, ``(rank 6)``, ``rank=6``, ``local_rank: 6``, ``global_rank=6``;
#: not ``nranks``, ``src_rank``, ``world_rank_count`` (a word character before or after).
_KEYED = lazy_compile(rb"(?<![\w.])(?:\[(?:global_|local_)?(?:rank|Rank|RANK)[ :=]?(\d{1,5})\]"
                      rb"|\((?:rank|Rank) (\d{1,5})\)"
                      rb"|(?:global_|local_)?(?:rank|Rank|RANK) ?[=:] ?(\d{1,5})(?![\w.]))")
#: A word and a number that may name a writer: ``[worker 2]``, ``drafter 6:``, ``trainer-3:``.
_ROLE = lazy_compile(rb"(?<![\w./-])(?:\[([A-Za-z][a-z]{2,15})[ _#-]?(\d{1,4})\]|([A-Za-z][a-z]{2,15})[ _#-]?(\d{1,4}):"
                     rb"(?=[ \t]))")
#: A process id a worker's line names (``[worker 2] pid 3102 on cuda:0``, ``(pid: 3102)``, ``PID=3102``).
_PID = lazy_compile(rb"(?<![\w.])(?:pid|PID)\s?[=:]?\s?(\d{2,8})\b")
_TAG = lazy_compile(re.escape(WRITER_TAG.encode()) + rb"([^\x1f\n]{1,200})" + re.escape(WRITER_TAG.encode()))


@dataclass(frozen=True, slots=True)
class Worker:
    """A writer: a rank when one is known, else the launcher's label (a host, a pod, a pid)."""

    rank: int | None = None
    label: str = ""
    host: str | None = None
    pid: int | None = None

    @property
    def key(self) -> str:
        return f"rank {self.rank}" if self.rank is not None else self.label


@dataclass
class Identities:
    """Line start offset → worker, for the lines that name one; the learned role words and forms."""

    at: dict[int, Worker] = field(default_factory=dict)
    roles: dict[int, str] = field(default_factory=dict)  # rank -> the role word that named it
    pids: dict[str, int] = field(default_factory=dict)  # worker key -> the pid its own lines name
    forms: list[str] = field(default_factory=list)  # which forms named the lines ("[rankN]:", "role 'drafter'" …)

    def rank_at(self, offset: int) -> int | None:
        w = self.at.get(offset)
        return w.rank if w is not None else None


def message_rank(text: str) -> int | None:
    """The rank a message names at its start (``[rank 6] …``, ``rank=6 …``, ``local_rank: 6``), or None."""
    m = _KEYED.search(text.encode("utf-8", "replace")[:HEAD])
    if m is None:
        return None
    rank = int(m.group(1) or m.group(2) or m.group(3))
    return rank if rank < MAX_RANK else None


def _line_start(data: Data, pos: int) -> int:
    return data.rfind(b"\n", 0, pos) + 1


def _numbered(data: Data, pattern: re.Pattern[bytes]) -> Iterator[tuple[int, int]]:
    """(line start, number) for each line the pattern names within its head."""
    last = -1
    for m in pattern.finditer(data):
        start = _line_start(data, m.start())
        if start == last or m.start() - start > HEAD:
            continue
        value = next(int(g) for g in m.groups() if g is not None)
        if value < MAX_RANK:
            last = start
            yield start, value


def _roles(data: Data) -> dict[bytes, dict[int, int]]:
    """Learned role words: word → {line start: number} (see the module docstring)."""
    seen: dict[bytes, dict[int, int]] = defaultdict(dict)
    for m in _ROLE.finditer(data):
        word = (m.group(1) or m.group(3)).lower()
        if word in _COUNTERS:
            continue
        start = _line_start(data, m.start())
        if m.start() - start > HEAD or start in seen[word]:
            continue
        seen[word][start] = int(m.group(2) or m.group(4))
    roles: dict[bytes, dict[int, int]] = {}
    for word, lines in seen.items():
        values = list(lines.values())
        distinct = set(values)
        changes = sum(a != b for a, b in zip(values, values[1:], strict=False))
        alternating = len(distinct) >= 2 and len(values) >= 4 and changes >= max(3, len(distinct)) \
            and changes >= len(values) // 3
        if (word in _WORKER_WORDS and values) or alternating:
            roles[word] = lines
    named = {w: lines for w, lines in roles.items() if w not in _WORKER_WORDS}
    owners: Counter[int] = Counter(v for lines in named.values() for v in set(lines.values()))
    if any(n > 1 for n in owners.values()):  # two numberings (target 0-4, drafter 0-2): not ranks
        shared = {w for w, lines in named.items() if any(owners[v] > 1 for v in lines.values())}
        roles = {w: lines for w, lines in roles.items() if w not in shared}
    return roles


def _unify(ids: Identities) -> None:
    """A launcher label whose lines name one rank (``node06:`` on ``drafter 6: …`` lines) is that rank's
    worker on its other lines too: one worker, not two."""
    ranks: dict[str, set[int]] = defaultdict(set)
    for w in ids.at.values():
        if w.label and w.rank is not None:
            ranks[w.label].add(w.rank)
    for start, w in list(ids.at.items()):
        if w.label and w.rank is None and len(ranks.get(w.label, ())) == 1:
            ids.at[start] = Worker(rank=next(iter(ranks[w.label])), label=w.label, host=w.host, pid=w.pid)


def identify(data: Data, srun: bool = False) -> Identities:
    """The worker of every line of ``data`` that names one (the first form that names a line wins:
    launcher prefixes, then in-message keys, then learned roles, then writer tags). ``srun``: the file is
    ``srun --label`` output (``6: `` is the rank)."""
    ids = Identities()

    def put(pairs: Iterator[tuple[int, int]], form: str, role: str = "") -> None:
        n = 0
        for start, rank in pairs:
            if start not in ids.at:
                ids.at[start] = Worker(rank=rank)
                n += 1
            if role and ids.at[start].rank == rank:  # the role agrees with the rank the line has
                ids.roles.setdefault(rank, role)
        if n:
            ids.forms.append(form)

    if srun:
        put(((m.start(), int(m.group(1))) for m in _SRUN.finditer(data)), "srun -l 'N: '")
    if b"[rank" in data or b"[default" in data:
        put(((m.start(), int(m.group(1))) for m in _PREFIX.finditer(data)), "[rankN]:")
    if b"]<std" in data:
        put(((m.start(), int(m.group(1))) for m in _OMPI.finditer(data)), "[job,N]<stdout>:")
    if b"ank" in data or b"ANK" in data:
        put(_numbered(data, _KEYED), "rank in the message")
    for word, lines in _roles(data).items():
        put(iter(lines.items()), f"role '{word.decode()}'", role="" if word in (b"rank", b"default") else word.decode())
    if b" pid=" in data:  # Ray actors: the process (and its node) names the worker, a rank when printed
        n = 0
        for m in _RAY.finditer(data):
            known = ids.at.get(m.start())
            rank = int(m.group(1)) if m.group(1) else known.rank if known is not None else None
            host = m.group(3).decode() if m.group(3) else None
            ids.at[m.start()] = Worker(rank=rank, label=f"pid {int(m.group(2))}", host=host, pid=int(m.group(2)))
            n += 1
        if n:
            ids.forms.append("Ray actor")
    if WRITER_TAG.encode() in data:
        for m in _TAG.finditer(data):
            start = _line_start(data, m.start())
            if m.start() != start:
                continue
            label = m.group(1).decode("utf-8", "replace").strip().rstrip(":|").strip()
            rank, host = label_fields(m.group(1).decode("utf-8", "replace"))
            pid_m = re.search(r"pid=(\d+)", label)
            pid = int(pid_m.group(1)) if pid_m else None
            known = ids.at.get(start)
            if known is not None:  # a rank the message names, on a line the launcher labelled: both
                ids.at[start] = Worker(rank=known.rank, label=label, host=host, pid=pid)
                continue
            ids.at[start] = Worker(rank=rank, label=label, host=host, pid=pid)
        if any(w.label for w in ids.at.values()):
            ids.forms.append("launcher label")
    _unify(ids)
    if ids.at and (b"pid" in data or b"PID" in data):
        for m in _PID.finditer(data):
            w = ids.at.get(_line_start(data, m.start()))
            if w is not None and w.key not in ids.pids and w.pid is None:
                ids.pids[w.key] = int(m.group(1))
    return ids
