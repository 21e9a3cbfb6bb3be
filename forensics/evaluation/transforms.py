"""Metamorphic transforms of a case's log text: how real users' logs arrive.

Each transform rewrites one text file the way a launcher, a viewer, a terminal or a paste would
(a prefix on every line, line numbers, ``> `` quoting, CRLF, hard wrapping, an excerpt, another
program's chatter in between, a localized Windows export, gzip) without changing what happened.
A verdict that changes under one of them is a presentation bug. Every transform is seeded and
deterministic: the same text, name and seed give the same bytes.

Used by ``forensics eval --transforms`` (``forensics/evaluation/invariance.py``) and the tests.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from random import Random

from forensics.evaluation import culprit_transforms as culprit
from forensics.lazy_re import lazy_compile

__all__ = ["CULPRIT_TRANSFORMS", "TRANSFORMS", "FileInfo", "Transform", "apply", "names", "remap_receipts"]


@dataclass
class FileInfo:
    """What a transform may know about the file it rewrites.

    ``kind`` is the format the untransformed file was detected as; ``decisive`` the
    ``(line, nlines)`` spans of the untransformed verdict's evidence in this file (an excerpt keeps
    them); ``index`` the file's position in its case (a launcher labels each file as another
    writer); ``chatter`` healthy lines of the same kind from other cases, to interleave; ``culprits`` and
    ``bystander`` what the untransformed verdict blamed and a rank it did not (a scaled job copies the
    bystander); ``renamed`` how a relabelling transform names each rank's worker now.
    """

    name: str
    kind: str = ""
    decisive: list[tuple[int, int]] = field(default_factory=list)
    index: int = 0
    chatter: list[str] = field(default_factory=list)
    in_bundle: bool = False
    #: the untransformed verdict's culprit ranks, and a rank that only waited (what a scaled job adds more of)
    culprits: list[int] = field(default_factory=list)
    bystander: int | None = None
    #: written by a transform that names workers otherwise: rank -> {"hosts"/"pids"/"ranks": value}
    renamed: dict[int, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Transform:
    name: str
    help: str
    fn: Callable[[str, FileInfo, Random], str | bytes | None]
    #: Whether it applies to a recorded bundle's stdout/stderr (a launcher wraps the recorded command;
    #: nobody pastes a bundle).
    in_bundle: bool = False


def _lines(text: str) -> tuple[list[str], str]:
    """The lines of ``text`` without their ends, and the end of the last line ('' or '\\n')."""
    if text.endswith("\n"):
        return text[:-1].split("\n"), "\n"
    return text.split("\n"), ""


def _prefixed(text: str, label: Callable[[int], str]) -> str:
    lines, end = _lines(text)
    return "\n".join(label(i) + line for i, line in enumerate(lines)) + end


# -- launcher prefixes ----------------------------------------------------------------------------
# Shapes as the tools print them: torchx ``{role}/{replica} [{local_rank}]:`` (torchx/schedulers
# log iterators), ``srun --label`` ``N: ``, pdsh/clush ``host: ``, DeepSpeed's pdsh launcher
# ``worker-N: ``, Ray ``(Actor pid=N, ip=A.B.C.D) ``, ``kubectl logs --prefix --timestamps``
# ``[pod/NAME/CONTAINER] RFC3339NANO ``, docker compose ``service-N  | ``.


def _rank(info: FileInfo, rng: Random) -> int:
    return info.index + rng.randrange(0, 4) * 2


def _torchx(text: str, info: FileInfo, rng: Random) -> str:
    r = _rank(info, rng)
    return _prefixed(text, lambda _i: f"trainer/{r // 8} [{r % 8}]:")


def _srun(text: str, info: FileInfo, rng: Random) -> str:
    r = _rank(info, rng)
    return _prefixed(text, lambda _i: f"{r}: ")


def _pdsh(text: str, info: FileInfo, rng: Random) -> str:
    host = f"gpu-node{rng.randrange(1, 64):02d}"
    return _prefixed(text, lambda _i: f"{host}: ")


def _deepspeed(text: str, info: FileInfo, rng: Random) -> str:
    host = f"worker-{info.index + rng.randrange(0, 4)}"
    return _prefixed(text, lambda _i: f"{host}: ")


def _ray(text: str, info: FileInfo, rng: Random) -> str:
    pid = rng.randrange(1000, 99999)
    ip = f"10.{rng.randrange(0, 255)}.{rng.randrange(0, 255)}.{rng.randrange(1, 254)}"
    return _prefixed(text, lambda _i: f"(RayTrainWorker pid={pid}, ip={ip}) ")


def _k8s(text: str, info: FileInfo, rng: Random) -> str:
    pod = f"pod/trainer-worker-{info.index + rng.randrange(0, 3)}"
    base = 1714557600 + rng.randrange(0, 86400)  # 2024-05-01
    ns = [0]

    def label(_i: int) -> str:
        ns[0] += rng.randrange(1000, 50_000_000)
        s, frac = divmod(ns[0], 1_000_000_000)
        t = base + s
        day, rem = divmod(t - 1714521600, 86400)
        hh, rem = divmod(rem, 3600)
        mm, ss = divmod(rem, 60)
        return f"[{pod}/pytorch] 2024-05-{1 + day:02d}T{hh:02d}:{mm:02d}:{ss:02d}.{frac:09d}Z "

    return _prefixed(text, label)


def _compose(text: str, info: FileInfo, rng: Random) -> str:
    svc = f"trainer-{info.index + 1}"
    pad = " " * rng.randrange(1, 4)
    return _prefixed(text, lambda _i: f"{svc}{pad} | ")


def _two_hosts(text: str, info: FileInfo, rng: Random) -> str | None:
    """pdsh over two nodes that printed the same output: both copies, each under its host's label,
    interleaved line by line in a random order (each keeps its own order)."""
    lines, end = _lines(text)
    if len(lines) < 2 or info.kind.startswith("windows"):  # nobody runs Event Viewer through pdsh
        return None
    a, b = f"node{rng.randrange(1, 50):02d}: ", f"node{rng.randrange(50, 99):02d}: "
    out: list[str] = []
    i = j = 0
    while i < len(lines) or j < len(lines):
        if j >= len(lines) or (i < len(lines) and rng.random() < 0.5):
            out.append(a + lines[i])
            i += 1
        else:
            out.append(b + lines[j])
            j += 1
    return "\n".join(out) + end


# -- viewer and paste habits --------------------------------------------------------------------


def _line_numbers(text: str, info: FileInfo, rng: Random) -> str:
    start = rng.choice((1, 1, rng.randrange(2, 5000)))
    style = rng.randrange(3)
    width = len(str(start + text.count("\n") + 1))
    if style == 0:  # a CI log viewer / GitHub Actions raw view: "[1825] "
        return _prefixed(text, lambda i: f"[{start + i}] ")
    if style == 1:  # grep -n / an editor copy: "1825:"
        return _prefixed(text, lambda i: f"{start + i}:")
    return _prefixed(text, lambda i: f"{start + i:>{width + 2}}  ")  # cat -n / less -N


def _quote(text: str, info: FileInfo, rng: Random) -> str:
    q = rng.choice(("> ", "> ", ">> ", ">"))
    return _prefixed(text, lambda _i: q)


def _crlf(text: str, info: FileInfo, rng: Random) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def _wrap80(text: str, info: FileInfo, rng: Random) -> str | None:
    lines, end = _lines(text)
    if not any(len(line) > 80 for line in lines):
        return None
    out: list[str] = []
    for line in lines:
        while len(line) > 80:
            out.append(line[:80])
            line = line[80:]
        out.append(line)
    return "\n".join(out) + end


_STAMPS = lazy_compile(
    r"^(?:"
    r"\[\s*\d+\.\d+\]\s?"  # dmesg
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\]\s?"  # dmesg -T
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s"  # ISO
    r"|\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s?"  # [ISO]
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d\s"  # syslog / journalctl short
    r")"
)


def _strip_timestamps(text: str, info: FileInfo, rng: Random) -> str | None:
    lines, end = _lines(text)
    out = [_STAMPS.sub("", line, count=1) for line in lines]
    if out == lines:
        return None
    return "\n".join(out) + end


def _boundaries(lines: Sequence[str]) -> list[int]:
    """Indexes where a record may begin: an unindented line after an unindented line (a cut or an
    insertion there splits no traceback, stack or continuation)."""
    out = [0]
    for i in range(1, len(lines)):
        cur, prev = lines[i], lines[i - 1]
        if cur[:1] not in (" ", "\t", "") and prev[:1] not in (" ", "\t") and not prev.rstrip().endswith(":"):
            out.append(i)
    return out


def _excerpt(text: str, info: FileInfo, rng: Random) -> str | None:
    lines, end = _lines(text)
    if len(lines) < 8:
        return None
    if info.decisive:
        first = min(ln for ln, _ in info.decisive) - 1
        last = max(ln + n - 1 for ln, n in info.decisive)
    else:  # a healthy file: any part of at least half of it
        first = len(lines) // 2
        last = len(lines) // 2
    bounds = _boundaries(lines)
    heads = [b for b in bounds if b <= first - 2] or [0]
    tails = [b for b in bounds if b > last + 2] + [len(lines)]
    a, b = rng.choice(heads), rng.choice(tails)
    if a == 0 and b == len(lines):
        return None
    return "\n".join(lines[a:b]) + ("\n" if b < len(lines) else end)


def _interleave(text: str, info: FileInfo, rng: Random) -> str | None:
    if not info.chatter:
        return None
    lines, end = _lines(text)
    bounds = set(_boundaries(lines))
    out: list[str] = []
    pool = info.chatter
    k = rng.randrange(len(pool))
    for i, line in enumerate(lines):
        if i in bounds and rng.random() < 0.5:
            for _ in range(rng.randrange(1, 6)):
                out.append(pool[k % len(pool)])
                k += 1
        out.append(line)
    return "\n".join(out) + end


# Windows Event Viewer field labels and level names as localized Windows prints them in
# "Copy details as text" and "Save as CSV" (German, French, Simplified Chinese editions).
_WIN_LABELS: dict[str, dict[str, str]] = {
    "de": {"Log Name": "Protokollname", "Source": "Quelle", "Date": "Datum", "Event ID": "Ereignis-ID",
           "Task Category": "Aufgabenkategorie", "Level": "Ebene", "Keywords": "Schlüsselwörter",
           "User": "Benutzer", "Computer": "Computer", "Description": "Beschreibung",
           "Date and Time": "Datum und Uhrzeit"},
    "fr": {"Log Name": "Nom du journal ", "Source": "Source ", "Date": "Date ", "Event ID": "ID de l'événement ",
           "Task Category": "Catégorie de la tâche ", "Level": "Niveau ", "Keywords": "Mots clés ",
           "User": "Utilisateur ", "Computer": "Ordinateur ", "Description": "Description ",
           "Date and Time": "Date et heure"},
    "zh": {"Log Name": "日志名称", "Source": "来源", "Date": "日期", "Event ID": "事件 ID", "Task Category": "任务类别",
           "Level": "级别", "Keywords": "关键字", "User": "用户", "Computer": "计算机", "Description": "描述",
           "Date and Time": "日期和时间"},
}
_WIN_LEVELS: dict[str, dict[str, str]] = {
    "de": {"Error": "Fehler", "Warning": "Warnung", "Information": "Informationen", "Critical": "Kritisch"},
    "fr": {"Error": "Erreur", "Warning": "Avertissement", "Information": "Information", "Critical": "Critique"},
    "zh": {"Error": "错误", "Warning": "警告", "Information": "信息", "Critical": "关键"},
}
_WIN_KINDS = ("windows-event-text", "windows-event-csv")
_LABEL_LINE = lazy_compile(r"^(\s*)(Log Name|Source|Date|Event ID|Task Category|Level|Keywords|User|Computer|"
                           r"Description):(\s*)(.*)$")
_GENERAL_EN = lazy_compile(r"The description for Event ID (\d+) from source (\S+) cannot be found\.")
_CSV_HEAD = lazy_compile(r"^(\ufeff?)(Level|Keywords),")


def _windows_locale(text: str, info: FileInfo, rng: Random) -> str | None:
    if info.kind not in _WIN_KINDS:
        return None
    lang = rng.choice(("de", "fr", "zh"))
    labels, levels = _WIN_LABELS[lang], _WIN_LEVELS[lang]
    lines, end = _lines(text)
    out: list[str] = []
    changed = False
    for i, line in enumerate(lines):
        g = _GENERAL_EN.search(line)
        if g:  # the General tab's prose: the German wording the text parser knows (no verified fr/zh one)
            out.append(line[: g.start()] + f"Die Beschreibung für die Ereignis-ID {g.group(1)} aus der Quelle "
                       f"{g.group(2)} wurde nicht gefunden." + line[g.end():])
            changed = True
            continue
        m = _LABEL_LINE.match(line)
        if m:
            value = m.group(4)
            if m.group(2) == "Level":
                value = levels.get(value.strip(), value)
            out.append(f"{m.group(1)}{labels[m.group(2)]}:{m.group(3)}{value}")
            changed = True
            continue
        if i == 0 and _CSV_HEAD.match(line):
            for en in sorted(labels, key=len, reverse=True):
                line = re.sub(rf"(?<![\w ]){re.escape(en)}(?=,|$)", labels[en].strip(), line)
            changed = True
        elif changed and "," in line:
            head, sep, rest = line.partition(",")
            line = levels.get(head, head) + sep + rest
        out.append(line)
    return "\n".join(out) + end if changed else None


_LEVEL_WORD = lazy_compile(r"\b(ERROR|Error|WARN(?:ING)?|Warning|FATAL|error)\b")


def _ansi(text: str, info: FileInfo, rng: Random) -> str:
    """Terminal colours as ``dmesg --color=always`` or a coloured logger writes them: the line's first
    field (stamp, host) in one colour, level words in red, each reset after."""
    colour = rng.choice(("32", "33", "36", "1;34"))
    lines, end = _lines(text)
    out = []
    for line in lines:
        head, sep, rest = line.partition(" ")
        coloured = f"\x1b[{colour}m{head}\x1b[0m{sep}" if head else sep
        out.append(coloured + _LEVEL_WORD.sub("\x1b[31m\\1\x1b[0m", rest))
    return "\n".join(out) + end


def _gzip(text: str, info: FileInfo, rng: Random) -> bytes:
    return gzip.compress(text.encode("utf-8"), mtime=0)


TRANSFORMS: tuple[Transform, ...] = (
    Transform("torchx", "torchx 'trainer/0 [1]:' on every line", _torchx, in_bundle=True),
    Transform("srun", "srun --label 'N: ' on every line", _srun, in_bundle=True),
    Transform("pdsh", "pdsh / clush 'host: ' on every line", _pdsh, in_bundle=True),
    Transform("deepspeed", "DeepSpeed pdsh launcher 'worker-N: ' on every line", _deepspeed, in_bundle=True),
    Transform("ray", "Ray '(RayTrainWorker pid=N, ip=A.B.C.D) ' on every line", _ray, in_bundle=True),
    Transform("k8s", "kubectl logs --prefix --timestamps '[pod/…/c] RFC3339Nano '", _k8s, in_bundle=True),
    Transform("compose", "docker compose 'service-N  | ' on every line", _compose, in_bundle=True),
    Transform("two-hosts", "pdsh over two nodes: the output twice, 'host: ' labels, lines interleaved", _two_hosts),
    Transform("line-numbers", "line numbers a viewer added ('[1825] ', '1825:', '  1825  ')", _line_numbers),
    Transform("quote", "'> ' quoting (mail, forum reply)", _quote),
    Transform("crlf", "CRLF line ends", _crlf),
    Transform("wrap80", "hard-wrapped at 80 columns", _wrap80),
    Transform("strip-timestamps", "leading timestamps removed", _strip_timestamps),
    Transform("excerpt", "cut at random record boundaries, keeping the evidence lines", _excerpt),
    Transform("interleave", "healthy chatter of the same kind from other cases in between", _interleave,
              in_bundle=True),
    Transform("windows-locale", "Windows export with German/French/Chinese labels and levels", _windows_locale),
    Transform("ansi", "terminal colour codes (dmesg --color=always, coloured loggers)", _ansi),
    Transform("gzip", "gzip-compressed", _gzip),
    # How workers are named and how many there are (forensics/evaluation/culprit_transforms.py).
    Transform("strip-prefix", "torchrun's [rankN]: prefixes removed, the rank only inside the message",
              culprit.strip_prefix),
    Transform("relabel-srun", "torchrun's prefix replaced with srun -l's 'N: '", culprit.relabel("srun")),
    Transform("relabel-pdsh", "torchrun's prefix replaced with pdsh's 'nodeNN: ' (one rank per node)",
              culprit.relabel("pdsh")),
    Transform("relabel-ray", "torchrun's prefix replaced with Ray's '(RayTrainWorker pid=…, ip=…)'",
              culprit.relabel("ray")),
    Transform("relabel-k8s", "torchrun's prefix replaced with kubectl's '[pod/trainer-worker-N/pytorch]'",
              culprit.relabel("k8s")),
    Transform("shuffle-ranks", "each round of interleaved ranks' lines in another order", culprit.shuffle_ranks),
    Transform("scale-64", "the job grown to 64 ranks (bystander ranks added)", culprit.scale(64)),
    Transform("scale-512", "the job grown to 512 ranks (bystander ranks added)", culprit.scale(512)),
    Transform("scale-2048", "the job grown to 2048 ranks (bystander ranks added)", culprit.scale(2048)),
)
#: Transforms of how workers are named and counted, and the whole-case paste: what ``--transforms culprit`` runs.
CULPRIT_TRANSFORMS = ("paste", "paste-reversed", "strip-prefix", "relabel-srun", "relabel-pdsh", "relabel-ray",
                      "relabel-k8s", "shuffle-ranks", "scale-64", "scale-512", "scale-2048")
_BY_NAME = {t.name: t for t in TRANSFORMS}


def names() -> list[str]:
    return [t.name for t in TRANSFORMS]


def get(name: str) -> Transform:
    return _BY_NAME[name]


def _seed(name: str, file: str, seed: int) -> int:
    """A stable per-(transform, file, seed) seed (``hash()`` of a str changes between runs)."""
    h = seed & 0xFFFFFFFF
    for ch in f"{name}\0{file}":
        h = (h * 1000003 ^ ord(ch)) & 0xFFFFFFFFFFFF
    return h


def apply(name: str, raw: bytes, info: FileInfo, seed: int = 0) -> bytes | None:
    """``raw`` rewritten by transform ``name`` (None when it does not apply to this file)."""
    t = _BY_NAME[name]
    if info.in_bundle and not t.in_bundle:
        return None
    text = raw.decode("utf-8", errors="replace")
    out = t.fn(text, info, Random(_seed(name, info.name, seed)))
    if out is None:
        return None
    data = out if isinstance(out, bytes) else out.encode("utf-8")
    return None if data == raw else data


def remap_receipts(idx: bytes, old: bytes, new: bytes) -> bytes | None:
    """A bundle's receipt index (``GFRIDX1`` + (end offset, ns) records) moved from ``old`` onto
    ``new``, which has the same lines with text added in front of each; None when the lines differ."""
    import struct
    from bisect import bisect_right

    magic = b"GFRIDX1\n"
    if not idx.startswith(magic):
        return None
    old_lines, new_lines = old.split(b"\n"), new.split(b"\n")
    if len(old_lines) != len(new_lines):
        return None
    old_starts, new_starts, added = [], [], []
    o = n = 0
    for a, b in zip(old_lines, new_lines, strict=True):
        old_starts.append(o)
        new_starts.append(n)
        added.append(len(b) - len(a))
        o += len(a) + 1
        n += len(b) + 1
    rec = struct.Struct("<QQ")
    body = idx[len(magic):]
    out = bytearray(magic)
    for end, ns in rec.iter_unpack(body[: len(body) - len(body) % rec.size]):
        i = max(0, bisect_right(old_starts, end) - 1)
        col = end - old_starts[i]
        out += rec.pack(new_starts[i] + added[i] + col if col else new_starts[i], ns)
    return bytes(out)
