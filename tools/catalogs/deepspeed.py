"""Extract DeepSpeed's failure messages from a snapshot of https://github.com/deepspeedai/DeepSpeed
(docs/catalogs.md), and hold the Python-source reader the accelerate, megatron and ray extractors share
(``python_messages``; they load this file by its path).

What the reader takes from a Python file (``ast``, never importing it):

* ``raise X(msg, …)`` where the message is a string literal, an f-string, a ``"…".format(…)`` or ``"…" % …``
  call, a ``+`` chain of those, or a local variable assigned one of those earlier in the same function
  (with ``+=`` pieces appended in order). Level: the exception's name. Exceptions that mean "bad argument or
  missing feature" (``ValueError``, ``TypeError``, ``NotImplementedError``, ``KeyError``, ``IndexError``,
  ``AttributeError``, ``ImportError``, ``ModuleNotFoundError``) are left out and counted.
* ``assert cond, msg`` with such a message. Level ``AssertionError``.
* ``<something named *log*>.error / .critical / .exception / .fatal / .warning / .warn(msg, …)``. Level: the
  method (``warn`` read as ``warning``). Logging ``%`` arguments become placeholders.
* ``<something named *log*>.info / log_dist / print(msg)`` only where the message matches the producer's
  ``info`` pattern (messages a signature or a user needs: DeepSpeed's OVERFLOW line). Level ``info``.
* Calls of functions named in ``keyword_calls`` with a ``message=`` keyword (Megatron's
  ``validate_result(…, message="found NaN in local grad norm …")``). Level: the function's name.

``format`` is the message as written (an f-string's text without the ``f`` and quotes, a ``+`` operand that
is not a literal written ``{expr}``); ``text`` has every value written ``{}``. A message with line breaks
is printed over several lines, and a line matcher sees one: such a message is listed by its first line
that holds 12 fixed characters (the rest is at ``where``). An argument-validation raise is kept where its
message matches the producer's ``keep`` pattern (one a signature reads, such as Accelerate's meta-device
``ValueError``).

DeepSpeed: ``deepspeed/runtime`` (not its config-parsing files), ``deepspeed/launcher``, ``deepspeed/comm``,
``deepspeed/checkpoint`` and ``deepspeed/elasticity``'s run-time parts are read; the info pattern keeps the
fp16 loss scaler's overflow lines.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

VALIDATION = frozenset({"ValueError", "TypeError", "NotImplementedError", "KeyError", "IndexError",
                        "AttributeError", "ImportError", "ModuleNotFoundError", "DeprecationWarning",
                        "StopIteration", "NotImplemented"})
LOG_LEVELS = {"error": "error", "critical": "critical", "exception": "exception", "fatal": "fatal",
              "warning": "warning", "warn": "warning"}
_PRINTF = re.compile(r"%(?:%|\([^)]*\))?[-+ #0]*(?:\d+|\*)?(?:\.\d+)?[diouxXeEfgGcrsa%]")
_FIELD = re.compile(r"\{\{|\}\}|\{[^{}]*\}")


def _esc(s: str) -> str:
    return s.replace("{", "{{").replace("}", "}}")


def _printf_text(s: str) -> str:
    out, pos = [], 0
    for m in _PRINTF.finditer(s):
        out.append(_esc(s[pos:m.start()]))
        out.append("%" if m.group() == "%%" else "{}")
        pos = m.end()
    out.append(_esc(s[pos:]))
    return "".join(out)


def _format_text(s: str) -> str:
    """A ``str.format`` template's text: every replacement field written ``{}``."""
    return _FIELD.sub(lambda m: m.group() if m.group() in ("{{", "}}") else "{}", s)


