"""Extract PyTorch's distributed / CUDA failure messages from a PyTorch source tree (docs/catalogs.md).

Reads the files listed in ``CPP_FILES`` and ``PY_FILES`` of a checkout or export of pytorch/pytorch
(the catalogue is pinned to v2.6.0, commit 2236df1770800ffea5697b11b0bb0d910b2e59e1) and returns one raw
entry per message the code writes:

* C++: the message arguments of ``TORCH_CHECK`` / ``TORCH_CHECK_WITH`` / ``TORCH_CHECK_VALUE`` /
  ``TORCH_INTERNAL_ASSERT`` / ``C10_THROW_ERROR`` / ``C10D_THROW_ERROR`` / ``throw X(...)`` (raised),
  ``TORCH_WARN`` / ``TORCH_WARN_ONCE`` (warned), ``LOG(ERROR|WARNING|FATAL)`` / ``C10D_ERROR`` /
  ``C10D_WARNING`` and socket.cpp's ``recordError`` (logged). ``c10::str`` arguments and ``a << b`` /
  ``a + b`` operands are joined: a string literal is kept, any other operand is a value (``{}``); ``fmt::format``
  and the ``C10D_*`` log macros take a fmt string whose ``{…}`` fields are values (``C10D_*`` print
  ``[c10d] `` before it, which is not part of ``format``). A message held in a local variable (``auto msg =
  c10::str(...)``, ``ss << ...``, ``msg.append(...)``) is read where it is built and takes the level of the
  first macro in the next 60 lines that uses the variable; a string declared empty and set under a condition
  stays a value. One built in a ``return c10::str(...)`` (a message-making helper) gets the level
  ``c10::str``, a sentence kept in a variable for later (NCCL's error interpretations) ``string``; the rules
  decide.
* Python (parsed with ``ast``): ``raise X("...")`` (level ``raise``, the exception class in ``code``; a
  bare ``raise RendezvousTimeoutError`` gives the class name as the text),
  ``logger.error/exception/critical/warning(...)`` (``logging.error`` … ``logging.warning``),
  ``warnings.warn(...)``; f-strings, ``%`` and ``str.format`` values are ``{}``; a message held in a
  local variable is followed to its assignment. torchrun's failure report is read from its text
  templates, one entry per line (level ``template``), and the ``message`` its ProcessFailure shows as
  the traceback (level ``message``).

The level is the producer's construct (TORCH_CHECK, LOG(ERROR), raise …). Info-level constructs
(``LOG(INFO)``, ``C10D_INFO``, ``logger.info``) are read only where ``INFO_KEEP`` names them (flight-recorder
dumps, the elastic agent restarting a failed worker group); ``VLOG`` and debug levels never. A text with
fewer than two words of its own (a key, a repr) is left out, and so are the helpers in ``SKIP``. What each
message means for a run is decided in tools/catalogs/rules/pytorch.toml, not here. ``OLDER_WORDINGS`` holds
the messages whose wording differs in releases other than the pin (read where their ``where`` says).
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CPP_FILES = (
    "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp",
    "torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp",
    "torch/csrc/distributed/c10d/NCCLUtils.cpp",
    "torch/csrc/distributed/c10d/NCCLUtils.hpp",
    "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp",
    "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp",
    "torch/csrc/distributed/c10d/FlightRecorder.cpp",
    "torch/csrc/distributed/c10d/TraceUtils.h",
    "torch/csrc/distributed/c10d/TCPStore.cpp",
    "torch/csrc/distributed/c10d/TCPStoreBackend.cpp",
    "torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp",
    "torch/csrc/distributed/c10d/socket.cpp",
    "torch/csrc/distributed/c10d/Store.cpp",
    "torch/csrc/distributed/c10d/Utils.hpp",
    "torch/csrc/distributed/c10d/Utils.cpp",
    "c10/cuda/CUDAException.cpp",
    "c10/cuda/CUDAMiscFunctions.cpp",
    "c10/cuda/CUDADeviceAssertionHost.cpp",
    "c10/cuda/CUDAFunctions.cpp",
    "c10/cuda/CUDACachingAllocator.cpp",
    "c10/cuda/CUDAAllocatorConfig.cpp",
    "c10/cuda/driver_api.cpp",
)

PY_FILES = (
    "torch/distributed/distributed_c10d.py",
    "torch/distributed/utils.py",
    "torch/distributed/rendezvous.py",
    "torch/distributed/run.py",
    "torch/distributed/launcher/api.py",
    "torch/distributed/elastic/agent/server/api.py",
    "torch/distributed/elastic/agent/server/local_elastic_agent.py",
    "torch/distributed/elastic/multiprocessing/api.py",
    "torch/distributed/elastic/multiprocessing/errors/__init__.py",
    "torch/distributed/elastic/multiprocessing/errors/error_handler.py",
    "torch/distributed/elastic/multiprocessing/tail_log.py",
    "torch/distributed/elastic/rendezvous/api.py",
    "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py",
    "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py",
    "torch/distributed/elastic/rendezvous/etcd_rendezvous.py",
    "torch/distributed/elastic/rendezvous/etcd_rendezvous_backend.py",
    "torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py",
    "torch/distributed/elastic/rendezvous/utils.py",
    "torch/distributed/elastic/timer/api.py",
    "torch/distributed/elastic/timer/local_timer.py",
    "torch/distributed/elastic/timer/file_based_local_timer.py",
    "torch/distributed/elastic/utils/distributed.py",
    "torch/distributed/elastic/utils/store.py",
    "torch/utils/checkpoint.py",
)

AREAS = {
    "ProcessGroupNCCL": "nccl", "NCCLUtils": "nccl-utils", "ProcessGroupWrapper": "desync-check",
    "ProcessGroupGloo": "gloo", "FlightRecorder": "flight-recorder", "TraceUtils": "flight-recorder",
    "TCPStore": "store", "TCPStoreBackend": "store-server", "TCPStoreLibUvBackend": "store-libuv",
    "socket": "socket", "Store": "store", "Utils": "c10d-utils", "CUDAException": "cuda",
    "CUDAMiscFunctions": "cuda", "CUDADeviceAssertionHost": "cuda-dsa", "CUDAFunctions": "cuda",
    "CUDACachingAllocator": "alloc", "CUDAAllocatorConfig": "alloc-config", "driver_api": "cuda-driver",
    "distributed_c10d": "c10d", "utils": "c10d", "rendezvous": "c10d-init", "run": "torchrun",
    "elastic/agent": "elastic-agent", "multiprocessing/api": "elastic-mp", "tail_log": "elastic-mp",
    "errors/": "elastic-errors", "elastic/rendezvous": "rendezvous", "elastic/timer": "elastic-timer",
    "elastic/utils": "elastic-store", "launcher/": "launcher", "checkpoint": "checkpoint",
}

# Message-making helpers that build no message: the PG log prefix and object renderings.
SKIP = (
    ("ProcessGroupNCCL.cpp", "[PG ID "),
    ("ProcessGroupNCCL.cpp", "WorkNCCL("),
    ("ProcessGroupWrapper.cpp", "CollectiveFingerPrint("),
    ("TCPStore.cpp", "TCPServer("), ("TCPStore.cpp", "TCPClient("), ("TCPStore.cpp", "TCPStore("),
    ("socket.cpp", "Socket("),
)

_RAISE = ("TORCH_CHECK", "TORCH_CHECK_WITH", "TORCH_CHECK_VALUE", "TORCH_CHECK_TYPE", "TORCH_CHECK_INDEX",
          "TORCH_CHECK_NOT_IMPLEMENTED", "TORCH_INTERNAL_ASSERT", "C10_THROW_ERROR", "C10D_THROW_ERROR")
#: how many leading arguments of each macro are not the message (a condition, an exception type)
_SKIP_ARGS = {"TORCH_CHECK": 1, "TORCH_CHECK_WITH": 2, "TORCH_CHECK_VALUE": 1, "TORCH_CHECK_TYPE": 1,
              "TORCH_CHECK_INDEX": 1, "TORCH_CHECK_NOT_IMPLEMENTED": 1, "TORCH_INTERNAL_ASSERT": 1,
              "C10_THROW_ERROR": 1, "C10D_THROW_ERROR": 1, "TORCH_WARN": 0, "TORCH_WARN_ONCE": 0,
              "C10D_ERROR": 0, "C10D_WARNING": 0, "C10D_INFO": 0, "recordError": 0}
_FMT_MACROS = {"C10D_ERROR", "C10D_WARNING", "C10D_INFO", "recordError"}
#: socket.cpp's recordError() logs its fmt message with C10D_WARNING and keeps it for the error it may raise.
_LEVEL_OF = {"recordError": "C10D_WARNING"}
_INFO_LEVELS = {"LOG(INFO)", "C10D_INFO", "logging.info"}
#: The only info-level messages read: a signature's evidence or a step of a failure's story.
INFO_KEEP = re.compile(
    r"Finished writing NCCLPG debug info|Finished flight recorder successfully|dumping nccl trace to"
    r"|ProcessGroupNCCL aborts successfully|attempts left;\s*will restart worker group")
_MACRO_RE = re.compile(r"\b(" + "|".join(sorted(_SKIP_ARGS, key=len, reverse=True)) + r")\s*\(")
_LOG_RE = re.compile(r"\b(?:LOG|C10_LOG_EVERY_MS|LOG_EVERY_N)\s*\(\s*(ERROR|WARNING|FATAL|INFO)\b[^)]*\)\s*<<")
_THROW_RE = re.compile(r"\bthrow\s+((?:[A-Za-z_]\w*::)*[A-Za-z_]\w*)\s*\(")
_ASSIGN_RE = re.compile(r"(?:\b(?:std::string|auto|const auto|const std::string)\s+)?\b([A-Za-z_]\w*)\s*=\s*"
                        r"(?=(?:c10::str|fmt::format|std::string\s*\(|\")\s*)")
_STREAM_RE = re.compile(r"^[ \t]*([A-Za-z_]\w*)\s*(?:<<|\.append\()\s*(?=\")", re.M)
_RETURN_RE = re.compile(r"\breturn\s+(?=c10::str\s*\(|fmt::format\s*\(|\")")
_FMT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


# ---------------------------------------------------------------------------------------------- C++
def _blank_comments(src: str) -> str:
    """The source with comments (and line continuations) turned into spaces; offsets kept."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in src[i:j]]
            i = j
        elif src.startswith("\\\n", i):
            out[i] = " "
            i += 2
        else:
            i += 1
    return "".join(out)


