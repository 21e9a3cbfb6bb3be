"""The WSL2 GPU paravirtualisation driver's (dxgkrnl) message catalogue extractor (docs/catalogs.md).

Reads a snapshot of the driver's sources: either a WSL2 kernel tree (``drivers/hv/dxgkrnl/`` of
https://github.com/microsoft/WSL2-Linux-Kernel) or a directory holding the driver alone (the pinned
https://github.com/SherryPlatform/MinLin.Kernel.DirectX, which carries that directory's history). The
``.c`` files are the objects the driver's ``Makefile`` links (``dxgkrnl-y``).

What reaches the kernel log, and at which level (from the snapshot's own macros):

* ``DXG_ERR(fmt, ...)``: ``dev_err(DXGDEV, "%s: " fmt, __func__, ...)`` in release builds (``dxgkrnl.h``),
  printed as ``misc dxg: dxgk: <function>: <text>`` (``misc dxg`` is the misc device, ``dxgk: `` each
  file's ``dev_fmt``). Level ``DXG_ERR``.
* ``DXG_TRACE_IOCTL_END(ret)``: a ``DXG_ERR("Ioctl failed: %d", ret)`` when an ioctl returns a negative
  errno, so one entry per ``dxgkio_*`` handler that uses it. Level ``DXG_ERR``.
* ``pr_err`` / ``pr_warn`` / ``dev_err`` / ``dev_warn`` called directly: ``KERN_ERR`` / ``KERN_WARNING``.
* ``DXG_TRACE`` is ``trace_printk`` (and ``dev_dbg`` in DEBUG builds): never in dmesg, left out; so is
  everything under ``#ifdef DEBUG``.

``format`` is ``<function>: `` followed by the call's format (adjacent literals joined, C escapes resolved,
the trailing newline taken off): ``__func__`` is a constant of the call site, so the function name the
driver prints is written out, and a ``%s`` whose argument is ``__func__`` is written out too. The
``misc dxg: dxgk: `` prefix is left to the matcher. ``where`` is the path in the snapshot and the line of
the call. The same text twice is one entry, at its first place (files in link order). Only texts,
levels and places are taken; no code is copied.
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import Any

from csource import call_args, printf_text  # tools/catalogs/csource.py (build.py puts this folder on the path)

_LEXEME = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""", re.S)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "?": "?"}
_PRINTF = re.compile(r"%(?:%|[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|z|j|t|q)?"
                     r"(?:p[a-zA-Z]?|[diouxXeEfFgGaAcsn]))")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_CALLS = {"DXG_ERR": "DXG_ERR", "pr_err": "KERN_ERR", "pr_warn": "KERN_WARNING", "dev_err": "KERN_ERR",
          "dev_warn": "KERN_WARNING"}
# DEBUG is not defined in a release build of the driver.
_DEBUG_IF = re.compile(r"^\s*#\s*(?:ifdef\s+DEBUG\b|if\s+defined\s*\(\s*DEBUG\s*\))")
_NOT_DEBUG_IF = re.compile(r"^\s*#\s*(?:ifndef\s+DEBUG\b|if\s+!\s*defined\s*\(\s*DEBUG\s*\))")


def _strip_comments(src: str) -> str:
    def keep(m: re.Match[str]) -> str:
        s = m.group(0)
        return s if s[0] in "\"'" else "\n" * s.count("\n")
    return _LEXEME.sub(keep, src)


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), s)


def _live(code: str) -> list[bool]:
    """Per line: False in the branch of an ``#ifdef DEBUG`` / ``#ifndef DEBUG`` a release build drops."""
    lines = code.split("\n")
    out = [True] * len(lines)
    stack: list[list[bool]] = []  # [dead before #else, dead after #else, after #else yet]
    for i, line in enumerate(lines):
        if re.match(r"^\s*#\s*if", line):
            debug = bool(_DEBUG_IF.match(line))
            not_debug = bool(_NOT_DEBUG_IF.match(line))
            stack.append([debug, not_debug, False])
        elif re.match(r"^\s*#\s*(?:else|elif)\b", line) and stack:
            stack[-1][2] = True
        elif re.match(r"^\s*#\s*endif\b", line) and stack:
            stack.pop()
        out[i] = not any(frame[1] if frame[2] else frame[0] for frame in stack)
    return out


def _call_args(code: str, open_paren: int) -> list[str] | None:
    got = call_args(code, open_paren)
    return got[0] if got else None


def _functions(code: str) -> list[tuple[int, str]]:
    """(offset of the body's opening brace, name) of each function definition (kernel style: '{' in column 0)."""
    out: list[tuple[int, str]] = []
    for m in re.finditer(r"^\{", code, re.M):
        head_start = m.start()
        # the signature: the lines above, back to the one that starts in column 0
        while head_start > 0:
            prev = code.rfind("\n", 0, head_start - 1) + 1
            head_start = prev
            if code[prev:prev + 1] not in (" ", "\t", "\n") and not code.startswith("}", prev):
                break
        head = code[head_start:m.start()]
        names = re.findall(r"([A-Za-z_]\w*)\s*\(", head)
        if names:
            out.append((m.start(), names[0] if names[0] not in ("static", "inline") else names[-1]))
    return out


