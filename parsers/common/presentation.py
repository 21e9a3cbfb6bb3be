"""Presentation normalisation: peel what a launcher, a viewer or a paste put around a log's lines.

A prefix that repeats at the start of most of a file's lines is presentation, not content:
``trainer/0 [1]:`` (torchx), ``3: `` (srun -l), ``node07: `` (pdsh, clush, DeepSpeed's launcher),
``(RayTrainWorker pid=1, ip=10.0.0.1) `` (Ray), ``[pod/w-0/c] 2024-…Z `` (kubectl), ``svc-1  | ``
(docker compose), ``[1825] `` / ``1825:`` / ``  1825  `` (a viewer's line numbers), ``> `` (quoting).
Nothing here lists those tools. :func:`learn` reads the file's first lines, finds the cut points
where such a prefix can end (after ``:``/``|`` and a blank, after a closing bracket, after a
leading number), groups the prefixes by their token shape (letters, digits, punctuation) and keeps
the shortest shape that most lines share. It is peeled when the file then reads as well or better:

* a *label* (few distinct values: a host, a rank, a service, a quote mark) or *line numbers*
  (consecutive) is peeled unless the format detected on the lines gets weaker without it (an
  NCCL_DEBUG ``host:pid:tid [dev]`` header is the format, not presentation);
* anything else that repeats (a time stamp per line) only when the peeled lines are detected as a
  more confident format (a kubectl stamp in front of dmesg), never when a parser already reads it;
* a prefix the process-output reader already peels itself (``[rank3]:``, Open MPI tags, logging
  headers) is left to it.

Learning repeats on the peeled lines (a quoted, line-numbered paste), then lines hard-wrapped at a
fixed width are joined again. A file with nothing learned costs one look at its head.

The parsers read the peeled document; :class:`Presentation` maps what they return back: each
event's ``origin`` to the raw file's line and byte offset (the evidence shows the raw line), and the
rank or host a label names becomes the event's when it has none.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from forensics.events import Event, MetricSample, Origin
from forensics.ingest.textdoc import TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["Presentation", "Rule", "learn"]

#: Lines of the head the rules are learned from.
SAMPLE_LINES = 200
#: Share of the sampled non-empty lines a prefix must start (and at least MIN_LINES of them).
COVERAGE = 0.6
MIN_LINES = 3
#: Files above this size are read as they are (peeling rebuilds the text).
MAX_BYTES = 256 << 20
_ROUNDS = 3
_CANDIDATES = 6
_MAX_PREFIX = 100
_MAX_LABEL = 64
_STREAM_KINDS = ("process-output", "nccl-debug", "slurm", "plaintext")
#: Formats read by column (the ``lspci -t`` drawing): a prefix peeled with the blanks after it would
#: shift each line's columns by a different amount, so these read their own margin (``> `` quoting).
_COLUMN_KINDS = ("lspci-tree",)

_TOKEN = lazy_compile(r"[A-Za-z]+|\d+|[ \t]+|.", re.S)
_KV = lazy_compile(r"\b(rank|pid|ip|host|node|pod)=([\w.:-]+)")
_HOSTLIKE = lazy_compile(r"(?:^|[\s\[(/])([A-Za-z][\w.-]*[A-Za-z0-9])\s*[:|]\s*$")
#: pdsh and DeepSpeed's launcher name a host as the hostfile does, often by its IPv4 address
_OCTET = r"(?:25[0-5]|2[0-4]\d|1?\d?\d)"
_IPV4_LABEL = lazy_compile(rf"(?:^|[\s\[(/])({_OCTET}(?:\.{_OCTET}){{3}})\s*[:|]\s*$")
_POD = lazy_compile(r"\bpod/([\w.-]+)")
_ONLY_NUMBER = lazy_compile(r"^\s*\[?(\d{1,6})\]?\s*(?:[:|]\s*)?$")
_NUMBER = lazy_compile(r"\d+")
#: A collector's stamp: a whole date first (kubectl, docker --timestamps), not a logger's clock time.
_DATED = lazy_compile(r"^[ \t]*\[?\d{4}[-/]\d\d[-/]\d\d[T ]\d\d:\d\d:\d\d")
_SGR = lazy_compile(r"\x1b\[[0-9;]*m")
_SGR_BYTES = lazy_compile(rb"\x1b\[[0-9;]*m")
_BARE_NUMBER = lazy_compile(r"^[ \t]*\d+[ \t]*$")
#: A program's own logging header naming its source file (glog ``W0514 12:00:01.5 123 file.cc:42]``,
#: c10d's ``[W socket.cpp:697]``, ``[E ProcessGroupNCCL.cpp:737]``): part of the record, never presentation.
_SOURCE_HEADER = lazy_compile(r"^[ \t]*\[?[DIWEFC](?:\d{4})?[ \d:.]*[\w./-]*\.\w+:\d+\]"
                              # a compiler's or CUDA assert's own ``../aten/…/Indexing.cu:1308:`` (source files only:
                              # ``grep -n``'s ``/var/log/kern.log:1234:`` is presentation)
                              r"|^[ \t]*[\w.-]*/[\w./-]*\.(?:cu|cuh|cpp|cc|cxx|c|h|hpp|py|rs|go):\d+:")
#: A date or a clock time in a prefix makes it a stamp, however constant (one day's log).
#: A field name of the record itself (``saved metadata:``, ``recomputed metadata:``): words of plain
#: letters with a blank between them, then a colon. A writer's label is one token (a host, a rank).
_FIELD_NAME = lazy_compile(r"^[ \t]*[A-Za-z]+(?: [A-Za-z]+)+:[ \t]*$")
_DATE_TIME = lazy_compile(r"(?<![=.\d])\d{1,4}[-/:]\d\d[-/:]\d\d")


@dataclass(frozen=True)
class Rule:
    """One learned prefix: ``pattern`` matches it at a line start; ``kind`` label / lineno / stamp."""

    pattern: re.Pattern[str]
    kind: str
    example: str
    #: Several writers (hosts, ranks) under this label: the peeled line keeps it as a writer tag.
    writers: bool = False

    def describe(self) -> str:
        return f"{self.kind} prefix {self.example.rstrip()!r}"


@dataclass
class Presentation:
    """A file's peeled text and how to map its lines back to the raw file.

    Without wrapping, peeled line *i* is raw line *i* and everything else (where its content starts,
    its label, its stamp) is worked out on demand from the raw line, so peeling a big file costs one
    regex pass. Joined wrapped lines keep per-line tables instead.
    """

    raw: TextDocument
    doc: TextDocument
    steps: list[str]
    rules: list[Rule] = field(default_factory=list)
    colour: bool = False
    #: Only when wrapped lines were joined, per peeled line (0-based): raw line number, raw byte
    #: offset of its content, raw lines spanned, label, stamp.
    raw_line: list[int] | None = None
    raw_offset: list[int] = field(default_factory=list)
    span: list[int] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    stamps: list[int | None] = field(default_factory=list)
    _parts_cache: tuple[int, tuple[str, int | None]] | None = field(default=None, repr=False, compare=False)

    def _count(self) -> int:
        return len(self.raw_line) if self.raw_line is not None else len(self.doc.line_starts())

    def _index(self, line: int) -> int:
        return min(max(line, 1), self._count()) - 1

    def _first_raw(self, i: int) -> int:
        return self.raw_line[i] if self.raw_line is not None else i + 1

    def _span(self, i: int) -> int:
        return self.span[i] if self.raw_line is not None else 1

    def _content_offset(self, i: int) -> int:
        """Raw byte offset where peeled line ``i``'s text begins (after its prefixes)."""
        if self.raw_line is not None:
            return self.raw_offset[i]
        raw, peeled = self.raw.line_starts(), self.doc.line_starts()
        if i >= len(raw) or i >= len(peeled):
            return raw[-1] if raw else 0
        raw_len = (raw[i + 1] if i + 1 < len(raw) else len(self.raw.data)) - raw[i]
        peeled_len = (peeled[i + 1] if i + 1 < len(peeled) else len(self.doc.data)) - peeled[i]
        return raw[i] + max(0, raw_len - peeled_len)

    def _peeled_parts(self, i: int) -> tuple[str, int | None]:
        """(label, stamp ns) of peeled line ``i`` (the last one asked for is kept: the records of one
        line ask for it in a row)."""
        if self.raw_line is not None:
            return (self.labels[i] if self.labels else ""), (self.stamps[i] if self.stamps else None)
        if self._parts_cache is not None and self._parts_cache[0] == i:
            return self._parts_cache[1]
        parts = self._raw_parts(i)
        self._parts_cache = (i, parts)
        return parts

    def _raw_parts(self, i: int) -> tuple[str, int | None]:
        starts = self.raw.line_starts()
        if i >= len(starts):
            return "", None
        # Prefixes are at the line's start: its first PREFIX_BYTES are decoded, never a whole long line
        # (a 900 kB line holding a thousand records was decoded once per record).
        start = starts[i]
        nl = self.raw.data.find(b"\n", start, start + PREFIX_BYTES)
        end = nl if nl >= 0 else min(len(self.raw.data), start + PREFIX_BYTES)
        text = bytes(self.raw.data[start:end]).decode("utf-8", "replace").rstrip("\r")  # (normalised UTF-8)
        if self.colour:
            text = _SGR.sub("", text)
        label, stamp = "", None
        for rule in self.rules:
            prefix, text = _peel_one(rule.pattern, text)
            if rule.kind == "label":
                label += prefix
            elif rule.kind == "stamp" and prefix:
                stamp = _zoned_ns(prefix)
        return label, stamp

    def origin(self, o: Origin) -> Origin:
        """``o`` (in the peeled text) as the raw file's lines."""
        if o.line <= 0 or not self._count():
            return o
        i = self._index(o.line)
        j = self._index(o.line + max(o.nlines, 1) - 1)
        first = self._first_raw(i)
        last = self._first_raw(j) + self._span(j) - 1
        raw_starts = self.raw.line_starts()
        start = raw_starts[first - 1] if first - 1 < len(raw_starts) else o.offset
        return Origin(o.path, first, start, last - first + 1)

    def _line_of(self, peeled: int) -> int:
        from bisect import bisect_right

        return max(0, bisect_right(self.doc.line_starts(), peeled) - 1)

    def offset(self, peeled: int) -> int:
        """A byte offset of the peeled text in the raw file (receipt times are indexed by it)."""
        i = self._line_of(peeled)
        if i >= self._count():
            return peeled
        return self._content_offset(i) + peeled - self.doc.line_starts()[i]

    def receipts(self, lookup: Callable[[int], int | None] | None) -> Callable[[int], int | None] | None:
        """Receipt times for the peeled text: ``lookup`` (a bundle's index of the raw file), else a
        peeled collector stamp of the line (it is when the line was received)."""
        if not any(r.kind == "stamp" for r in self.rules):
            return None if lookup is None else (lambda off: lookup(self.offset(off)))

        def at(off: int) -> int | None:  # a recorder's own receipt index wins over a collector's stamp
            ns = lookup(self.offset(off)) if lookup is not None else None
            return ns if ns is not None else self._peeled_parts(self._line_of(off))[1]

        return at

    def restore(self, records: Iterable[R]) -> list[R]:
        """Records parsed from the peeled text, pointing at the raw file, with a label's rank/host."""
        out: list[R] = []
        labelled = any(r.kind == "label" for r in self.rules)
        for rec in records:
            origin = self.origin(rec.origin)
            if isinstance(rec, Event) and labelled and rec.origin.line > 0:
                rank, host = label_fields(self._peeled_parts(self._index(rec.origin.line))[0])
                changes: dict[str, object] = {"origin": origin}
                if rank is not None and rec.rank is None:
                    changes["rank"] = rank
                if host is not None and rec.host is None:
                    changes["host"] = host
                out.append(replace(rec, **changes))  # type: ignore[arg-type]
            else:
                out.append(replace(rec, origin=origin))
        return out

    def writer(self, line: int) -> tuple[int | None, str | None]:
        """The rank and host that the peeled label of peeled line ``line`` names, if any."""
        if line <= 0:
            return None, None
        return label_fields(self._peeled_parts(self._index(line))[0])