def _balanced(src: str, open_at: int) -> int:
    """Index just past the bracket closing the one at ``open_at`` (strings skipped)."""
    depth, i = 0, open_at
    while i < len(src):
        c = src[i]
        if c in "\"'":
            j = i + 1
            while j < len(src) and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(src)


def _split_top(expr: str, seps: tuple[str, ...]) -> list[str]:
    parts, depth, start, i = [], 0, 0, 0
    while i < len(expr):
        c = expr[i]
        if c in "\"'":
            j = i + 1
            while j < len(expr) and expr[j] != c:
                j += 2 if expr[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            sep = next((s for s in seps if expr.startswith(s, i)), None)
            if sep and not (sep == "<" and expr.startswith("<<", i)):
                parts.append(expr[start:i])
                i += len(sep)
                start = i
                continue
        i += 1
    parts.append(expr[start:])
    return [p.strip() for p in parts if p.strip()]


_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "'": "'", "\\": "\\", "0": "\0", "r": "\r"}
_LITERALS = re.compile(r'^(?:\s*(?:u8|L|u|U)?"(?:[^"\\]|\\.)*"\s*)+$', re.S)


def _literal(expr: str) -> str | None:
    """The value of adjacent C string literals, or None when ``expr`` is not only literals."""
    if not _LITERALS.match(expr):
        return None
    chunks = re.findall(r'"((?:[^"\\]|\\.)*)"', expr, re.S)
    return "".join(re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), c) for c in chunks)


