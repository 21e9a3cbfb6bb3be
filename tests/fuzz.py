"""A seeded mutation fuzzer for ``analyze``: every parser, the sources layer (gzip, tar, zip,
evtx, nesting, bombs), the clock, the verdict and the JSON and text renderers, in one process.

Seeds are the real logs and bundles of ``tests/corpus`` and ``samples/`` (files up to 256 KiB)
and every parser's own samples. Each input is one seed put through a few mutations —
byte flips, inserts, cuts, splices of two seeds, extreme numbers (5,000 digits, 2**32, -1,
1e308), extreme dates (years 0000 and 9999, epoch s/ms/ns, negative, huge), a pathological
long line, deep JSON/XML nesting, NUL bytes, UTF-16 with and without BOM, ANSI, CRLF — then
maybe wrapped (gzip, truncated gzip, zip, zip with a bad central directory, tar, tar.gz,
a zip in a zip in a zip, gzip of zeros). It is written to a file with a fitting name and
analyzed; then both renderers run. A Python exception anywhere is a crash; an input that
takes longer than ``--hang`` seconds (SIGALRM) is a hang.

Short run (the test suite does this): ``tests/test_fuzz.py``. Long run::

    nice python tests/fuzz.py --inputs 10000 --seed 1 --out /tmp/fuzz-crashes

prints ``inputs N crashes C hangs H slowest S s (name)`` and saves every crashing input.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import random
import re
import resource
import signal
import sys
import tarfile
import tempfile
import time
import traceback
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_SEED = 256 << 10

EXTREME_NUMBERS = ("9" * 5000, "4294967296", "18446744073709551616", "-1", "-9223372036854775809", "0",
                   "1e308", "NaN", "inf", "99999999999999999999", "1" + "0" * 30, "-0", "0x7fffffff")
EXTREME_DATES = ("0000-01-01T00:00:00Z", "9999-12-31T23:59:59.999999999-14:00", "1970-01-01 00:00:00",
                 "2024-02-30T25:61:61Z", "Fri Mar  3 04:27:08 9999", "Dec 31 23:59:60", "[99999999999999.999999]",
                 "[-5.000000]", '"t":99999999999999999999999', '"t":-1', '"t":1.5e300',
                 '"__REALTIME_TIMESTAMP":"99999999999999999999"', "1740910021512345678", "-1740910021",
                 "+275760-09-13T00:00:00Z", "2025-03-02T13:17:41+99:99")


@dataclass
class Result:
    inputs: int = 0
    crashes: list[tuple[str, str]] = field(default_factory=list)
    hangs: list[tuple[str, float]] = field(default_factory=list)
    slowest: tuple[float, str] = (0.0, "")

    def line(self) -> str:
        return (f"inputs {self.inputs} crashes {len(self.crashes)} hangs {len(self.hangs)} "
                f"slowest {self.slowest[0]:.2f} s ({self.slowest[1]})")


def seeds() -> list[tuple[str, bytes]]:
    """(name, bytes) of every seed, in a stable order."""
    from forensics.parsers.registry import PARSERS

    out: list[tuple[str, bytes]] = []
    for base in (ROOT / "tests" / "corpus", ROOT / "samples"):
        for path in sorted(base.rglob("*")):
            if path.is_file() and 0 < path.stat().st_size <= MAX_SEED and path.suffix not in (".md", ".toml", ".py"):
                out.append((path.name, path.read_bytes()))
    for parser in PARSERS:
        for i, sample in enumerate(parser.samples):
            out.append((f"{parser.name}-{i}.log", sample.encode()))
    return out


# -- mutations ------------------------------------------------------------------------------------------
def _flip(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    if not data:
        return data
    buf = bytearray(data)
    for _ in range(rng.randint(1, 16)):
        buf[rng.randrange(len(buf))] = rng.randrange(256)
    return bytes(buf)


def _insert(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    pos = rng.randint(0, len(data))
    junk = rng.choice([b"\0" * rng.randint(1, 64), rng.randbytes(rng.randint(1, 256)), b"\x1b[31m", b"\r\n", b"\r",
                       b"\xff\xfe", b"\xef\xbb\xbf", b"\n" * 100, "é€🙂".encode(), b"\\u0000", b"}{", b"]]>"])
    return data[:pos] + junk + data[pos:]


def _cut(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    if len(data) < 2:
        return data
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, max(1, len(data) // 4)))
    return data[:a] + data[b:] if rng.random() < 0.7 else data[:a]


def _splice(rng: random.Random, data: bytes, pool: list[bytes]) -> bytes:
    other = rng.choice(pool)
    a, b = rng.randint(0, len(data)), rng.randint(0, len(other))
    return data[:a] + other[b:]


def _numbers(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    spots = [m.span() for m in re.finditer(rb"\d+", data[:200_000])]
    if not spots:
        return data + rng.choice(EXTREME_NUMBERS).encode()
    buf = data
    for a, b in sorted(rng.sample(spots, min(len(spots), rng.randint(1, 4))), reverse=True):
        buf = buf[:a] + rng.choice(EXTREME_NUMBERS).encode() + buf[b:]
    return buf


def _dates(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    date = rng.choice(EXTREME_DATES).encode()
    m = re.search(rb"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?|\[\s*\d+\.\d+\]|"
                  rb"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\"t\":\d+", data[:200_000])
    if m is None:
        return date + b" " + data
    return data[: m.start()] + date + data[m.end():]


def _long_line(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    line = rng.choice([b"1" * 200_000, b"a" * 300_000, b"1/" * 100_000, b"[" * 100_000, b"(" * 50_000,
                       b"File \"" * 20_000, b"\t" * 100_000, b"NCCL " * 40_000, b"Xid " * 30_000])
    pos = data.find(b"\n", rng.randint(0, len(data))) + 1 if data else 0
    return data[:pos] + line + b"\n" + data[pos:]


def _nesting(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    n = rng.choice([1000, 50_000, 200_000])
    deep = rng.choice([b'{"a":' * n + b"1" + b"}" * n, b"[" * n + b"]" * n, b"<a>" * n + b"</a>" * n,
                       b"[" * n, b'<?xml version="1.0"?><Events>' + b"<Event>" * n])
    return data + b"\n" + deep + b"\n"


def _encoding(rng: random.Random, data: bytes, _pool: list[bytes]) -> bytes:
    text = data.decode("utf-8", errors="replace")
    return rng.choice([
        lambda: text.encode("utf-16"), lambda: text.encode("utf-16-le"), lambda: text.encode("utf-16-be"),
        lambda: text.encode("latin-1", errors="replace"), lambda: data.replace(b"\n", b"\r\n"),
        lambda: data.replace(b"\n", b"\r"), lambda: b"\0".join(data[i:i + 1] for i in range(min(len(data), 5000))),
    ])()


MUTATIONS: tuple[Callable[[random.Random, bytes, list[bytes]], bytes], ...] = (
    _flip, _insert, _cut, _splice, _numbers, _dates, _long_line, _nesting, _encoding)


# -- containers -----------------------------------------------------------------------------------------
def _zip(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            zf.writestr(name, data)
    return buf.getvalue()


def _tar(members: list[tuple[str, bytes]], gz: bool) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        tar.addfile(link)
    return buf.getvalue()


def wrap(rng: random.Random, name: str, data: bytes) -> tuple[str, bytes]:
    choice = rng.random()
    if choice < 0.6:
        return name, data
    kind = rng.choice(["gz", "gz-cut", "zip", "zip-bad", "tar", "tgz", "nested", "zeros", "evtx"])
    if kind == "gz":
        return name + ".gz", gzip.compress(data, 1)
    if kind == "gz-cut":
        raw = gzip.compress(data, 1)
        return name + ".gz", raw[: rng.randint(10, max(10, len(raw)))]
    if kind == "zip":
        return name + ".zip", _zip([(name, data), ("b/" + name, data[: len(data) // 2])])
    if kind == "zip-bad":
        raw = bytearray(_zip([(name, data)]))
        end = raw.rfind(b"PK\x05\x06")
        if end >= 0:
            raw[end + 16 : end + 20] = rng.choice([1000, 0xFFFFFFFF, 3]).to_bytes(4, "little")
        return name + ".zip", _flip(rng, bytes(raw), []) if rng.random() < 0.3 else bytes(raw)
    if kind in ("tar", "tgz"):
        return name + (".tar.gz" if kind == "tgz" else ".tar"), _tar([(name, data)], kind == "tgz")
    if kind == "nested":
        inner = _zip([(name, data)])
        for _ in range(rng.randint(2, 5)):
            inner = _zip([("inner.zip", inner)])
        return name + ".zip", inner
    if kind == "zeros":
        import sys as _sys

        _sys.path.insert(0, str(ROOT / "tests"))
        from bombs import gzip_of_zeros

        return name + ".gz", gzip_of_zeros(rng.choice([1, 64, 512]))
    return name + ".evtx", b"ElfFile\x00" + data[:4096]


def make_input(rng: random.Random, pool: list[tuple[str, bytes]]) -> tuple[str, bytes]:
    name, data = rng.choice(pool)
    blobs = [d for _, d in pool]
    for _ in range(rng.randint(1, 3)):
        data = rng.choice(MUTATIONS)(rng, data, blobs)
    return wrap(rng, name, data)


# -- running --------------------------------------------------------------------------------------------
class Hang(BaseException):
    """Raised by the alarm: a BaseException, so that no ``except Exception`` on the way (a detector's
    guard, ``parse_guard``) can swallow it — an ``Exception`` here let seed 3 report "0 hangs" for an
    input that took 143 s inside a detector."""


def _alarm(_signum: int, _frame: object) -> None:
    raise Hang


def check(path: Path) -> None:
    """Analyze one file and render it both ways; raises whatever goes wrong."""
    from forensics.analysis import analyze, dumps
    from forensics.text_report import render_text

    analysis = analyze([str(path)])
    json.loads(dumps(analysis))
    render_text(analysis)


def run(inputs: int, seed: int, hang_s: float = 20.0, out: Path | None = None,
        progress: Callable[[Result], None] | None = None) -> Result:
    rng = random.Random(seed)
    pool = seeds()
    result = Result()
    old = signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory(prefix="forensics-fuzz-") as tmp:
        try:
            for i in range(inputs):
                name, data = make_input(rng, pool)
                safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[-80:]
                path = Path(tmp) / f"{i:06d}-{safe}"
                path.write_bytes(data)
                start = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, hang_s)
                try:
                    check(path)
                except Hang:
                    result.hangs.append((path.name, time.perf_counter() - start))
                    _save(out, path, data, "hang")
                except Exception:  # noqa: BLE001 - any exception is the finding
                    result.crashes.append((path.name, traceback.format_exc()))
                    _save(out, path, data, "crash", traceback.format_exc())
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                elapsed = time.perf_counter() - start
                if elapsed > result.slowest[0]:
                    result.slowest = (elapsed, f"{path.name}, {len(data):,} bytes")
                result.inputs += 1
                path.unlink()
                if progress is not None and result.inputs % 500 == 0:
                    progress(result)
        finally:
            signal.signal(signal.SIGALRM, old)
    return result


def _make_bundle_input(rng: random.Random, tmp: Path, i: int, pool: list[tuple[str, bytes]]) -> Path:
    from fuzz_bundles import make_bundle

    case = tmp / f"{i:06d}"
    case.mkdir()
    return make_bundle(rng, case / "bundle", [d for _, d in pool], MUTATIONS)


def run_bundles(command: str, inputs: int, seed: int, hang_s: float = 20.0, out: Path | None = None,
                progress: Callable[[Result], None] | None = None) -> Result:
    """``report``, ``diff`` (against the unmutated sample) or ``pack`` of fuzzed bundles, in process;
    a :class:`~forensics.errors.ForensicsError` is the command's one clear line, anything else a crash."""
    import shutil

    from fuzz_bundles import CHECKS, SAMPLES

    from forensics.errors import ForensicsError

    rng = random.Random(seed)
    pool = seeds()
    check_one = CHECKS[command]
    result = Result()
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        with tempfile.TemporaryDirectory(prefix=f"forensics-fuzz-{command}-") as tmp:
            for i in range(inputs):
                b = _make_bundle_input(rng, Path(tmp), i, pool)
                good = SAMPLES[i % len(SAMPLES)]
                start = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, hang_s)
                try:
                    check_one(b, good, b.parent)
                except Hang:
                    result.hangs.append((f"{i:06d}", time.perf_counter() - start))
                    _save_tree(out, b, f"hang-{command}-{i:06d}")
                except ForensicsError:
                    pass
                except Exception:  # noqa: BLE001 - any other exception is the finding
                    result.crashes.append((f"{i:06d}", traceback.format_exc()))
                    _save_tree(out, b, f"crash-{command}-{i:06d}", traceback.format_exc())
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                elapsed = time.perf_counter() - start
                if elapsed > result.slowest[0]:
                    result.slowest = (elapsed, f"{i:06d}")
                result.inputs += 1
                shutil.rmtree(b.parent, ignore_errors=True)
                if progress is not None and result.inputs % 500 == 0:
                    progress(result)
    finally:
        signal.signal(signal.SIGALRM, old)
    return result