R = TypeVar("R", Event, MetricSample)

#: Bytes of a raw line's start in which its prefixes (label, stamp, line number) are looked for.
PREFIX_BYTES = 4096


_RANK_WORD = re.compile(r"(?<![\w.])(?:rank|Rank|RANK) ?(\d{1,6})\b")


def label_fields(label: str) -> tuple[int | None, str | None]:
    """(rank, host) named by a launcher label: ``rank=``/``pid=``/``ip=`` pairs, a bare number
    (``3: ``, ``[3]``) as the rank, a pod, a host-like word or an IPv4 address before the final
    ``:``/``|``."""
    if not label:
        return None, None
    kv = dict(_KV.findall(label))
    rank = int(kv["rank"]) if "rank" in kv and kv["rank"].isdigit() else None
    host = kv.get("host") or kv.get("node") or kv.get("ip")
    if rank is None and (named := _RANK_WORD.search(label)):  # "[rank 1]", "Rank 3:"
        rank = int(named.group(1))
    if rank is None:
        m = _ONLY_NUMBER.match(label)
        if m:
            rank = int(m.group(1))
        elif not kv:
            bracket = re.search(r"\[(\d{1,6})\]", label)
            if bracket:
                rank = int(bracket.group(1))
    if host is None:
        pod = _POD.search(label)
        if pod:
            host = pod.group(1)
        else:
            m = _HOSTLIKE.search(label) or _IPV4_LABEL.search(label)
            if m and not m.group(1).isdigit():
                host = m.group(1)
    return rank, host