Piece = tuple[str, str]  # ("lit", text) | ("val", "")


def _fmt_pieces(fmt: str) -> list[Piece]:
    pieces: list[Piece] = []
    pos = 0
    for m in _FMT_FIELD.finditer(fmt):
        if m.start() > pos:
            pieces.append(("lit", fmt[pos:m.start()]))
        tok = m.group(0)
        pieces.append(("lit", tok[0]) if tok in ("{{", "}}") else ("val", ""))
        pos = m.end()
    if pos < len(fmt):
        pieces.append(("lit", fmt[pos:]))
    return pieces


class _CppFile:
    def __init__(self, path: str, src: str) -> None:
        self.path = path
        self.src = _blank_comments(src)
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", self.src)]
        self.used: set[int] = set()  # offsets of assignments inlined into a macro's message

    def line(self, offset: int) -> int:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def pieces(self, expr: str, at: int, depth: int = 0) -> list[Piece]:
        """The literal and value pieces of one message expression (``<<`` / ``+`` operands)."""
        out: list[Piece] = []
        for operand in _split_top(expr, ("<<", "+")):
            lit = _literal(operand)
            if lit is not None:
                out.append(("lit", lit))
                continue
            m = re.match(r"^(c10::str|fmt::format|std::string)\s*\(", operand)
            if m and _balanced(operand, m.end() - 1) == len(operand):
                args = _split_top(operand[m.end():-1], (",",))
                if m.group(1) == "fmt::format" and args and _literal(args[0]) is not None:
                    out += _fmt_pieces(_literal(args[0]) or "")
                else:
                    for a in args:
                        out += self.pieces(a, at, depth + 1)
                continue
            var = re.match(r"^([A-Za-z_]\w*)(?:\.str\(\)|\.c_str\(\))?$", operand)
            if var and depth < 3:
                found = self._assignment(var.group(1), at)
                if found is not None:
                    offset, rhs = found
                    self.used.add(offset)
                    out += self.pieces(rhs, offset, depth + 1)
                    continue
            out.append(("val", ""))
        return out

    def _assignment(self, name: str, before: int) -> tuple[int, str] | None:
        """The nearest ``name = <message expression>;`` (or ``name << ...`` stream) above ``before``."""
        window = self.src[max(0, before - 6000):before]
        base = max(0, before - 6000)
        best: tuple[int, str] | None = None
        declared_empty = re.search(r"\bstd::string\s+" + re.escape(name) + r"\s*;", window)
        for m in re.finditer(r"\b" + re.escape(name) + r"\s*=\s*(?!=)", window):
            if declared_empty and declared_empty.start() < m.start():
                continue  # declared empty, then set under a condition: a value that may be absent
            rhs_start = base + m.end()
            end = self._statement_end(rhs_start)
            rhs = self.src[rhs_start:end]
            if '"' in rhs:
                best = (base + m.start(), rhs)
        decl = list(re.finditer(r"\b(?:std::)?(?:string|stringstream|ostringstream)\s+" + re.escape(name)
                                + r"\s*;", window))
        since = decl[-1].end() if decl else 0
        streams = [base + since + m.start() for m in re.finditer(
            r"(?m)^[ \t]*" + re.escape(name) + r"\s*(?:<<|\.append\()", window[since:])]
        if streams:  # the statements of one block only (an ``if``'s or ``else``'s own appends are not)
            def indent(at: int) -> int:
                return len(re.compile(r"[ \t]*").match(self.src, at).group(0))  # type: ignore[union-attr]
            streams = [s for s in streams if indent(s) == indent(streams[0])]
        if streams and (best is None or streams[0] > best[0]):
            for s in streams:
                self.used.add(s)
            return streams[0], " << ".join(self._stream_operand(s) for s in streams)
        return best

    def _stream_operand(self, start: int) -> str:
        """What one ``name << ...;`` or ``name.append(...);`` statement adds to ``name``."""
        m = re.compile(r"[ \t]*[A-Za-z_]\w*\s*(<<|\.append\()").match(self.src, start)
        assert m is not None
        if m.group(1) == "<<":
            return self.src[m.end():self._statement_end(start)]
        return self.src[m.end():_balanced(self.src, m.end() - 1) - 1]

    def _statement_end(self, start: int) -> int:
        i = start
        while i < len(self.src):
            c = self.src[i]
            if c in "\"'(":
                i = _balanced(self.src, i) if c == "(" else self._skip_string(i)
                continue
            if c == ";":
                return i
            i += 1
        return i

    def _skip_string(self, i: int) -> int:
        q, j = self.src[i], i + 1
        while j < len(self.src) and self.src[j] != q:
            j += 2 if self.src[j] == "\\" else 1
        return j + 1

    def _level_of_use(self, name: str, after: int) -> str | None:
        """The level of the first message construct within 60 lines after ``after`` that uses ``name``."""
        stop = self.line_starts[min(len(self.line_starts) - 1, self.line(after) + 60)]
        use = re.compile(r"\b" + re.escape(name) + r"\b")
        for level, start, end in self.constructs:
            if after < start < stop and use.search(self.src[start:end]):
                return level
        return None

    def extract(self) -> Iterator[tuple[int, str, list[Piece], str | None]]:
        self.constructs: list[tuple[str, int, int]] = []
        found: list[tuple[int, str, str, str | None]] = []  # start, level, expr, code
        for m in _MACRO_RE.finditer(self.src):
            end = _balanced(self.src, m.end() - 1)
            args = _split_top(self.src[m.end():end - 1], (",",))
            name = m.group(1)
            level = _LEVEL_OF.get(name, name)
            code = args[0] if name in ("TORCH_CHECK_WITH", "C10_THROW_ERROR", "C10D_THROW_ERROR") and args else None
            body = args[_SKIP_ARGS[name]:]
            self.constructs.append((level, m.start(), end))
            if name in _FMT_MACROS and body and _literal(body[0]) is not None:
                found.append((m.start(), level, "\0fmt\0" + body[0], code))
            elif body:
                found.append((m.start(), level, " << ".join(body), code))
        for m in _LOG_RE.finditer(self.src):
            end = self._statement_end(m.end())
            level = f"LOG({m.group(1)})"
            self.constructs.append((level, m.start(), end))
            found.append((m.start(), level, self.src[m.end():end], None))
        for m in _THROW_RE.finditer(self.src):
            end = _balanced(self.src, m.end() - 1)
            args = _split_top(self.src[m.end():end - 1], (",",))
            self.constructs.append(("throw", m.start(), end))
            if args:
                found.append((m.start(), "throw", args[-1], m.group(1).split("::")[-1]))
        self.constructs.sort(key=lambda c: c[1])
        for start, level, expr, code in sorted(found):
            if expr.startswith("\0fmt\0"):
                yield start, level, _fmt_pieces(_literal(expr[5:]) or ""), code
            else:
                yield start, level, self.pieces(expr, start), code
        # Messages built into a variable (or returned by a helper) and not inlined above.
        for m in _ASSIGN_RE.finditer(self.src):
            if m.start() in self.used or m.start() in {s for s, *_ in found}:
                continue
            rhs_start = m.end()
            rhs = self.src[rhs_start:self._statement_end(rhs_start)]
            level = self._level_of_use(m.group(1), m.start())
            if level is None and _literal(rhs) is not None:
                if len((_literal(rhs) or "").split()) < 3:
                    continue  # a constant (a key, a name), not a message
                level = "string"  # a sentence kept for later use (NCCL's error interpretations)
            yield m.start(), level or "c10::str", self.pieces(rhs, m.start()), None
        for m in _STREAM_RE.finditer(self.src):
            if m.start() in self.used:
                continue
            level = self._level_of_use(m.group(1), m.start()) or "c10::str"
            yield m.start(), level, self.pieces(self._stream_operand(m.start()), m.start()), None
        for m in _RETURN_RE.finditer(self.src):
            rhs = self.src[m.end():self._statement_end(m.end())]
            yield m.start(), "c10::str", self.pieces(rhs, m.start()), None