class _Msg:
    """A message as (format, text), or None where the expression is not one."""

    @staticmethod
    def of(node: ast.AST | None, names: dict[str, tuple[str, str]] | None = None,
           logging_args: bool = False) -> tuple[str, str] | None:
        names = names or {}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value, _printf_text(node.value) if logging_args else _esc(node.value))
        if isinstance(node, ast.JoinedStr):
            fmt, text = [], []
            for v in node.values:
                if isinstance(v, ast.Constant):
                    fmt.append(_esc(str(v.value)))
                    text.append(_esc(str(v.value)))
                elif isinstance(v, ast.FormattedValue):
                    fmt.append("{" + ast.unparse(v.value) + "}")
                    text.append("{}")
            return ("".join(fmt), "".join(text))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = _Msg.of(node.left, names), _Msg.of(node.right, names)
            if left is None and right is None:
                return None
            lf, lt = left or ("{" + ast.unparse(node.left) + "}", "{}")
            rf, rt = right or ("{" + ast.unparse(node.right) + "}", "{}")
            return (lf + rf, lt + rt)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant) \
                and isinstance(node.left.value, str):
            return (node.left.value, _printf_text(node.left.value))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str):
            return (node.func.value.value, _format_text(node.func.value.value))
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        return None


def _local_strings(func: ast.AST, before: int) -> dict[str, tuple[str, str]]:
    """Names assigned a message in `func` before line `before` (the last assignment wins; ``+=`` appends)."""
    found: dict[str, tuple[str, str]] = {}
    for node in sorted((n for n in ast.walk(func) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                        and n.lineno < before), key=lambda n: n.lineno):
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
            node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name):
            msg = _Msg.of(node.value, found)
            if msg:
                found[target.id] = msg
            else:
                found.pop(target.id, None)
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) \
                and node.target.id in found:
            msg = _Msg.of(node.value, found)
            if msg:
                f, t = found[node.target.id]
                found[node.target.id] = (f + msg[0], t + msg[1])
    return found


def _receiver(func: ast.expr) -> str:
    return ast.unparse(func.value) if isinstance(func, ast.Attribute) else ""