# -- learning ---------------------------------------------------------------------------------


def _cuts(line: str) -> list[int]:
    """Where a prefix of ``line`` may end: after ``:``/``|`` and a blank (or the line's end), after a
    closing bracket (and a ``:``), after a leading number; blanks that follow are part of it."""
    out: list[int] = []
    n = min(len(line), _MAX_PREFIX)
    head = line[: n + 1]  # a prefix is short: never let a pattern see a huge line whole (backtracking)
    m = re.match(r"[ \t]*\d{1,7}(?::|[ \t]+|(?=\|))", head) or re.match(r"\d\S*\d\S*[ \t]+", head)
    if m:
        end = m.end()
        while end < len(line) and line[end] in " \t":
            end += 1
        out.append(end)
    for i in range(n):
        c = line[i]
        if c in ":|" and (i + 1 >= len(line) or line[i + 1] in " \t"):
            end = i + 1
        elif c in "])>":
            end = i + 1
            if end < len(line) and line[end] == ":":
                end += 1
        else:
            continue
        while end < len(line) and line[end] in " \t":
            end += 1
        if not out or end > out[-1]:
            out.append(end)
        if len(out) >= 5:
            break
    return out


def _shape(prefix: str) -> tuple[str, ...]:
    out = []
    for tok in _TOKEN.findall(prefix):
        c = tok[0]
        out.append("a" if c.isalpha() else "9" if c.isdigit() else " " if c in " \t" else tok)
    return tuple(out)


