"""Exception records: Python tracebacks (plain, chained, rank-prefixed, rich, Jupyter,
faulthandler) and C++ ``terminate called`` / ``what():`` / ``Exception raised from`` stacks.

A reader gets the record's first body and a :class:`~forensics.parsers.common.stream_text.Follower`
over the next lines of the same writer, and returns an :class:`ExcRecord`: the one-line message
(the final exception line), the whole text, the exception type, the frames (``file:func``) and,
for CUDA out-of-memory messages, the sizes the message states in any of its generations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from forensics.parsers.common.stream_text import Follower, is_border, record_starts

from forensics.lazy_re import lazy_compile

__all__ = [
    "ExcRecord",
    "exception_type",
    "frame_of",
    "oom_attrs",
    "phase_of",
    "read_cpp_terminate",
    "read_faulthandler",
    "read_python",
    "read_exception_tail",
    "read_cpp_tail",
    "is_rich_top",
    "SIGNALS",
]

#: Linux signal numbers by name, for exit codes and fatal-error texts (fixed: the analysis may run on Windows).
SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
           8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM",
           15: "SIGTERM"}
FATAL_SIGNALS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
                 "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}

MAX_RECORD_LINES = 400

_FRAME = lazy_compile(r'^File "(?P<file>[^"]*)", line (?P<line>\d+)(?:,? in(?: (?P<func>.*))?)?$')
_FRAME_JUPYTER = lazy_compile(r"^File (?P<file>[~/\\\w.:-][^\s,]*):(?P<line>\d+), in (?P<func>.*)$")
_FRAME_RICH = lazy_compile(r"^[│|]\s*(?P<file>[^\s│|]+?):(?P<line>\d+) in(?: (?P<func>[^\s│|]+))?\s*[│|]?$")
_EXC = lazy_compile(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?P<colon>:(?:\s|$))?")
_EXC_SUFFIX = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Failure", "Fault")
_CARETS = lazy_compile(r"^[\s^~]+$")
_CHAIN = ("During handling of the above exception, another exception occurred:",
          "The above exception was the direct cause of the following exception:")
_NESTED_TB = ("Original Traceback (most recent call last):", "Traceback (most recent call last):")
_RICH_TOP = lazy_compile(r"^[╭+][─-]+ ?Traceback")
_RICH_BOTTOM = lazy_compile(r"^[╰+][─-]+")
_CPP_BOILERPLATE = ("CUDA kernel errors might be asynchronously reported", "For debugging consider passing",
                    "Compile with `TORCH_USE_CUDA_DSA`", "Search for `cuda", "Exception raised from ",
                    "frame #", "Device-side assertion")


@dataclass
class ExcRecord:
    """What an exception reader found."""

    message: str
    lines: list[str]
    exc_type: str | None = None
    frames: list[str] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    cpp: bool = False

    @property
    def detail(self) -> str:
        return "\n".join(self.lines)


def exception_type(text: str) -> str | None:
    """The exception class when ``text`` (stripped) is an exception line: ``pkg.ErrType: message``."""
    m = _EXC.match(text)
    if not m:
        return None
    typ = m.group("type")
    last = typ.rsplit(".", 1)[-1]
    rest = text[m.end():]
    if m.group("colon"):
        if last[:1].isupper() or last.endswith(_EXC_SUFFIX):
            # "Note: ..." style prose would pass the case test; require a class-like name.
            if " " in typ:
                return None
            return typ
        return None
    if not rest and last.endswith(_EXC_SUFFIX) and last[:1].isupper():
        return typ  # bare "KeyboardInterrupt"
    return None


def _short_path(path: str) -> str:
    p = path.replace("\\", "/")
    for marker in ("site-packages/", "dist-packages/"):
        i = p.rfind(marker)
        if i >= 0:
            return p[i + len(marker):]
    return p


def frame_of(text: str) -> str | None:
    """``file:func`` when ``text`` (stripped) is a traceback frame line of any flavour."""
    m = _FRAME.match(text) or _FRAME_JUPYTER.match(text) or _FRAME_RICH.match(text)
    if not m:
        return None
    func = (m.group("func") or "").strip() or "?"
    return f"{_short_path(m.group('file'))}:{func}"


# -- phase and OOM ------------------------------------------------------------------------------

_PHASES = (
    ("optimizer-step", ("_multi_tensor_adam", "_single_tensor_adam", "adamw", "_maybe_opt_step", "optimizer.py:step",
                        "grad_scaler.py:step", "optim/", "exp_avg", "step_with_closure")),
    ("backward", ("run_backward", "autograd/__init__.py:backward", "_tensor.py:backward", ":backward")),
    ("load", ("from_pretrained", "load_state_dict", "load_checkpoint", "_load_", "deepspeed/__init__.py:initialize",
              "_configure_zero_optimizer", "_configure_optimizer", "dispatch_model", "load_model")),
    ("eval", ("evaluate", "evaluation_loop", "prediction_step", "generate")),
    ("forward", (":forward", "_call_impl", "scaled_dot_product_attention")),
)


def phase_of(frames: list[str]) -> str | None:
    """The training phase a traceback died in, read from its frames (innermost first)."""
    for frame in reversed(frames):
        low = frame.lower()
        for phase, needles in _PHASES:
            if any(n.lower() in low for n in needles):
                return phase
    return None


_UNITS_MIB = {"b": 1 / 2**20, "bytes": 1 / 2**20, "kib": 1 / 1024, "kb": 1 / 1024, "mib": 1.0, "mb": 1.0,
              "gib": 1024.0, "gb": 1024.0, "tib": 2.0**20, "tb": 2.0**20, "pib": 2.0**30, "eib": 2.0**40,
              "eb": 2.0**40}
_SIZE = r"([\d.]+) ?([KMGTPE]i?B|bytes|B)"
_OOM_TRIED = lazy_compile(r"Tried to allocate (?:more than )?" + _SIZE)
_OOM_OLD = lazy_compile(r"\(GPU (\d+); " + _SIZE + r" total capacity; " + _SIZE + r" already allocated; " + _SIZE
                        + r" free; (?:" + _SIZE + r" reserved in total by PyTorch|" + _SIZE + r" cached)")
_OOM_NEW = lazy_compile(r"GPU (\d+) has a total capac(?:i)?ty of " + _SIZE + r" of which " + _SIZE + r" is free")
_OOM_PROC = lazy_compile(r"this process has " + _SIZE + r" memory in use")
_OOM_OTHER = lazy_compile(r"Process (\d+) has " + _SIZE + r" memory in use")
_OOM_ALLOC = lazy_compile(r"Of the allocated memory " + _SIZE + r" is allocated by PyTorch, and " + _SIZE
                          + r" is reserved by PyTorch but unallocated")


def _mib(value: str, unit: str) -> float | None:
    try:
        return round(float(value) * _UNITS_MIB[unit.lower()], 3)
    except (ValueError, KeyError):
        return None


def oom_attrs(text: str) -> dict[str, Any]:
    """Sizes stated by a CUDA/HIP out-of-memory message, in MiB (every generation, §1.9 of the catalog)."""
    if "out of memory" not in text:
        return {}
    out: dict[str, Any] = {"oom": "hip" if "HIP out of memory" in text else "cuda"}
    m = _OOM_TRIED.search(text)
    if m:
        out["tried_mib"] = _mib(m.group(1), m.group(2))
    m = _OOM_OLD.search(text)
    if m:
        out["gpu"] = int(m.group(1))
        out["total_mib"] = _mib(m.group(2), m.group(3))
        out["allocated_mib"] = _mib(m.group(4), m.group(5))
        out["free_mib"] = _mib(m.group(6), m.group(7))
        if m.group(8):
            out["reserved_mib"] = _mib(m.group(8), m.group(9))
        elif m.group(10):
            out["reserved_mib"] = _mib(m.group(10), m.group(11))  # "cached" in the oldest generation
    m = _OOM_NEW.search(text)
    if m:
        out["gpu"] = int(m.group(1))
        out["total_mib"] = _mib(m.group(2), m.group(3))
        out["free_mib"] = _mib(m.group(4), m.group(5))
    m = _OOM_PROC.search(text)
    if m:
        out["process_mib"] = _mib(m.group(1), m.group(2))
    others = [{"pid": int(p), "mib": _mib(v, u)} for p, v, u in _OOM_OTHER.findall(text)]
    if others:
        out["other_processes"] = others
    m = _OOM_ALLOC.search(text)
    if m:
        out["allocated_mib"] = _mib(m.group(1), m.group(2))
        unalloc = _mib(m.group(3), m.group(4))
        out["reserved_unallocated_mib"] = unalloc
        if out["allocated_mib"] is not None and unalloc is not None:
            out["reserved_mib"] = round(out["allocated_mib"] + unalloc, 3)
    if out.get("total_mib") is not None:
        out["total_gib"] = round(out["total_mib"] / 1024, 3)
    return out


# -- readers ------------------------------------------------------------------------------------


def _ends_record(text: str) -> bool:
    """A line that cannot continue an exception message: another record, a bar, a border."""
    s = text.strip()
    if not s:
        return True
    if is_border(s):
        return True
    if s.startswith(("Traceback (most recent call last)", "terminate called", "Fatal Python error",
                     "slurmstepd", "srun: ")):
        return True
    if record_starts(" " + s) == [1]:
        return True
    return bool("%|" in s or ("it/s]" in s and "/" in s) or "s/it]" in s)


def read_exception_tail(first: str, follow: Follower, rec: ExcRecord, max_lines: int = 25) -> None:
    """The exception line ``first`` and its continuation lines (multi-line messages, CUDA boilerplate,
    a C++ stack), appended to ``rec``; stops at a blank line that is not followed by a C++ stack."""
    rec.lines.append(first)
    n = 0
    while n < max_lines:
        item = follow.peek()
        if item is None:
            return
        _, body = item
        s = body.text.strip()
        if not s:
            # A blank line ends the message unless a C++ stack ("Exception raised from") follows.
            follow.take()
            nxt = follow.peek()
            if nxt is not None and nxt[1].text.strip().startswith("Exception raised from "):
                rec.lines.append("")
                continue
            return
        stop = follow.starts_new(body) or s in _CHAIN or s.startswith(_NESTED_TB) or frame_of(s) or _ends_record(s)
        if stop and not s.startswith(("Exception raised from ", "frame #")):
            return
        follow.take()
        rec.lines.append(s)
        if not s.startswith("frame #"):
            n += 1
        elif len(rec.lines) > MAX_RECORD_LINES:
            return


def is_rich_top(text: str) -> bool:
    """The top border of a rich traceback box: ``╭──── Traceback (most recent call last) ────╮``."""
    return bool(_RICH_TOP.match(text))


def read_cpp_tail(follow: Follower, max_frames: int = 200) -> list[str]:
    """The lines that PyTorch prints after a CUDA/c10 error: the asynchronous-report boilerplate,
    ``Exception raised from ... (most recent call first):`` and its ``frame #N:`` lines (a blank line
    may sit before the stack). Anything else ends the tail."""
    lines: list[str] = []
    frames = 0
    while True:
        item = follow.peek()
        if item is None:
            return lines
        s = item[1].text.strip()
        if not s:
            follow.take()
            nxt = follow.peek()
            if nxt is None or not nxt[1].text.strip().startswith(_CPP_BOILERPLATE):
                return lines
            lines.append("")
            continue
        if not s.startswith(_CPP_BOILERPLATE):
            return lines
        if s.startswith("frame #"):
            frames += 1
            if frames > max_frames:
                return lines
        follow.take()
        lines.append(s)


def read_python(header: str, follow: Follower) -> ExcRecord:
    """A Python traceback from its ``Traceback (most recent call last):`` line (or a rich box's top
    border) through the final exception line, following chains and nested tracebacks."""
    rec = ExcRecord(message="", lines=[header])
    rich = is_rich_top(header)
    while len(rec.lines) < MAX_RECORD_LINES:
        item = follow.peek()
        if item is None:
            break
        _, body = item
        s = body.text.strip()
        if not s:
            follow.take()
            continue
        if follow.starts_new(body) and not rec.frames:
            break
        if _RICH_TOP.match(s):
            rich = True
            follow.take()
            rec.lines.append(s)
            continue
        if rich and _RICH_BOTTOM.match(s):
            follow.take()
            rec.lines.append(s)
            continue
        frame = frame_of(s)
        if frame:
            follow.take()
            rec.lines.append(s)
            rec.frames.append(frame)
            continue
        if s in _CHAIN or s.startswith(_NESTED_TB):
            follow.take()
            rec.lines.append(s)
            continue
        if rich and s.startswith(("│", "|")):
            follow.take()
            rec.lines.append(s)
            continue
        typ = exception_type(s)
        if typ is not None:
            follow.take()
            rec.exc_type = typ
            rec.exceptions.append(s)
            read_exception_tail(s, follow, rec)
            # A chained exception continues after a blank line and the chain marker.
            nxt = follow.peek()
            if nxt is not None and (nxt[1].text.strip() in _CHAIN or nxt[1].text.strip().startswith(_NESTED_TB)):
                continue
            break
        if _CARETS.match(s) or not rec.frames or _looks_like_source(s):
            if _ends_record(s) and not _CARETS.match(s):
                break
            follow.take()
            rec.lines.append(s)
            continue
        break
    if rec.exceptions:
        rec.message = rec.exceptions[-1]
    elif rec.frames:
        rec.message = f"Traceback (incomplete, last frame {rec.frames[-1]})"
    else:
        rec.message = "Traceback (most recent call last):"
    return rec


def _looks_like_source(s: str) -> bool:
    """A source line echoed under a frame (indentation may be lost in pasted logs)."""
    return not s.startswith(("[", "{")) or "(" in s


_INSTANCE = lazy_compile(r"terminate called after throwing an instance of '([^']*)'?")
_WHAT = lazy_compile(r"what\(\):\s*(.*)")


def read_cpp_terminate(text: str, follow: Follower | None) -> ExcRecord:
    """``terminate called after throwing an instance of 'X'`` + ``what():`` + an optional C++ stack."""
    rec = ExcRecord(message="", lines=[text], cpp=True)
    m = _INSTANCE.search(text)
    if m:
        rec.exc_type = m.group(1) or None
    what = _WHAT.search(text)
    message = what.group(1).strip() if what else ""
    if follow is not None:
        item = follow.peek()
        if item is not None and not message:
            s = item[1].text.strip()
            w = _WHAT.match(s)
            if w:
                follow.take()
                rec.lines.append(s)
                message = w.group(1).strip()
                if not message:
                    nxt = follow.peek()
                    if nxt is not None and nxt[1].text.strip() and not _ends_record(nxt[1].text):
                        follow.take()
                        message = nxt[1].text.strip()
                        rec.lines.append(message)
        if message or item is not None:
            rec.lines.extend(read_cpp_tail(follow))
    rec.frames = [_cpp_frame(s) for s in rec.lines if s.startswith("frame #")][:64]
    rec.message = message or text.strip()
    if rec.exc_type:
        rec.exceptions.append(f"{rec.exc_type}: {message}" if message else rec.exc_type)
    return rec


_CPP_FRAME = lazy_compile(r"frame #\d+: (.*?)(?: \+ 0x[0-9a-f]+)? \(0x[0-9a-f]+ in (.*)\)$")


def _cpp_frame(s: str) -> str:
    m = _CPP_FRAME.match(s)
    if not m:
        return s[:160]
    return f"{m.group(2).rsplit('/', 1)[-1]}:{m.group(1)[:160]}"


_FAULT = lazy_compile(r"Fatal Python error: (.*)")
_THREAD = lazy_compile(r"^(?:Current thread|Thread) 0x[0-9a-fA-F]+ (?:\(most recent call first\))?")


def read_faulthandler(text: str, follow: Follower) -> ExcRecord:
    """``Fatal Python error: Segmentation fault`` + the thread dumps + ``Extension modules:``."""
    m = _FAULT.search(text)
    what = m.group(1).strip() if m else text.strip()
    rec = ExcRecord(message=f"Fatal Python error: {what}", lines=[text.strip()], exc_type="Fatal Python error")
    signal = next((sig for name, sig in FATAL_SIGNALS.items() if what.startswith(name)), None)
    if signal:
        rec.attrs["signal"] = signal
    current: list[str] = []
    first_thread: list[str] = []
    in_current = False
    while len(rec.lines) < MAX_RECORD_LINES:
        item = follow.peek()
        if item is None:
            break
        s = item[1].text.strip()
        if not s:
            follow.take()
            continue
        if _THREAD.match(s):
            in_current = s.startswith("Current thread")
            follow.take()
            rec.lines.append(s)
            continue
        frame = frame_of(s)
        if frame or s == "<no Python frame>":
            follow.take()
            rec.lines.append(s)
            if frame:
                (current if in_current else first_thread).append(frame)
            continue
        if s.startswith(("Extension modules:", "Garbage-collecting", "Stack (most recent call first)")):
            follow.take()
            rec.lines.append(s)
            continue
        break
    # faulthandler lists the innermost frame first; store outermost first like a traceback.
    rec.frames = list(reversed(current or first_thread))
    rec.exceptions.append(rec.message)
    return rec


_RAISED = lazy_compile(r"Exception raised from (?P<func>\S+) at (?P<file>\S+?):(?P<line>\d+)")
_EXCERPT = "inferred from a C++ stack whose first line was not pasted"


def cpp_excerpt(lines: list[str]) -> tuple[str, str, dict[str, Any]]:
    """An ``Exception raised from … (most recent call first):`` block or a ``frame #N:`` tail whose
    head (the watchdog line, the CUDA error, the ``what():``) was cut off when it was pasted: the
    event kind, message and attrs the head would have given, read from where it was raised and the
    frames (``checkTimeout`` → a watchdog timeout, ``ncclCommWatchdog`` → the watchdog thread's
    exception, ``c10_cuda_check_implementation`` → a CUDA error, NCCL utilities → an NCCL error)."""
    raised = next((m for s in lines if (m := _RAISED.search(s))), None)
    frames = [_cpp_frame(s) for s in lines if s.startswith("frame #")][:64]
    names = " ".join(frames)
    func = raised.group("func") if raised else ""
    where = (f"raised from {func} at {raised.group('file').rsplit('/', 1)[-1]}:{raised.group('line')}"
             if raised else f"{len(frames)} frame(s)")
    note = f"{_EXCERPT}: {where}"
    attrs: dict[str, Any] = {"excerpt": True}
    if frames:
        attrs["frames"] = frames
    if func == "checkTimeout" or (not func and "checkTimeout" in names):
        attrs.update(timeout=True, exception=True, level="ERROR")
        return "c10d", f"Watchdog caught collective operation timeout ({note})", attrs
    if "c10_cuda_check" in func or "CUDAException" in (raised.group("file") if raised else "") \
            or (not func and "c10_cuda_check_implementation" in names):
        return "cuda-error", f"CUDA error, its message not pasted ({note})", attrs
    if func == "ncclCommWatchdog" or (not func and "ncclCommWatchdog" in names):
        attrs.update(exception=True, level="ERROR")
        return "c10d", f"Process group watchdog thread terminated with an exception ({note})", attrs
    if "NCCL" in func or "checkForNCCLErrors" in names or "NCCLUtils" in (raised.group("file") if raised else ""):
        attrs.update(exception=True, level="ERROR")
        return "c10d", f"NCCL error in a process group ({note})", attrs
    attrs["exc_type"] = "c10::Error"
    return "traceback", f"C++ exception ({note})", attrs