def run_fleet(inputs: int, seed: int, hang_s: float = 20.0, out: Path | None = None, batch: int = 250,
              progress: Callable[[Result], None] | None = None) -> Result:
    """``forensics fleet`` (its own process, a real local Dask cluster and DuckDB) over folders of
    ``batch`` fuzzed bundles: a crash is a traceback on its stderr or an exit status other than 0/3, a
    hang a run over its wall clock (``hang_s`` per input, killed), a loss a bundle without its row."""
    import os
    import shutil
    import subprocess

    rng = random.Random(seed)
    pool = seeds()
    result = Result()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = 0
    while done < inputs:
        n = min(batch, inputs - done)
        with tempfile.TemporaryDirectory(prefix="forensics-fuzz-fleet-") as tmp:
            folder = Path(tmp) / "incidents"
            folder.mkdir()
            for i in range(n):
                _make_bundle_input(rng, folder, done + i, pool)
            db = Path(tmp) / "fleet.duckdb"
            start = time.perf_counter()
            cmd = [sys.executable, "-m", "forensics", "fleet", "--workers", "2", "--deadline", str(hang_s),
                   "-o", str(db), str(folder)]
            try:
                ran = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=hang_s * n + 300)
                bad = ran.returncode not in (0, 3) or "Traceback" in ran.stderr
                rows = _fleet_rows(db) if db.exists() else -1
                if bad or rows < n:
                    why = f"exit {ran.returncode}, {rows} rows of {n}\n{ran.stderr[-4000:]}"
                    result.crashes.append((f"batch {done}", why))
                    _save_tree(out, folder, f"crash-fleet-{done:06d}", why)
            except subprocess.TimeoutExpired:
                result.hangs.append((f"batch {done}", time.perf_counter() - start))
                _save_tree(out, folder, f"hang-fleet-{done:06d}")
            elapsed = (time.perf_counter() - start) / n
            if elapsed > result.slowest[0]:
                result.slowest = (elapsed, f"batch {done}, per input")
            shutil.rmtree(folder, ignore_errors=True)
        done += n
        result.inputs = done
        if progress is not None:
            progress(result)
    return result