def _pattern(prefixes: Sequence[str]) -> re.Pattern[str]:
    """A regex for prefixes of one shape: constant tokens literal, varying ones by class."""
    columns = list(zip(*(_TOKEN.findall(p) for p in prefixes), strict=True))
    parts: list[str] = []
    for k, col in enumerate(columns):
        c = col[0][0]
        if len(set(col)) == 1:
            parts.append(re.escape(col[0]))
        elif c in " \t":
            parts.append("[ \\t]*" if k == 0 else "[ \\t]+")
        elif c.isdigit():
            parts.append("\\d+")
        elif c.isalpha():
            parts.append("[A-Za-z]+")
        else:
            parts.append(re.escape(c))
    return re.compile("".join(parts))


def _consecutive(values: Sequence[str]) -> bool:
    """Line numbers: each one more than the last, never the same twice (``node00:`` … ``node07:`` in turn
    count up too, but come round again: writers' labels)."""
    nums = [int(m.group()) for v in values if (m := _NUMBER.search(v))]
    if len(nums) < MIN_LINES or len(set(nums)) < 0.9 * len(nums):
        return False
    steps = sum(1 for a, b in zip(nums, nums[1:], strict=False) if b == a + 1)
    return steps >= 0.8 * (len(nums) - 1)


def _native(lines: Sequence[str], ends: Sequence[int]) -> bool:
    """Whether the process-output reader peels these prefixes itself."""
    from forensics.parsers.common.stream_text import clean, split_body

    hits = 0
    for line, end in zip(lines, ends, strict=True):
        text = clean(line).lstrip()
        body = split_body(text).text
        if len(body) < len(text) and len(body) <= len(line) - end + 1:
            hits += 1
    return hits >= 0.8 * len(lines)