# ------------------------------------------------------------------------------------------- Python
_PRINTF = re.compile(r"%%|%(?:\([^)]*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[sdifrxXeEgGcu]")


def _printf_pieces(fmt: str) -> list[Piece]:
    pieces: list[Piece] = []
    pos = 0
    for m in _PRINTF.finditer(fmt):
        if m.start() > pos:
            pieces.append(("lit", fmt[pos:m.start()]))
        pieces.append(("lit", "%") if m.group(0) == "%%" else ("val", ""))
        pos = m.end()
    if pos < len(fmt):
        pieces.append(("lit", fmt[pos:]))
    return pieces


class _PyFile(ast.NodeVisitor):
    LOG_METHODS = {"error": "logging.error", "exception": "logging.exception", "critical": "logging.critical",
                   "fatal": "logging.critical", "warning": "logging.warning", "warn": "logging.warning",
                   "info": "logging.info"}

    def __init__(self, path: str, src: str) -> None:
        self.path = path
        self.tree = ast.parse(src)
        self.found: list[tuple[int, str, list[Piece], str | None]] = []
        self.scopes: list[ast.AST] = [self.tree]

    def pieces(self, node: ast.AST | None, printf: bool = False, depth: int = 0) -> list[Piece]:
        if node is None:
            return []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return _printf_pieces(node.value) if printf else [("lit", node.value)]
        if isinstance(node, ast.JoinedStr):
            out: list[Piece] = []
            for v in node.values:
                out += [("lit", v.value)] if isinstance(v, ast.Constant) else [("val", "")]
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.pieces(node.left, False, depth) + self.pieces(node.right, False, depth)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            return self.pieces(node.left, True, depth)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and isinstance(node.func.value, (ast.Constant, ast.JoinedStr))):
            inner = self.pieces(node.func.value, False, depth)
            return [p for lit_or_val in inner for p in (
                _fmt_pieces(lit_or_val[1]) if lit_or_val[0] == "lit" else [lit_or_val])]
        if isinstance(node, ast.Name) and depth < 3:
            value = self._assigned(node)
            if value is not None:
                return self.pieces(value, printf, depth + 1)
        return [("val", "")]

    def _assigned(self, name: ast.Name) -> ast.AST | None:
        best: ast.AST | None = None
        for scope in self.scopes[::-1]:
            for n in ast.walk(scope):
                if (isinstance(n, ast.Assign) and n.lineno < name.lineno
                        and any(isinstance(t, ast.Name) and t.id == name.id for t in n.targets)
                        and (best is None or n.lineno > getattr(best, "lineno", 0))):
                    best = n
            if best is not None:
                return best.value  # type: ignore[attr-defined]
        return None

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scopes.append(node)
        self.generic_visit(node)
        self.scopes.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        func = exc.func if isinstance(exc, ast.Call) else exc
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if isinstance(exc, ast.Call) and exc.args:
            extra: list[Piece] = [("val", "")] * (len(exc.args) - 1)
            self.found.append((node.lineno, "raise", self.pieces(exc.args[0]) + extra, name))
        elif name and name.endswith("Error") and not name.startswith("_") and not hasattr(builtins, name) and not (
                isinstance(exc, ast.Call) and exc.keywords):
            # a bare ``raise RendezvousTimeoutError``: the log line is the class name alone
            self.found.append((node.lineno, "raise", [("lit", name)], name))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and node.args:
            recv = func.value
            recv_name = recv.id if isinstance(recv, ast.Name) else getattr(recv, "attr", "")
            if func.attr in self.LOG_METHODS and "log" in recv_name.lower():
                printf = len(node.args) > 1
                self.found.append((node.lineno, self.LOG_METHODS[func.attr], self.pieces(node.args[0], printf), None))
            elif func.attr == "warn" and recv_name == "warnings":
                self.found.append((node.lineno, "warnings.warn", self.pieces(node.args[0]), None))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0]
        # torchrun's ProcessFailure: the text its report shows as the failure's ``traceback``.
        if isinstance(target, ast.Attribute) and target.attr == "message" and isinstance(
                node.value, (ast.Constant, ast.JoinedStr)):
            self.found.append((node.lineno, "message", self.pieces(node.value), None))
        # torchrun's ChildFailedError report: module-level text templates, one message per line.
        if (isinstance(target, ast.Name) and "TEMPLATE" in target.id and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            for k, line in enumerate(node.value.value.split("\n")):
                lit = re.sub(r"\$\{\w+\}|\{\w*\}", "\0", line)
                pieces: list[Piece] = []
                for j, chunk in enumerate(lit.split("\0")):
                    if j:
                        pieces.append(("val", ""))
                    if chunk:
                        pieces.append(("lit", chunk))
                self.found.append((node.lineno + k, "template", pieces, None))
        self.generic_visit(node)


# --------------------------------------------------------------------------------------------- entries
def _text(pieces: list[Piece]) -> tuple[str, str]:
    """(format, text): ``format`` with values as ``{}`` too (the sources mix c10::str, fmt and f-strings)."""
    merged: list[Piece] = []
    for kind, value in pieces:
        if kind == "val" and merged and merged[-1][0] == "val":
            continue
        if kind == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + value)
            continue
        merged.append((kind, value))
    fmt = "".join(v if k == "lit" else "{}" for k, v in merged)
    text = "".join(v.replace("{", "{{").replace("}", "}}") if k == "lit" else "{}" for k, v in merged)
    return fmt, text