def _exc_name(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _kebab(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", re.sub(r"\{\}", " ", text.replace("'", "")).lower())
    return "-".join(words[:7]) or "message"


def _first_line(msg: tuple[str, str]) -> tuple[str, str] | None:
    """A message with line breaks is printed over several lines: its first line with 12 fixed characters."""
    fmt_lines, text_lines = msg[0].split("\n"), msg[1].split("\n")
    if len(fmt_lines) != len(text_lines):
        return None
    for f, t in zip(fmt_lines, text_lines, strict=True):
        if len(re.sub(r"\{\}", "", t).strip()) >= 12:
            return (f.strip(), t.strip())
    return None


def python_messages(root: Path, files: Iterable[Path], producer: str, area: Callable[[str], str],
                    info: re.Pattern[str] | None = None, keyword_calls: Iterable[str] = (),
                    stats: Counter[str] | None = None, keep: re.Pattern[str] | None = None) -> list[dict[str, Any]]:
    """Raw catalogue entries of `files` (paths under `root`), ids ``<producer>.<area(rel)>.<kebab>``.
    `keep`: argument-validation raises whose message matches it are kept (a signature reads them)."""
    stats = stats if stats is not None else Counter()
    kw_calls = set(keyword_calls)
    out: list[dict[str, Any]] = []
    seen: Counter[str] = Counter()
    for path in files:
        rel = path.relative_to(root).as_posix()
        try:
            tree = ast.parse(path.read_text(errors="replace"))
        except SyntaxError:
            stats["file that does not parse"] += 1
            continue
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

        def scope(line: int, funcs: list[ast.FunctionDef | ast.AsyncFunctionDef] = funcs) -> dict[str, tuple[str, str]]:
            inner = [f for f in funcs if f.lineno <= line <= (f.end_lineno or f.lineno)]
            return _local_strings(max(inner, key=lambda f: f.lineno), line) if inner else {}

        done: set[tuple[str, str]] = set()
        for node in ast.walk(tree):
            level, msg_node, logging_args = None, None, False
            if isinstance(node, ast.Raise) and node.exc is not None:
                level = _exc_name(node.exc)
                if level is None:
                    continue
                if not (isinstance(node.exc, ast.Call) and node.exc.args):
                    stats["raise without a message"] += 1
                    continue
                msg_node = node.exc.args[0]
                if level in VALIDATION:
                    kept = _Msg.of(msg_node, scope(node.lineno)) if keep is not None else None
                    if kept is None or not keep.search(kept[0]):
                        stats[f"raise {level} (argument validation)"] += 1
                        continue
            elif isinstance(node, ast.Assert):
                level, msg_node = "AssertionError", node.msg
                if msg_node is None:
                    stats["assert without a message"] += 1
                    continue
            elif isinstance(node, ast.Call):
                fname = node.func.attr if isinstance(node.func, ast.Attribute) else \
                    node.func.id if isinstance(node.func, ast.Name) else ""
                recv = _receiver(node.func).lower()
                if fname in LOG_LEVELS and "log" in recv and node.args:
                    level, msg_node, logging_args = LOG_LEVELS[fname], node.args[0], len(node.args) > 1
                elif info is not None and node.args and (fname in ("log_dist", "print", "print_rank_0") or (
                        fname == "info" and "log" in recv)):
                    level, msg_node = "info", node.args[0]
                elif fname in kw_calls:
                    kw = next((k.value for k in node.keywords if k.arg == "message"), None)
                    if kw is None:
                        continue
                    level, msg_node = fname, kw
                else:
                    continue
            else:
                continue
            msg = _Msg.of(msg_node, scope(node.lineno), logging_args)
            if msg is None:
                stats[f"{level}: message not a literal"] += 1
                continue
            if level == "info" and not (info and info.search(msg[0])):
                continue
            if "\n" in msg[1].strip():
                first = _first_line(msg)
                if first is None:
                    stats["message over several lines with no line to match"] += 1
                    continue
                stats["message over several lines, listed by its first line"] += 1
                msg = first
            if not msg[1].strip() or (level, msg[1]) in done:
                stats["empty or repeated in the same file"] += 1
                continue
            done.add((level, msg[1]))
            base = f"{producer}.{area(rel)}.{_kebab(msg[1])}"
            seen[base] += 1
            ident = base if seen[base] == 1 else f"{base}-{seen[base]}"
            out.append({"id": ident, "format": msg[0], "text": msg[1], "where": f"{rel}:{node.lineno}",
                        "level": level})
            stats["kept"] += 1
    return out


# ----------------------------------------------------------------------------------------------------------
# DeepSpeed

#: (directory under the root, files or sub-directories left out)
_DIRS: list[tuple[str, tuple[str, ...]]] = [
    ("deepspeed/runtime", ("config.py", "config_utils.py", "constants.py", "precision_config.py",
                           "zero/config.py", "zero/offload_config.py", "swap_tensor/aio_config.py",
                           "activation_checkpointing/config.py", "data_pipeline/config.py",
                           "data_pipeline/constants.py", "compression/", "domino/", "rollout/",
                           "tensor_parallel/config.py")),
    ("deepspeed/launcher", ()),
    ("deepspeed/comm", ("config.py", "constants.py")),
    ("deepspeed/checkpoint", ()),
    ("deepspeed/elasticity", ("config.py", "constants.py")),
]
#: info-level lines kept: the fp16 loss scaler's overflow and rescale notices
_INFO = re.compile(r"OVERFLOW!|loss scale overflow|Reducing dynamic loss scale")


def _files(root: Path, dirs: list[tuple[str, tuple[str, ...]]]) -> list[Path]:
    out: list[Path] = []
    for d, skip in dirs:
        base = root / d
        for p in sorted(base.rglob("*.py")) if base.is_dir() else [base]:
            rel = p.relative_to(base).as_posix()
            if any(rel == s or (s.endswith("/") and rel.startswith(s)) for s in skip) or "/tests/" in f"/{rel}":
                continue
            out.append(p)
    return out


def _area(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")[1:]
    if parts[0] == "runtime" and len(parts) > 2:
        return parts[1].replace("_", "-")  # runtime/zero/stage3.py -> zero
    if parts[0] == "runtime":
        return parts[1].replace("_", "-")  # runtime/engine.py -> engine
    return parts[0].replace("_", "-")  # launcher, comm, checkpoint, elasticity


def extract(root: Path, stats: Counter[str] | None = None) -> list[dict[str, Any]]:
    return python_messages(root, _files(root, _DIRS), "deepspeed", _area, info=_INFO, stats=stats)


if __name__ == "__main__":
    import json
    counts: Counter[str] = Counter()
    entries = extract(Path(sys.argv[1]), counts)
    if len(sys.argv) > 2 and sys.argv[2] == "--stats":
        print(json.dumps(counts, indent=1))
    else:
        json.dump(entries, sys.stdout, indent=1, ensure_ascii=False)