def _framed(lines: Sequence[str], prefixes: Sequence[str]) -> bool:
    """A table's or box's left border (``| … |``, ``│ … │``): the lines end in the prefix's mark."""
    mark = prefixes[0].strip()[-1:]
    if not mark or mark.isalnum() or prefixes[0].strip().strip(mark):
        return False
    return sum(1 for ln in lines if ln.rstrip().endswith(mark)) >= 0.5 * len(lines)


def _counter(prefixes: Sequence[str]) -> bool:
    """Prefixes whose numbers only ever grow, taking several values: a step or epoch counter (two values
    apart, ``node01:`` then ``node07:``, are two writers one after the other)."""
    nums = [tuple(int(n) for n in _NUMBER.findall(p)) for p in prefixes]
    values = sorted(set(nums))
    if len(values) < 2 or not all(nums):
        return False
    if len(values) == 2 and values[1][-1] - values[0][-1] > 1:
        return False
    return all(a <= b for a, b in zip(nums, nums[1:], strict=False))


def _few_writers(prefixes: Sequence[str]) -> bool:
    """Few values (a quarter of the lines at most), or each seen again (one label per rank of a job that
    printed a couple of lines per rank: ``node03:`` on its init line and on its timeout)."""
    counts = Counter(p.strip() for p in prefixes)
    if len(counts) <= max(4, len(prefixes) // 4):
        return True
    return sum(1 for n in counts.values() if n >= 2) >= 0.8 * len(counts)


def _structure(prefix: str) -> bool:
    """A quoted key or a bracket left open (``{"record_id":``): data structure, not a label."""
    return '"' in prefix or any(prefix.count(a) != prefix.count(b) for a, b in ("[]", "()", "{}"))


def _flood(found: Sequence[tuple[str, int]]) -> bool:
    """The same record over and over (an assert per CUDA thread): what follows the "prefix" hardly
    varies either, so the prefix is content — unless the prefixes are a few writers taking turns
    (``node03:`` … ``node07:`` again and again, each printing the same few records: ranks of one job)."""
    rests = [_NUMBER.sub("", ln[end:]) for ln, end in found]
    if len(set(rests)) > max(1.0, 0.03 * len(rests)):
        return False
    prefixes = [ln[:end].strip() for ln, end in found]
    writers = set(prefixes)
    turns = sum(a != b for a, b in zip(prefixes, prefixes[1:], strict=False))
    return not (2 <= len(writers) <= max(4, len(prefixes) // 4) and turns >= len(prefixes) // 2)


def _detect(lines: list[str]) -> tuple[str, float]:
    from forensics.parsers.registry import detect

    head = [ln for ln in lines if ln.strip()][:40]
    parser, score = detect(head)
    return parser.name, score


def _learn_rule(lines: list[str], after_label: bool = False) -> Rule | None:
    """The shortest repeating prefix of ``lines`` that passes the checks of the module docstring."""
    nonempty = [ln for ln in lines if ln.strip()]
    if len(nonempty) < MIN_LINES:
        return None
    shapes: Counter[tuple[str, ...]] = Counter()
    examples: dict[tuple[str, ...], list[tuple[str, int]]] = {}
    for line in nonempty:
        seen = set()
        for end in _cuts(line):
            shape = _shape(line[:end])
            if shape in seen:
                continue
            seen.add(shape)
            shapes[shape] += 1
            examples.setdefault(shape, []).append((line, end))
    need = max(MIN_LINES, COVERAGE * len(nonempty))
    candidates = sorted((s for s, n in shapes.items() if n >= need), key=lambda s: (len("".join(s)), -shapes[s]))
    raw_kind: tuple[str, float] | None = None
    for shape in candidates[:_CANDIDATES]:
        found = examples[shape]
        prefixes = [ln[:end] for ln, end in found]
        if _flood(found):
            return None  # one record over and over: longer "prefixes" are more of the same record
        if _framed([ln for ln, _ in found], prefixes) or max(len(p) for p in prefixes) > _MAX_LABEL \
                or _structure(prefixes[0]) or _SOURCE_HEADER.match(prefixes[0]):
            continue
        pattern = _pattern(prefixes)
        peeled = [_peel_one(pattern, ln)[1] for ln in lines]
        if raw_kind is None:
            raw_kind = _detect(lines)
        new_kind = _detect(peeled)
        if raw_kind[0] in _COLUMN_KINDS and new_kind[0] == raw_kind[0]:
            return None
        stamp_after_label = after_label and _DATED.match(prefixes[0]) is not None
        if stamp_after_label:  # a log collector's receipt stamp after its label (kubectl --prefix --timestamps)
            if raw_kind is None:
                raw_kind = _detect(lines)
            # ... unless it is the format's own stamp (journalctl -o short-iso, dmesg --time-format iso
            # through pdsh): then the lines read worse without it, and not as a program's own records.
            if new_kind[1] + 1e-9 >= raw_kind[1] or (new_kind[0] in _STREAM_KINDS and new_kind[1] >= 0.5):
                return Rule(pattern, "stamp", prefixes[0])
            return None
        if new_kind[0] in _STREAM_KINDS and _native([ln for ln, _ in found], [end for _, end in found]):
            return None  # the stream reader peels it itself (and keys records by it); what follows is content
        if _consecutive(prefixes):
            kind = "lineno"
        elif _BARE_NUMBER.match(prefixes[0]):
            continue  # a column of numbers (a table), not a label: a label ends in ':', '|' or a bracket
        elif _counter(prefixes):
            continue  # Epoch[60], Epoch[61] …: a counter the records carry, not the writer's label
        elif not _DATE_TIME.search(prefixes[0]) and _few_writers(prefixes):
            if all(_FIELD_NAME.match(p) for p in prefixes):
                continue  # the record's own field names, not a writer's label
            kind = "label"
        else:
            kind = "stamp"
        better = new_kind[1] > raw_kind[1] + 1e-9
        if kind == "stamp" and not (better and new_kind[0] not in _STREAM_KINDS):
            continue
        if new_kind[1] + 1e-9 < raw_kind[1]:
            continue
        return Rule(pattern, kind, prefixes[0])
    return None


def _peel_one(pattern: re.Pattern[str], line: str) -> tuple[str, str]:
    m = pattern.match(line)
    if m is None:
        return "", line
    return line[: m.end()], line[m.end():]


def _wrap_width(lines: Sequence[str]) -> int | None:
    """The width lines were hard-wrapped at: the longest length, shared by many lines that do not
    end alike (a table's rows end in the same border)."""
    lengths = Counter(len(ln) for ln in lines if len(ln) >= 60)
    if not lengths:
        return None
    width = max(lengths)
    at = [ln for ln in lines if len(ln) == width]
    if len(at) < 2 or len(at) < 0.05 * len(lines):
        return None
    # A hard wrap breaks anywhere: most breaks are not between two blanks of a padded table.
    ends = [i for i, ln in enumerate(lines[:-1]) if len(ln) == width]
    # (and what follows does not begin the way the line itself began: that is a next record of one length).
    inside = sum(1 for i in ends if (not lines[i][-1].isspace() or lines[i + 1][:1].strip())
                 and _NUMBER.sub("0", lines[i + 1][:5]) != _NUMBER.sub("0", lines[i][:5]))
    if inside < max(1.0, len(ends) / 2):
        return None
    # A wrapped line ends in a shorter remainder; lines that all have one width are a table.
    if not any(0 < len(lines[i + 1]) < width for i in ends):
        return None
    mark, n = Counter(ln[-1] for ln in at).most_common(1)[0]
    if n >= 0.5 * len(at) and not mark.isalnum() and not mark.isspace():
        return None
    return width


def learn(doc: TextDocument) -> Presentation | None:
    """What presentation ``doc``'s lines carry, peeled; None when there is none (the usual case)."""
    if not doc.data or len(doc.data) > MAX_BYTES or doc.mapped:  # peeling copies the text: never a mapped file's
        return None
    head: list[str] = []
    for line in doc.lines():
        head.append(line.text)
        if len(head) >= SAMPLE_LINES:
            break
    rules: list[Rule] = []
    sample = head
    colour = any("\x1b[" in ln for ln in head)
    if colour:  # terminal colours (dmesg --color=always, a coloured logger) kept only where a reader copes
        plain = [_SGR.sub("", ln) for ln in head]
        kind, score = _detect(plain)
        colour = kind not in _STREAM_KINDS and score + 1e-9 >= _detect(head)[1]  # the stream reader strips its own
        if colour:
            sample = plain
    for _ in range(_ROUNDS):
        rule = _learn_rule(sample, any(r.kind == "label" for r in rules))
        if rule is None:
            break
        parts = [_peel_one(rule.pattern, ln) for ln in sample]
        peeled = [rest for _, rest in parts]
        if peeled == sample:
            break
        if rule.kind == "label" and len({p.strip() for p, _ in parts} - {""}) > 1:
            rule = replace(rule, writers=True)
        rules.append(rule)
        sample = peeled
    width = _wrap_width(sample)
    if width is not None:
        (before, b_score), (after, a_score) = _detect(sample), _detect(_unwrap(sample, width)[0])
        if after != before and a_score + 1e-9 < b_score:  # fewer lines may count less: same format is fine
            width = None
    if not rules and width is None and not colour:
        return None
    if any(r.writers for r in rules) and _detect(sample)[0] not in _STREAM_KINDS:
        rules = [replace(r, writers=False) for r in rules]  # only the stream reader keys records by writer
    return _build(doc, rules, width, colour)


def _unwrap(lines: Sequence[str], width: int) -> tuple[list[str], list[int]]:
    """Lines of exactly ``width`` joined with the next one; the index of the first raw line of each."""
    out: list[str] = []
    first: list[int] = []
    i = 0
    while i < len(lines):
        start = i
        text = lines[i]
        while len(lines[i]) == width and i + 1 < len(lines):
            i += 1
            text += lines[i]
        out.append(text)
        first.append(start)
        i += 1
    return out, first


def _build(doc: TextDocument, rules: Sequence[Rule], width: int | None, colour: bool = False) -> Presentation:
    steps = (["terminal colour codes removed"] if colour else []) + [r.describe() for r in rules]
    whole = doc.data if isinstance(doc.data, bytes) else doc.data[:]  # (learn never peels a mapped file)
    if width is None:  # line for line: one regex pass per rule over the bytes, the rest on demand
        data = _SGR_BYTES.sub(b"", whole) if colour else whole
        for rule in rules:
            literal = _literal(rule.pattern.pattern)
            if rule.writers:  # the label becomes the stream reader's writer tag
                data = re.compile(b"^" + rule.pattern.pattern.encode("utf-8"), re.M).sub(_tag, data)
            elif literal is not None:  # a constant label: a plain replace is ~10x faster than a regex pass
                lit = literal.encode("utf-8")
                data = (data[len(lit):] if data.startswith(lit) else data).replace(b"\n" + lit, b"\n")
            else:
                data = re.compile(b"^" + rule.pattern.pattern.encode("utf-8"), re.M).sub(b"", data)
        return Presentation(doc, TextDocument(data, doc.path, doc.encoding), steps, list(rules), colour=colour)
    texts: list[str] = []
    offsets: list[int] = []
    labels: list[str] = []
    stamps: list[int | None] = []
    for line in doc.lines():
        text = _SGR.sub("", line.text) if colour else line.text
        cut = 0
        label = ""
        stamp: int | None = None
        for rule in rules:
            prefix, text = _peel_one(rule.pattern, text)
            cut += len(prefix.encode("utf-8")) if not prefix.isascii() else len(prefix)
            if rule.kind == "label":
                label += prefix
                if rule.writers and prefix:
                    tag = _tag_text(prefix)
                    text = tag + text
                    cut -= len(tag.encode("utf-8"))
            elif rule.kind == "stamp" and prefix:
                stamp = _zoned_ns(prefix)
        texts.append(text)
        offsets.append(line.offset + cut)
        labels.append(label)
        stamps.append(stamp)
    joined, first = _unwrap(texts, width)
    nxt = first[1:] + [len(texts)]
    steps.append(f"lines hard-wrapped at {width} columns joined")
    data = "\n".join(joined).encode("utf-8") + (b"\n" if whole.endswith(b"\n") else b"")
    return Presentation(doc, TextDocument(data, doc.path, doc.encoding), steps, list(rules), colour=colour,
                        raw_line=[i + 1 for i in first], raw_offset=[offsets[i] for i in first],
                        span=[b - a for a, b in zip(first, nxt, strict=True)], labels=[labels[i] for i in first],
                        stamps=[stamps[i] for i in first])


def _tag_text(label: str) -> str:
    from forensics.parsers.common.stream_text import WRITER_TAG

    return WRITER_TAG + label.strip().replace(WRITER_TAG, "") + WRITER_TAG


def _tag(m: re.Match[bytes]) -> bytes:
    return _tag_text(m.group(0).decode("utf-8", "replace")).encode("utf-8")


def _literal(pattern: str) -> str | None:
    """The text a pattern of only escaped literals matches; None when it has a class or repeat."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern) and not pattern[i + 1].isalnum():
            out.append(pattern[i + 1])
            i += 2
        elif c.isalnum() or c in " _-/:@,<>=!%'\"~`" or not c.isascii():
            out.append(c)
            i += 1
        else:
            return None
    return "".join(out)


_ZONED = lazy_compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,9}))?(Z|[+-]\d\d:?\d\d)")


def _zoned_ns(text: str) -> int | None:
    """UTC ns of an ISO stamp that names its zone (``Z``, ``+02:00``); None otherwise."""
    from datetime import UTC, datetime, timedelta

    m = _ZONED.search(text)
    if m is None:
        return None
    y, mo, d, hh, mi, ss = (int(g) for g in m.groups()[:6])
    frac, zone = m.group(7) or "", m.group(8)
    try:
        t = datetime(y, mo, d, hh, mi, ss, tzinfo=UTC)
    except ValueError:
        return None
    if zone != "Z":
        sign = -1 if zone[0] == "+" else 1
        digits = zone[1:].replace(":", "")
        t += sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4]))
    return int(t.timestamp()) * 1_000_000_000 + int(frac.ljust(9, "0"))