def _fleet_rows(db: Path) -> int:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return int(con.execute("SELECT count(*) FROM inputs").fetchone()[0])
    finally:
        con.close()


def _save_tree(out: Path | None, where: Path, name: str, tb: str = "") -> None:
    """A copy of a crashing or hanging bundle (links and FIFOs as they are) and its traceback."""
    import shutil

    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError, shutil.Error):
        shutil.copytree(where, out / name, symlinks=True, ignore_dangling_symlinks=True,
                        copy_function=lambda s, d: shutil.copy2(s, d) if Path(s).is_file() else None)
    if tb:
        (out / f"{name}.txt").write_text(tb)


def _save(out: Path | None, path: Path, data: bytes, what: str, tb: str = "") -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{what}-{path.name}").write_bytes(data)
    if tb:
        (out / f"{what}-{path.name}.txt").write_text(tb)


LONG_LINES = {"digits": b"1", "letters": b"a", "slashes": b"1/", "brackets": b"[", "parens": b"(",
              "file": b'File "', "tabs": b"\t", "spaces": b" ", "colons": b"1:", "dots": b"a.", "equals": b"a=",
              "quotes": b'"', "dashes": b"-", "commas": b"1,"}


def long_lines(n: int, slow_s: float = 0.3) -> list[str]:
    """Every parser on its first sample with one pathological line of ``n`` bytes (each shape of
    :data:`LONG_LINES`, first and second line): the (parser, shape) pairs slower than ``slow_s``
    (a quadratic regex shows at 100,000 bytes, long before the 1 MiB line cap)."""
    from forensics.parsers.common.base import ParseContext
    from forensics.parsers.registry import PARSERS

    from forensics.ingest.textdoc import TextDocument

    slow: list[str] = []
    for parser in PARSERS:
        data = (parser.samples or ("",))[0].encode()
        cut = data.find(b"\n") + 1
        for name, unit in LONG_LINES.items():
            line = unit * (n // len(unit))
            for doc_bytes in (line + b"\n" + data, data[:cut] + line + b"\n" + data[cut:]):
                doc = TextDocument.from_bytes(doc_bytes, "x")
                start = time.perf_counter()
                parser.detect(doc.head())
                list(parser.parse(doc, ParseContext(path="x", source="file:x", year=2025)))
                elapsed = time.perf_counter() - start
                if elapsed > slow_s:
                    slow.append(f"{parser.name} {name} {elapsed:.2f} s")
    return slow


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--hang", type=float, default=20.0, help="seconds after which one input counts as a hang")
    ap.add_argument("--out", type=Path, default=None, help="save crashing and hanging inputs here")
    ap.add_argument("--memory-gib", type=float, default=6.0, help="address-space limit (a blow-up is a crash)")
    ap.add_argument("--long-lines", type=int, default=0, metavar="BYTES",
                    help="instead: every parser with one pathological line of BYTES, report the slow pairs")
    ap.add_argument("--command", choices=("analyze", "report", "diff", "pack", "fleet"), default="analyze",
                    help="analyze: fuzzed files; the others: fuzzed bundles (tests/fuzz_bundles.py)")
    ap.add_argument("--batch", type=int, default=250, help="fleet: fuzzed bundles per fleet run")
    args = ap.parse_args(argv)
    if args.long_lines:
        slow = long_lines(args.long_lines)
        print("\n".join(slow) or f"no parser slower than 0.3 s on a {args.long_lines:,}-byte line")
        return 1 if slow else 0
    sys.path.insert(0, str(ROOT))
    limit = int(args.memory_gib * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    start = time.monotonic()

    def say(r: Result) -> None:
        print(r.line(), f"[{time.monotonic() - start:.0f} s]", flush=True)

    if args.command == "fleet":
        result = run_fleet(args.inputs, args.seed, args.hang, args.out, args.batch, progress=say)
    elif args.command != "analyze":
        result = run_bundles(args.command, args.inputs, args.seed, args.hang, args.out, progress=say)
    else:
        result = run(args.inputs, args.seed, args.hang, args.out, progress=say)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    print(f"{args.command}: {result.line()} in {time.monotonic() - start:.0f} s; peak RSS {peak} MiB "
          f"(largest child {children} MiB)")
    for name, tb in result.crashes[:20]:
        tail = tb if len(tb) < 4000 else "…\n" + tb[-4000:]  # a RecursionError is thousands of frames
        print(f"--- crash {name}\n{tail}")
    for name, secs in result.hangs[:20]:
        print(f"--- hang {name} ({secs:.1f} s)")
    return 1 if result.crashes or result.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