def _format(arg: str) -> str | None:
    parts = _STRING.findall(arg)
    if not parts or re.sub(r'"(?:[^"\\\n]|\\.)*"|\s|\\\n', "", arg):
        return None  # not a plain literal (or literals only)
    return "".join(_unescape(p) for p in parts)


def _fill_func(fmt: str, args: list[str], func: str) -> str:
    """Write out a ``%s`` whose argument is ``__func__``."""
    out, pos, k = [], 0, 0
    for m in _PRINTF.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        if m.group(0) == "%%":
            out.append("%%")
            continue
        arg = args[k].strip() if k < len(args) else ""
        k += 1
        out.append(func if m.group(0) == "%s" and arg in ("__func__", "__FUNCTION__") else m.group(0))
    out.append(fmt[pos:])
    return "".join(out)


def _text(fmt: str) -> str:
    return printf_text(fmt, _PRINTF)


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", text.replace("{}", " ").lower())
    stop = {"the", "a", "an", "of", "to", "for", "in", "on", "and", "with", "at", "from", "by", "x", "d"}
    kept = [w for w in words if w not in stop and not w.isdigit()] or ["message"]
    return "-".join(kept[:8])[:64].rstrip("-")


def _area(func: str, path: str) -> str:
    if func.startswith("dxgkio_"):
        return "ioctl"
    if func.startswith("dxgvmb") or path.endswith("dxgvmbus.c"):
        return "vmbus"
    return {"hmgr.c": "handles", "dxgsyncfile.c": "syncfile", "dxgmodule.c": "module", "dxgadapter.c": "adapter",
            "dxgprocess.c": "process"}.get(Path(path).name, "driver")


def extract(root: Path) -> list[dict[str, Any]]:
    root = root.resolve()
    base = root / "drivers" / "hv" / "dxgkrnl"
    if not base.is_dir():
        base = root
    makefile = (base / "Makefile").read_text()
    m = re.search(r"^dxgkrnl-y\s*:?=\s*(.+)$", makefile, re.M)
    objects = m.group(1).split() if m else []
    sources = [base / o.replace(".o", ".c") for o in objects if (base / o.replace(".o", ".c")).is_file()]
    header = _strip_comments((base / "dxgkrnl.h").read_text())
    # the ioctl epilogue macro: the DXG_ERR it makes on a negative return
    ioctl_end = re.search(r"#define\s+DXG_TRACE_IOCTL_END\(\w+\)(?:[^\n]*\\\n)*?[^\n]*DXG_ERR\(\s*(\"[^\n]*?\")",
                          header)
    ioctl_fmt = _format(ioctl_end.group(1)) if ioctl_end else None

    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    ids: set[str] = set()
    names = "|".join(sorted(list(_CALLS) + ["DXG_TRACE_IOCTL_END"], key=len, reverse=True))
    for path in sources:
        rel = path.relative_to(root).as_posix()
        code = _strip_comments(path.read_text(errors="replace"))
        live = _live(code)
        starts = [0] + [i + 1 for i, c in enumerate(code) if c == "\n"]
        funcs = _functions(code)
        offsets = [f[0] for f in funcs]
        for call in re.finditer(r"\b(" + names + r")\s*\(", code):
            line = bisect.bisect_right(starts, call.start())
            line_text = code[starts[line - 1]:call.start()]
            if not live[line - 1] or re.match(r"\s*#\s*define\b", line_text):
                continue
            k = bisect.bisect_right(offsets, call.start()) - 1
            if k < 0:
                continue
            func = funcs[k][1]
            args = _call_args(code, call.end() - 1)
            if args is None:
                continue
            name = call.group(1)
            if name == "DXG_TRACE_IOCTL_END":
                if ioctl_fmt is None:
                    continue
                fmt, level, rest = ioctl_fmt, "DXG_ERR", ["ret"]
            else:
                fmt_i = 1 if name.startswith("dev_") else 0
                if fmt_i >= len(args):
                    continue
                literal = _format(args[fmt_i])
                if literal is None:
                    continue
                fmt, level, rest = literal, _CALLS[name], args[fmt_i + 1:]
            fmt = _fill_func(fmt, rest, func).rstrip("\n")
            if name in ("DXG_ERR", "DXG_TRACE_IOCTL_END"):
                fmt = f"{func}: {fmt}"
            text = _text(fmt)
            if text in seen:
                continue
            seen.add(text)
            mid = f"dxgkrnl.{_area(func, rel)}.{_slug(text)}"
            n = 2
            while mid in ids:
                mid = f"dxgkrnl.{_area(func, rel)}.{_slug(text)}-{n}"
                n += 1
            ids.add(mid)
            entries.append({"id": mid, "format": fmt, "text": text, "where": f"{rel}:{line}", "level": level})
    return entries
