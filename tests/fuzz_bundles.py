"""Fuzzed bundles for ``report``, ``diff``, ``pack`` and ``fleet`` (``tests/fuzz.py --command …``).

Each input is a real recorded bundle (``samples/recorded``) copied and put through one to four
bundle mutations: a file's bytes mutated as ``tests/fuzz.py`` mutates logs; a manifest or ``host/``
field set to a hostile value (10 MB strings, 100,000-deep lists, ``1e999``, 2**70, the wrong type,
markup, HTML, Markdown links, terminal and bidi controls); a file replaced by a FIFO, a link to
``/dev/zero``, a link out of the bundle, a link loop, a hard link to a file outside it, a directory;
a gzip segment truncated or a gzip bomb; a file with a hostile name; a 1 MiB line; a file removed.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted((ROOT / "samples" / "recorded").glob("*/bundle"))

HOSTILE_VALUES: tuple[Callable[[random.Random], Any], ...] = (
    lambda r: "h" * r.choice([1 << 20, 10 << 20]),
    lambda r: json.loads("[" * 900 + "]" * 900),  # deep, but parseable
    lambda r: float("inf"), lambda r: -1, lambda r: 2 ** 70, lambda r: None, lambda r: [1, "x", {}],
    lambda r: {"a": [1, 2]}, lambda r: True, lambda r: 1e308, lambda r: "",
    lambda r: "[/x] paths=[/data/a] [bold]x[/]", lambda r: "<img src=https://evil.example/t.png><details>",
    lambda r: "![t](https://evil.example/t.png) [x](javascript:alert(1)) `` ` ``| a | b |",
    lambda r: "\x1b]52;c;ZXZpbA==\x07\x1b[2J\u202egnp.exe\x9b\x00", lambda r: "9" * 5000,
    lambda r: "2026-13-45T99:99:99Z", lambda r: "\ud800", lambda r: "é€🙂" * 1000,
)
_TEXT_SUFFIXES = (".json", ".jsonl", ".log", ".txt", ".xml", ".idx")


def _files(b: Path) -> list[Path]:
    return sorted(p for p in b.rglob("*") if p.is_file() and not p.is_symlink())


def _mutate_bytes(rng: random.Random, b: Path, pool: list[bytes], mutations: tuple[Any, ...]) -> None:
    files = [p for p in _files(b) if p.suffix in _TEXT_SUFFIXES]
    if files:
        p = rng.choice(files)
        p.write_bytes(rng.choice(mutations)(rng, p.read_bytes(), pool))


def _mutate_field(rng: random.Random, b: Path, _pool: list[bytes], _m: tuple[Any, ...]) -> None:
    targets = [b / "manifest.json", *sorted((b / "host").glob("*.json"))]
    p = rng.choice([t for t in targets if t.is_file() and not t.is_symlink()] or [b / "manifest.json"])
    try:
        data = json.loads(p.read_bytes())
    except (OSError, ValueError, RecursionError):
        data = {}
    if not isinstance(data, dict):
        data = {}
    keys = list(data) or ["host"]
    key = rng.choice(keys + ["host", "status", "command", "start", "end", "start_ns", "end_ns", "exit_code",
                             "signal_name", "heartbeat", "boot_time_ns", "tz_name", "version", "gpus", "torch"])
    data[key] = rng.choice(HOSTILE_VALUES)(rng)
    text = json.dumps(data, allow_nan=True, ensure_ascii=False)
    p.write_bytes(text.encode("utf-8", "surrogatepass"))


def _special(rng: random.Random, b: Path, _pool: list[bytes], _m: tuple[Any, ...]) -> None:
    files = _files(b)
    if not files:
        return
    p = rng.choice([b / "manifest.json", b / "host" / "nvidia-smi-q.xml", b / "nvml.jsonl", *files])
    outside = b.parent / f"outside-{rng.randrange(1 << 30)}.txt"
    outside.write_text("secret outside the bundle\n")
    kind = rng.choice(["fifo", "dev-zero", "link-out", "loop", "hardlink", "dir", "empty"])
    if p.exists() or p.is_symlink():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    p.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dev-zero":
        p.symlink_to("/dev/zero")
    elif kind == "link-out":
        p.symlink_to(outside)
    elif kind == "loop":
        p.symlink_to(p)
    elif kind == "hardlink":
        os.link(outside, p)
    elif kind == "dir":
        p.mkdir()
    else:
        p.write_bytes(b"")


def _gzip(rng: random.Random, b: Path, _pool: list[bytes], _m: tuple[Any, ...]) -> None:
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from bombs import gzip_of_zeros

    name = rng.choice(["nvml.jsonl", "stdout.log", "stderr.log", "kmsg.log"])
    src = b / name
    raw = src.read_bytes() if src.is_file() and not src.is_symlink() else b"x\n"
    kind = rng.choice(["cut", "bomb", "rotated"])
    if kind == "cut":
        data = gzip.compress(raw, 1)
        (b / f"{name}.gz").write_bytes(data[: rng.randint(10, max(10, len(data) - 1))])
    elif kind == "bomb":
        (b / f"{name}.1.gz").write_bytes(gzip_of_zeros(rng.choice([64, 256])))
    else:
        (b / f"{name}.1.gz").write_bytes(gzip.compress(raw, 1))


def _name(rng: random.Random, b: Path, _pool: list[bytes], _m: tuple[Any, ...]) -> None:
    name = rng.choice(["a\\..\\..\\evil.log", "line\nbreak.log", "ctl\x1b[2J.log", "bidi\u202egol.txt",
                       "x" * 250 + ".log", "[bold].log", " lead space.log", "-rf.log", "README.md"])
    with contextlib.suppress(OSError):
        (b / name).write_bytes(b"RuntimeError: CUDA error: an illegal memory access was encountered\n")


def _long(rng: random.Random, b: Path, _pool: list[bytes], _m: tuple[Any, ...]) -> None:
    target = b / rng.choice(["stderr.log", "stdout.log", "kmsg.log"])
    if target.is_file() and not target.is_symlink():
        with target.open("ab") as fh:
            fh.write(rng.choice([b"[rank0]: ", b"", b"Nov 29 17:55:20 host kernel: "])
                     + rng.choice([b"x", b"1", b"\t", b"[", b"a:"]) * ((1 << 20) + rng.randint(0, 4096)) + b"\n")


def _remove(rng: random.Random, b: Path, _pool: list[bytes], _m: tuple[Any, ...]) -> None:
    files = _files(b)
    if files:
        rng.choice(files).unlink()


BUNDLE_MUTATIONS = (_mutate_bytes, _mutate_bytes, _mutate_field, _mutate_field, _special, _gzip, _name, _long,
                    _remove)


def make_bundle(rng: random.Random, where: Path, pool: list[bytes], mutations: tuple[Any, ...]) -> Path:
    """A fuzzed copy of a recorded bundle at ``where`` (whose parent may also get a file "outside")."""
    shutil.copytree(rng.choice(SAMPLES), where, symlinks=True)
    for _ in range(rng.randint(1, 4)):
        rng.choice(BUNDLE_MUTATIONS)(rng, where, pool, mutations)
    return where


# -- one check per command (in process; tests/fuzz.py runs them under its hang alarm) ---------------
def check_report(b: Path, _good: Path, _out: Path) -> None:
    from forensics.analysis import analyze, bundle_facts
    from forensics.postmortem import render_report

    analysis = analyze([str(b)])
    facts = bundle_facts([str(b)])
    for fmt in ("md", "html", "json"):
        text = render_report(analysis, facts, fmt)
        if fmt == "json":
            json.loads(text, parse_constant=_not_finite)
        _no_controls(text, fmt)


def check_diff(b: Path, good: Path, _out: Path) -> None:
    from forensics.analysis import analyze, bundle_facts
    from forensics.postmortem import diff

    d = diff.compare(analyze([str(good)]), bundle_facts([str(good)]), analyze([str(b)]), bundle_facts([str(b)]))
    json.loads(diff.dumps(d), parse_constant=_not_finite)
    _no_controls(diff.render_diff_markdown(d), "md")
    _no_controls(diff.render_diff_text(d), "text")


def check_pack(b: Path, _good: Path, out: Path) -> None:
    import tarfile

    from forensics.postmortem.pack import pack

    target = out / "case.tar.gz"
    pack([str(b)], target, anonymize=b.name.endswith(("1", "3", "5", "7", "9")))
    with tarfile.open(target, "r:gz") as tar:
        for member in tar.getmembers():
            name = member.name
            if not name.startswith("case/") or ".." in name.split("/") or any(c in name for c in "\\\n\x1b\u202e"):
                raise AssertionError(f"unsafe member name {name!r}")
            if not member.isfile():
                raise AssertionError(f"member {name!r} is not a regular file")
            if "secret outside the bundle" in (tar.extractfile(member) or _Empty()).read().decode("utf-8", "replace"):
                raise AssertionError(f"{name!r} holds a file from outside the bundle")
    target.unlink()


class _Empty:
    def read(self) -> bytes:
        return b""


def _not_finite(name: str) -> None:
    raise AssertionError(f"{name} in JSON output")


def _no_controls(text: str, fmt: str) -> None:
    for bad in ("\x1b", "\x07", "\u202e", "\x9b"):
        if bad in text:
            raise AssertionError(f"{bad!r} in the {fmt} output")


CHECKS = {"report": check_report, "diff": check_diff, "pack": check_pack}