def _area(path: str) -> str:
    for key, area in AREAS.items():
        if "/" in key and key in path:
            return area
    stem = Path(path).stem
    return AREAS.get(stem, stem.lower())


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", re.sub(r"\{\}", " ", text).lower())
    stop = {"the", "a", "an", "of", "to", "is", "in", "for", "and", "be", "by", "with", "on", "at", "c10d"}
    kept = [w for w in words if w not in stop] or ["message"]
    return "-".join(kept[:6])


def _entries(root: Path) -> Iterator[dict[str, Any]]:
    for rel in CPP_FILES:
        cpp = _CppFile(rel, (root / rel).read_text(encoding="utf-8"))
        for start, level, pieces, code in cpp.extract():
            yield {"path": rel, "line": cpp.line(start), "level": level, "pieces": pieces, "code": code}
    for rel in PY_FILES:
        py = _PyFile(rel, (root / rel).read_text(encoding="utf-8"))
        py.visit(py.tree)
        for line, level, pieces, code in py.found:
            yield {"path": rel, "line": line, "level": level, "pieces": pieces, "code": code}


def extract(root: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    seen_ids: dict[str, int] = {}
    seen_msgs: set[tuple[str, str, str]] = set()
    for e in sorted(_entries(root), key=lambda e: (e["path"], e["line"])):
        fmt, text = _text(e["pieces"])
        if len(re.findall(r"[A-Za-z]{2,}", re.sub(r"\{\}", " ", text)))  < 2 and e["pieces"] != [("lit", e["code"])]:
            continue  # no words of its own (a key, a bare value, a separator)
        if e["level"] in _INFO_LEVELS and not INFO_KEEP.search(text):
            continue
        if any(e["path"].endswith(f) and fmt.lstrip("{}").startswith(s) for f, s in SKIP):
            continue
        key = ("", e["level"], text) if e["pieces"] == [("lit", e["code"])] else (e["path"], e["level"], text)
        if key in seen_msgs:
            continue  # the same message written twice in one file at one level: the first place
        seen_msgs.add(key)
        base = f"pytorch.{_area(e['path'])}.{_slug(text)}"
        n = seen_ids.get(base, 0) + 1
        seen_ids[base] = n
        entry: dict[str, Any] = {"id": base if n == 1 else f"{base}-{n}", "format": fmt, "text": text,
                                 "where": f"{e['path']}:{e['line']}", "level": e["level"]}
        if e["code"]:
            entry["code"] = e["code"]
        out.append(entry)
    return out + [dict(w) for w in OLDER_WORDINGS]


def _older(id_: str, text: str, where: str, level: str, versions: list[str]) -> dict[str, Any]:
    return {"id": id_, "format": text.replace("{{", "{").replace("}}", "}"), "text": text, "where": where,
            "level": level, "versions": versions}


_V113 = "@v1.13.1"  # Debian's pytorch_1.13.1+dfsg.orig.tar.xz, git 49444c3e546bf240bed24a101e747422d1f8a0ee
_PGNCCL = "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"

#: Wordings of releases other than the pin. ``where`` names the tree they were read in: a file and line at
#: v1.13.1, a file at a main-branch commit (the code index's copy), or a file at the releases whose
#: dated logs show the wording (no line: no tagged tree of those releases was at hand).
OLDER_WORDINGS: list[dict[str, Any]] = [
    _older("pytorch.alloc.cuda-out-memory-tried-allocate-gpu@1.13",
           "CUDA out of memory. Tried to allocate {} (GPU {}; {} total capacity; {} already allocated; {} free; {}"
           " reserved in total by PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb"
           " to avoid fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
           "c10/cuda/CUDACachingAllocator.cpp:681" + _V113, "TORCH_CHECK_WITH", ["1.13", "2.0"]),
    _older("pytorch.alloc.cuda-out-memory-tried-allocate-gpu@2.1",
           "CUDA out of memory. Tried to allocate {}. GPU {} has a total capacty of {} of which {} is free. {}Of the"
           " allocated memory {} is allocated by PyTorch, and {} is reserved by PyTorch but unallocated. If reserved"
           " but unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See"
           " documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF",
           "c10/cuda/CUDACachingAllocator.cpp@2.1 (the index's main-branch copy; 'capacty' in 2.1 logs)",
           "TORCH_CHECK_WITH", ["2.1"]),
    _older("pytorch.cuda.cuda-kernel-errors-might-asynchronously-reported@1.13",
           "\nCUDA kernel errors might be asynchronously reported at some other API call,so the stacktrace below"
           " might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
           "c10/cuda/CUDAMiscFunctions.cpp:14" + _V113, "c10::str", ["1.13"]),
    _older("pytorch.nccl.watchdog-caught-collective-operation-timeout-ran@1.13",
           "[Rank {}] Caught collective operation timeout: {} ran for {} milliseconds before timing out.",
           _PGNCCL + ":523" + _V113, "TORCH_CHECK", ["1.13"]),
    _older("pytorch.nccl.work-timed-out-blocking-wait@1.13", "Work {} timed out in call to wait().",
           _PGNCCL + ":503" + _V113, "c10::str", ["1.13"]),
    _older("pytorch.nccl.setting-up-nccl-communicator-retrieving-nccluniqueid@1.13",
           "[{}] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by"
           " key '{}', but store->get('{}') got error: ", _PGNCCL + ":1116" + _V113, "TORCH_CHECK", ["1.13"]),
    _older("pytorch.nccl.setting-up-nccl-communicator-retrieving-nccluniqueid-2@1.13",
           "[{}] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via c10d key-value store by"
           " key '{}', but store->get('{}') got error: {}", _PGNCCL + ":1125" + _V113, "TORCH_CHECK", ["1.13"]),
    _older("pytorch.nccl.unknown-exception-while-setting-up-nccl@1.13",
           "Unknown exception while [{}] is setting up NCCL communicator and retreiving ncclUniqueId from [0] via"
           " c10d key-value store by key '{}'", _PGNCCL + ":1127" + _V113, "TORCH_CHECK", ["1.13"]),
    _older("pytorch.c10d.timed-out-initializing-process-group-store@1.13",
           "Timed out initializing process group in store based barrier on rank: {}, for key: {} (world_size={},"
           " worker_count={}, timeout={})", "torch/distributed/distributed_c10d.py:346" + _V113, "raise", ["1.13"]),
    _older("pytorch.nccl.process-group-watchdog-thread-terminated-exception@2.1",
           "[Rank {}] NCCL watchdog thread terminated with exception: {}",
           _PGNCCL + "@cf1380dfb6c8552c8cdb791a85a89499775ad409", "LOG(ERROR)", ["2.1", "2.3"]),
    _older("pytorch.nccl.heartbeat-monitor-timed-out@2.2",
           "{}Heartbeat monitor timed out! Process will be terminated after dumping debug info."
           " workMetaList_.size()={}",
           _PGNCCL + "@2.2-2.3 (the index's main-branch copies; dated 2.3 logs)", "c10::str", ["2.2", "2.3"]),
    _older("pytorch.nccl.failure-detected-watchdog-work-sequence-id@2.4",
           "{}Exception (either an error or timeout) detected by watchdog at work: {}, last enqueued NCCL work: {},"
           " last completed NCCL work: {}.",
           _PGNCCL + "@2.4-2.5 (the index's main-branch copy; dated 2.4 and 2.5 logs)", "LOG(ERROR)", ["2.4", "2.5"]),
    _older("pytorch.nccl.timeout-at-nccl-work@2.4",
           "{}Timeout at NCCL work: {}, last enqueued NCCL work: {}, last completed NCCL work: {}.",
           _PGNCCL + "@2.4-2.5 (dated 2.4 and 2.5 logs)", "LOG(ERROR)", ["2.4", "2.5"]),
]
