"""The NVIDIA kernel driver's (NVRM) message catalogue extractor (docs/catalogs.md).

Reads a snapshot of https://github.com/NVIDIA/open-gpu-kernel-modules (the directory holding
``kernel-open/`` and ``src/``) and returns one raw entry per distinct message that a release build prints
to the kernel log at error or warning level. Only the files a Linux build compiles are read: the
``*_SOURCES`` lists of ``kernel-open/*/*.Kbuild`` / ``*.mk`` (nvidia, nvidia-uvm, nvidia-modeset,
nvidia-drm, nvidia-peermem) and ``src/nvidia/srcs.mk`` (the resource manager, ``nv-kernel.o``, with the
NVSwitch and NVLink libraries it links), plus the headers next to them. Lines inside an ``#if`` branch a
release build drops (``DEBUG``, ``DEVELOP``, ``QA_BUILD``, ``NV_MODS``, GSP-firmware-only code, ``#if 0``,
the ``RMCFG_*`` switches of ``src/nvidia/generated/rmconfig.h``) are skipped.

How the level is decided (from the snapshot's own print plumbing):

* Resource manager ``NV_PRINTF(level, ...)`` (also ``NV_PRINTF_COND`` / ``NV_PRINTF_EX``): ``nvDbg_Printf``
  passes a print on only when ``level >= LEVEL_ERROR`` unless the build defines ``DEBUG`` / ``DEVELOP`` /
  ``QA_BUILD`` (src/nvidia/src/kernel/diagnostics/nvlog_printf.c), so ``LEVEL_ERROR``, ``LEVEL_HW_ERROR``
  and ``LEVEL_FATAL`` are kept; ``LEVEL_WARNING``/``NOTICE``/``INFO`` reach dmesg only with an
  ``NVreg_RmMsg`` rule and are left out. The printed line is ``NVRM: [GPU<n> ]<function>: <format>``:
  the default RmMsg prefix is NVRM + GPU instance + function name; the format here is the call's own.
* ``NV_ASSERT*`` / ``NV_CHECK*`` failures print through ``nvAssert*Failed*`` / ``nvCheck*Failed*``
  (src/nvidia/src/libraries/utils/nvassert.c, strings enabled by src/nvidia/Makefile): one entry per
  format there; the ``Check failed`` ones carry level ``NV_CHECK`` (the caller's level, printed when
  ``LEVEL_ERROR`` or above).
* ``nv_printf(level, ...)`` / ``NV_DEV_PRINTF*``: printed when ``level >= (cur_debuglevel >> 4) & 3``,
  i.e. ``NV_DBG_WARNINGS`` (3) and ``NV_DBG_ERRORS`` (4) with the default ``cur_debuglevel``
  (kernel-open/nvidia/os-interface.c); ``portDbgPrintf`` prints always (level ``portDbgPrintf``).
* Xid payloads (``nvErrorLog_va`` / ``NV_ERROR_LOG*``): level ``Xid``, ``code`` the Xid number where the
  call names a constant of nverror.h. The Xid line itself (``Xid (PCI:...): %d, pid=%s, name=%s, %s%s``)
  is one more entry (level ``portDbgPrintf``).
* GSP CrashCat reports (``crashcatEnginePrintf``, ``CRASHCAT_REPORT_LOG_*``): the cause line is an Xid payload
  (level ``Xid``) prefixed with the engine name, the register and trace dump lines are ``portDbgPrintf``.
* NVSwitch ``NVSWITCH_PRINT_SXID*``: always printed (level ``SXid``, ``code`` the SXid number);
  ``NVSWITCH_PRINT`` and ``NVLINK_PRINT`` are compiled out of release builds.
* UVM: ``UVM_ERR_PRINT_ALWAYS*`` and the release asserts (``UVM_ASSERT*_RELEASE``, on by default) are
  kept; ``UVM_ERR_PRINT`` / ``UVM_DBG_PRINT`` print only with ``uvm_debug_prints=1`` (off in release).
* ``printk`` / ``pr_*`` / ``dev_*`` at ``KERN_ERR``/``KERN_WARNING`` or above, nvidia-drm
  ``NV_DRM_*LOG_ERR`` / ``_WARN`` (``DRM_ERROR``/``DRM_WARN``), nvidia-peermem ``peer_err``,
  nvidia-modeset ``nvkms_log`` at ``ERROR``/``WARN``.

A function-like macro that passes its parameters into one of these calls (``LOG_SEC_FAULT(field)``, the
Xid line's ``XID_PRINT_WITH_ATTR(attr, ...)``, CrashCat's ``CRASHCAT_LOG_LIBOS3_SOURCE(fmt, ...)``) is
expanded at each of its call sites, so the entry holds the format the site really prints.

``format`` is the format string as the call builds it (adjacent literals joined, C escapes resolved,
string macros such as ``NvU64_fmtx`` or ``NV_PCI_DEV_FMT`` resolved, a macro parameter or ``#x``
written ``%s``), with the leading ``NVRM: `` (the producer's prefix, which the matcher peels) and the
trailing newline taken off; a prefix the macro itself adds after ``NVRM:`` (``NV_DEV_PRINTF``'s
``GPU %04x:%02x:%02x.%x: ``, UVM's ``nvidia-uvm: %s:%u %s[pid:%d] ``, the SXid head) is kept. A format
that still holds newlines prints as several kernel-log lines. The same text at several places is one entry,
placed at its first occurrence (files in sorted order). ``OLDER_WORDINGS`` adds the earlier wording of
a few messages that signatures rely on, read from older release tags. Only texts, levels, codes and
places are taken; no code is copied.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from pathlib import Path
from typing import Any

from csource import call_args, printf_text  # tools/catalogs/csource.py (build.py puts this folder on the path)

# ---------------------------------------------------------------------------------------------------
# Source text helpers


_LEXEME = re.compile(r"""//[^\n]*|/\*.*?\*/|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'""", re.S)


def _strip_comments(src: str) -> str:
    """Blank out // and /* */ comments, keeping strings, character literals and line numbers."""
    def keep(m: re.Match[str]) -> str:
        s = m.group(0)
        return s if s[0] in "\"'" else "\n" * s.count("\n")
    return _LEXEME.sub(keep, src)


_TOKEN = re.compile(r"""\s*(?:(?P<num>0[xX][0-9a-fA-F]+|\d+)[uUlL]*|(?P<id>[A-Za-z_]\w*)"""
                    r"""|(?P<op>&&|\|\||==|!=|<=|>=|[()!<>]))""")


class _Cond:
    """A three-valued evaluator for #if expressions: True, False or None (cannot tell)."""

    def __init__(self, known: dict[str, int], text: str) -> None:
        self.known = known
        self.toks: list[tuple[str, str]] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                self.toks = [("bad", "")]
                break
            kind = m.lastgroup or "bad"
            self.toks.append((kind, m.group(kind)))
            pos = m.end()
        self.i = 0

    def _peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def _next(self) -> tuple[str, str]:
        t = self._peek()
        self.i += 1
        return t

    def value(self) -> bool | None:
        try:
            v = self._or()
        except (IndexError, ValueError):
            return None
        if self._peek()[0] != "end":
            return None
        return None if v is None else bool(v)

    def _or(self) -> int | None:
        v = self._and()
        while self._peek() == ("op", "||"):
            self._next()
            w = self._and()
            v = 1 if (v or w) else (None if v is None or w is None else 0)
        return v

    def _and(self) -> int | None:
        v = self._cmp()
        while self._peek() == ("op", "&&"):
            self._next()
            w = self._cmp()
            v = 0 if (v == 0 or w == 0) else (None if v is None or w is None else 1)
        return v

    def _cmp(self) -> int | None:
        v = self._unary()
        while self._peek()[0] == "op" and self._peek()[1] in ("==", "!=", "<", ">", "<=", ">="):
            op = self._next()[1]
            w = self._unary()
            if v is None or w is None:
                v = None
            else:
                v = int({"==": v == w, "!=": v != w, "<": v < w, ">": v > w, "<=": v <= w, ">=": v >= w}[op])
        return v

    def _unary(self) -> int | None:
        kind, val = self._next()
        if (kind, val) == ("op", "!"):
            v = self._unary()
            return None if v is None else int(not v)
        if (kind, val) == ("op", "("):
            v = self._or()
            if self._next() != ("op", ")"):
                raise ValueError
            return v
        if kind == "num":
            return int(val, 0)
        if kind == "id" and val == "defined":
            paren = self._peek() == ("op", "(")
            if paren:
                self._next()
            name = self._next()[1]
            if paren and self._next() != ("op", ")"):
                raise ValueError
            if name in self.known:
                return 1 if self.known[name] != -1 else 0
            return None
        if kind == "id":
            if self._peek() == ("op", "("):  # a function-like macro: UVM_IS_DEBUG()
                self._next()
                depth = 1
                while depth:
                    t = self._next()
                    if t == ("op", "("):
                        depth += 1
                    elif t == ("op", ")"):
                        depth -= 1
                    elif t[0] == "end":
                        raise ValueError
                v = self.known.get(val + "()")
                return None if v is None or v == -1 else v
            v = self.known.get(val)
            if v is None:
                return None
            return 0 if v == -1 else v
        raise ValueError


# Macros whose value in a Linux release build is known. -1 means "not defined".
_RELEASE: dict[str, int] = {
    "DEBUG": -1, "DEVELOP": -1, "QA_BUILD": -1, "NV_MODS": -1, "NV_MODS_INTERNAL": -1, "SIM_BUILD": -1,
    "GSP_PLUGIN_BUILD": -1, "NVWATCH": -1, "RM_UNITTEST": -1, "__COVERITY__": -1, "NV_WINDOWS": -1,
    "ASSERT_BUILD": -1, "NVRM": 1, "NVOS_IS_LIBOS": 0, "NVOS_IS_DCECORE": 0, "NV_PRINTF_STRINGS_ALLOWED": 1,
    "NV_PRINTF_ENABLED": 1, "NV_ASSERT_FAILED_USES_STRINGS": 1, "PORT_ASSERT_FAILED_USES_STRINGS": 1,
    "UVM_IS_DEBUG()": 0, "UVM_IS_DEVELOP()": 0, "UVM_IS_DEBUG": 0, "UVM_IS_DEVELOP": 0,
    "NV_IS_MODS": 0, "NVCPU_IS_PPC64LE": 0, "NV_VMWARE": -1, "NV_DRM_DEBUG": -1,
    "PORT_SYNC_PRINT_DEBUG_INFO": -1, "GPU_LOAD_FAILURE_TEST_SUPPORTED": -1, "_DEBUG_ONLY_": -1,
    # kernel-open/Kbuild and nvidia.Kbuild for NV_BUILD_TYPE=release
    "NDEBUG": 1, "_DEBUG": -1, "NV_MEM_LOGGER": -1, "NV_DBG_MEM": -1, "NV_DBG_EVENTS": -1, "NV_UVM_ENABLE": 1,
}


def _makefile_defines(makefile: Path) -> dict[str, int]:
    """The ``-DNAME[=N]`` flags a Makefile adds outside any ``ifeq``/``ifdef`` block."""
    out: dict[str, int] = {}
    depth = 0
    for line in makefile.read_text().splitlines():
        word = line.split()[0] if line.split() else ""
        if word in ("ifeq", "ifneq", "ifdef", "ifndef"):
            depth += 1
        elif word == "endif":
            depth = max(0, depth - 1)
        elif depth == 0:
            for m in re.finditer(r"-D(\w+)(?:=(\d+))?\b", line):
                out[m.group(1)] = int(m.group(2)) if m.group(2) else 1
    return out


def _live_lines(code: str, known: dict[str, int]) -> list[bool]:
    """For each line (0-based), whether a release build can compile it (#if branches known false are dead)."""
    lines = code.split("\n")
    live = [True] * len(lines)
    stack: list[tuple[bool, bool | None, bool]] = []  # (parent live, this branch value, some branch true)
    active = True
    i = 0
    while i < len(lines):
        line = lines[i]
        first = i
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i]
        m = re.match(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)", line)
        if m:
            kind, rest = m.group(1), m.group(2).strip()
            if kind in ("if", "ifdef", "ifndef"):
                val: bool | None
                if kind == "if":
                    val = _Cond(known, rest).value()
                else:
                    name = rest.split()[0] if rest.split() else ""
                    d = None if name not in known else known[name] != -1
                    val = d if kind == "ifdef" else (None if d is None else not d)
                stack.append((active, val, val is True))
                active = active and val is not False
            elif kind == "elif" and stack:
                parent, prev, taken = stack.pop()
                val = _Cond(known, rest).value()
                if taken:
                    val = False
                elif prev is None and val is True:
                    val = None
                stack.append((parent, val, taken or val is True))
                active = parent and val is not False
            elif kind == "else" and stack:
                parent, prev, taken = stack.pop()
                val = False if taken else (True if prev is False else None)
                stack.append((parent, val, True))
                active = parent and val is not False
            elif kind == "endif" and stack:
                active = stack.pop()[0]
        for k in range(first, i + 1):
            live[k] = active
        i += 1
    return live


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "?": "?", "e": "\x1b"}


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            d = s[i + 1]
            if d in _ESCAPES:
                out.append(_ESCAPES[d])
                i += 2
            elif d == "x":
                m = re.match(r"[0-9a-fA-F]+", s[i + 2:])
                hexd = m.group(0) if m else "0"
                out.append(chr(int(hexd, 16)))
                i += 2 + (len(m.group(0)) if m else 0)
            elif d in "01234567":
                m = re.match(r"[0-7]{1,3}", s[i + 1:])
                octd = m.group(0) if m else "0"
                out.append(chr(int(octd, 8)))
                i += 1 + len(octd)
            else:
                out.append(d)
                i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


_FMT_TOKEN = re.compile(r'\s*(?:(?:L|u8|u|U)?"(?P<str>(?:[^"\\\n]|\\.)*)"'
                        r'|(?P<hash>#\s*\w+)|(?P<id>[A-Za-z_]\w*)|(?P<paren>[()]))')

# Format macros whose value depends on the platform: their Linux LP64 kernel-build values.
_FMT_MACROS = {
    "NvU64_fmtx": "llx", "NvU64_fmtX": "llX", "NvU64_fmtu": "llu", "NvU64_fmto": "llo",
    "NvS64_fmtd": "lld", "NvS64_fmti": "lli", "NvP64_fmt": "%p",
    "NvUPtr_fmtx": "llx", "NvUPtr_fmtX": "llX", "NvUPtr_fmtu": "llu", "NvUPtr_fmto": "llo",
    "NV_FILE_FMT": "%s", "NV_FUNCTION_FMT": "%s", "NV_PCI_DEV_FMT": "%04x:%02x:%02x.%x",
    "NVLINK_PCI_DEV_FMT": "%04x:%02x:%02x.%x", "__FUNCTION__": "%s", "__func__": "%s",
    "NV_PRINTF_PREFIX": "NVRM", "NV_PRINTF_PREFIX_SEPARATOR": ": ",
}

_KERN_LEVELS = {"KERN_EMERG": 0, "KERN_ALERT": 1, "KERN_CRIT": 2, "KERN_ERR": 3, "KERN_WARNING": 4,
                "KERN_NOTICE": 5, "KERN_INFO": 6, "KERN_DEBUG": 7, "KERN_CONT": 8, "KERN_DEFAULT": 9}


def _format(arg: str, strings: dict[str, str]) -> tuple[str, list[str]] | None:
    """The format a call argument builds, and the KERN_* words it holds; None when it is not literal."""
    parts: list[str] = []
    kern: list[str] = []
    saw_literal = False
    pos = 0
    arg = re.sub(r"\\[ \t]*\n", " ", arg).strip()  # macro line continuations
    while pos < len(arg):
        m = _FMT_TOKEN.match(arg, pos)
        if not m or m.end() == pos:
            if arg[pos:].strip() == "":
                break
            return None
        pos = m.end()
        if m.group("str") is not None:
            saw_literal = True
            parts.append(_unescape(m.group("str")))
        elif m.group("hash"):
            parts.append("%s")
        elif m.group("paren"):
            continue  # NV_PRINTF_ADD_PREFIX("...") style wrappers are handled by their name below
        else:
            name = m.group("id")
            if name in _KERN_LEVELS:
                kern.append(name)
            elif name in ("NV_PRINTF_ADD_PREFIX",):
                parts.append("NVRM: ")
            elif name in _FMT_MACROS:
                parts.append(_FMT_MACROS[name])
            elif name in strings:
                parts.append(strings[name])
            else:
                parts.append("%s")  # a macro parameter or a string macro this build does not show us
    if not saw_literal:
        return None
    return "".join(parts), kern


# ``#define NAME "literal" OTHER_MACRO ...`` (the \b keeps the repetition from backtracking without end)
_STRING_DEFINE = re.compile(r'^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+'
                            r'((?:(?:[A-Za-z_]\w*\b|"(?:[^"\\\n]|\\.)*")[ \t]*)+)$', re.M)


def _string_macros(files: list[Path]) -> dict[str, str]:
    """``#define NAME "literal" ...`` across the headers: the first definition in path order wins."""
    raw: dict[str, str] = {}
    pat = _STRING_DEFINE
    for path in files:
        text = path.read_text(errors="replace")
        for m in pat.finditer(text):
            if m.group(1) not in raw and '"' in m.group(2):
                raw[m.group(1)] = m.group(2)
    out: dict[str, str] = {}
    for name in sorted(raw):
        res = _format(raw[name], {})
        if res is not None and not res[1]:
            out[name] = res[0]
    # one more pass so a macro made of other string macros resolves
    for name in sorted(raw):
        res = _format(raw[name], out)
        if res is not None and not res[1]:
            out[name] = res[0]
    return out


def _string_macros_in(code: str, strings: dict[str, str]) -> dict[str, str]:
    """The file's own ``#define NAME "literal"`` string macros (NVKMS_LOG_PREFIX ...)."""
    out: dict[str, str] = {}
    pat = _STRING_DEFINE
    for m in pat.finditer(code):
        if '"' in m.group(2):
            res = _format(m.group(2), {**strings, **out})
            if res is not None and not res[1]:
                out.setdefault(m.group(1), res[0])
    return out


def _aliases(files: list[Path], known: dict[str, int]) -> dict[str, str]:
    """``#define A B`` identifier aliases (NV_DBG_MEMINFO -> NV_DBG_INFO ...), from the branches a release keeps."""
    out: dict[str, str] = {}
    pat = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?[ \t]*([A-Za-z_]\w*)[ \t]*\)?[ \t]*$", re.M)
    for path in files:
        text = path.read_text(errors="replace")
        if "#" not in text:
            continue
        code = _strip_comments(text)
        live: list[bool] | None = None
        for m in pat.finditer(code):
            if m.group(1) in out:
                continue
            if live is None:
                live = _live_lines(code, known)
            if live[code.count("\n", 0, m.start())]:
                out[m.group(1)] = m.group(2)
    return out


def _numbers(files: list[Path], prefix: str) -> dict[str, int]:
    """``#define NAME (123)`` numeric constants whose name starts with one of ``prefix`` (a regex)."""
    out: dict[str, int] = {}
    pat = re.compile(r"^[ \t]*#[ \t]*define[ \t]+((?:" + prefix + r")\w*)[ \t]+\(?[ \t]*(0x[0-9a-fA-F]+|\d+)[uUlL]*"
                     r"[ \t]*\)?[ \t]*(?://.*|/\*.*)?$", re.M)
    for path in files:
        for m in pat.finditer(path.read_text(errors="replace")):
            out.setdefault(m.group(1), int(m.group(2), 0))
    return out


# ---------------------------------------------------------------------------------------------------
# Which files a Linux build compiles


def _kernel_open_files(root: Path) -> list[Path]:
    ko = root / "kernel-open"
    found: set[Path] = set()
    for mk in sorted(list(ko.glob("*/*.Kbuild")) + list(ko.glob("*/*.mk"))):
        for m in re.finditer(r"^\s*\w+_SOURCES\s*[+:?]?=\s*(\S+\.c)\s*$", mk.read_text(), re.M):
            p = ko / m.group(1)
            if p.is_file():
                found.add(p)
    for sub in ("nvidia", "nvidia-uvm", "nvidia-drm", "nvidia-modeset", "nvidia-peermem", "common"):
        found.update(p for p in (ko / sub).rglob("*.h"))
    return sorted(found)


def _rm_files(root: Path) -> list[Path]:
    rm = root / "src" / "nvidia"
    found: set[Path] = set()
    for m in re.finditer(r"^\s*SRCS(?:_CXX)?\s*\+=\s*(\S+)\s*$", (rm / "srcs.mk").read_text(), re.M):
        p = (rm / m.group(1)).resolve()
        if p.is_file() and not p.name.startswith("g_bindata"):  # firmware images as C arrays: no prints
            found.add(p)
    found.update(p.resolve() for p in rm.rglob("*.h"))
    for lib in ("nvswitch", "nvlink", "uproc"):
        found.update(p.resolve() for p in (root / "src" / "common" / lib).rglob("*.h"))
    return sorted(found)


def _rel(root: Path, path: Path) -> str:
    return path.resolve().relative_to(root.resolve()).as_posix()


# ---------------------------------------------------------------------------------------------------
# The print calls

_RM_LEVELS = {"LEVEL_ERROR": 4, "LEVEL_HW_ERROR": 5, "LEVEL_FATAL": 6}
_DBG_LEVELS = {"NV_DBG_WARNINGS": 3, "NV_DBG_ERRORS": 4}

# name -> (kind, index of the level argument or None, index of the format argument)
_RM_CALLS: dict[str, tuple[str, int | None, int]] = {
    "NV_PRINTF": ("rm", 0, 1),
    "NV_PRINTF_EX": ("rm-ex", 1, 2),
    "NV_PRINTF_COND": ("rm-cond", None, 3),
    "NV_ASSERT_PRINTF": ("rm-assert", 0, 1),
    "nvErrorLog_va": ("xid", None, 2),
    "NV_ERROR_LOG": ("xid", None, 2),
    "NV_ERROR_LOG_COND": ("xid", None, 2),
    "NV_ERROR_LOG_DATA": ("plain", None, 2),
    "portDbgPrintf": ("plain", None, 0),
    "nv_printf": ("dbg", 0, 1),
    "NV_DEV_PRINTF": ("dev", 0, 2),
    "NV_DEV_PRINTF_STATUS": ("dev-status", 0, 3),
    "NVSWITCH_PRINT_SXID": ("sxid", None, 2),
    "NVSWITCH_PRINT_SXID_NO_BBX": ("sxid", None, 2),
    "crashcatEnginePrintf": ("crashcat", None, 2),
}
_KO_CALLS: dict[str, tuple[str, int | None, int]] = {
    "nv_printf": ("dbg", 0, 1),
    "NV_DEV_PRINTF": ("dev", 0, 2),
    "NV_DEV_PRINTF_STATUS": ("dev-status", 0, 3),
    "printk": ("printk", None, 0),
    "printk_ratelimited": ("printk", None, 0),
    "pr_err": ("pr", None, 0), "pr_warn": ("pr", None, 0), "pr_warning": ("pr", None, 0),
    "pr_crit": ("pr", None, 0), "pr_alert": ("pr", None, 0), "pr_emerg": ("pr", None, 0),
    "pr_err_ratelimited": ("pr", None, 0), "pr_warn_ratelimited": ("pr", None, 0), "pr_warn_once": ("pr", None, 0),
    "dev_err": ("devk", None, 1), "dev_warn": ("devk", None, 1), "dev_crit": ("devk", None, 1),
    "UVM_ERR_PRINT_ALWAYS": ("uvm", None, 0), "UVM_ERR_PRINT_ALWAYS_RL": ("uvm", None, 0),
    "UVM_ASSERT_MSG_RELEASE": ("uvm-assert", None, 1),
    "NV_DRM_LOG_ERR": ("drm-err", None, 0), "NV_DRM_DEV_LOG_ERR": ("drm-dev-err", None, 1),
    "NV_DRM_LOG_WARN": ("drm-warn", None, 0), "NV_DRM_DEV_LOG_WARN": ("drm-dev-warn", None, 1),
    "peer_err": ("peer", None, 0),
    "nvkms_log": ("nvkms", 0, 2),
}
_PR_LEVEL = {"pr_err": "KERN_ERR", "pr_warn": "KERN_WARNING", "pr_warning": "KERN_WARNING", "pr_crit": "KERN_CRIT",
             "pr_alert": "KERN_ALERT", "pr_emerg": "KERN_EMERG", "pr_err_ratelimited": "KERN_ERR",
             "pr_warn_ratelimited": "KERN_WARNING", "pr_warn_once": "KERN_WARNING",
             "dev_err": "KERN_ERR", "dev_warn": "KERN_WARNING", "dev_crit": "KERN_CRIT"}
_UVM_PREFIX = "nvidia-uvm: %s:%u %s[pid:%d] "
_DEV_PREFIX = "GPU %04x:%02x:%02x.%x: "
_SXID_PREFIX = "nvidia-%s: SXid (PCI:%04x:%02x:%02x.%x): %05d, "


def _level_name(arg: str, aliases: dict[str, str]) -> str:
    name = arg.strip()
    seen = 0
    while name in aliases and seen < 5:
        name = aliases[name]
        seen += 1
    return name


def _best(names: list[str], table: dict[str, int]) -> str | None:
    hits = [n for n in names if n in table]
    return max(hits, key=lambda n: table[n]) if hits else None


class _Wrapper:
    """A function-like macro whose body makes one of the print calls with a format built from its parameters."""

    def __init__(self, name: str, params: list[str], variadic: str | None, calls: list[tuple[str, list[str]]]) -> None:
        self.name, self.params, self.variadic, self.calls = name, params, variadic, calls

    def expand(self, args: list[str]) -> list[tuple[str, list[str]]]:
        """The inner calls, with this call's arguments put in for the parameters."""
        values = {p: (args[i].strip() if i < len(args) else "") for i, p in enumerate(self.params)}
        rest = ", ".join(a.strip() for a in args[len(self.params):])

        def sub(text: str) -> str:
            def one(m: re.Match[str]) -> str:
                tok = m.group(0)
                if tok.startswith('"'):
                    return tok
                if tok.startswith("#"):
                    name = tok.lstrip("#").strip()
                    if name in values:
                        return '"' + values[name].replace("\\", "\\\\").replace('"', '\\"') + '"'
                    return tok
                if tok == "__VA_ARGS__" or (self.variadic and tok == self.variadic):
                    return rest
                return values.get(tok, tok)
            return re.sub(r'"(?:[^"\\\n]|\\.)*"|#\s*\w+|\b\w+\b', one, text)

        return [(inner, [sub(a) for a in inner_args]) for inner, inner_args in self.calls]


def _defines(code: str) -> list[tuple[int, int, str, list[str], str | None, int]]:
    """Function-like #defines: (first line, last line (1-based), name, params, variadic name, body offset)."""
    out: list[tuple[int, int, str, list[str], str | None, int]] = []
    for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\(([^)]*)\)", code, re.M):
        first = code.count("\n", 0, m.start()) + 1
        end = m.end()
        while True:
            nl = code.find("\n", end)
            if nl < 0:
                end = len(code)
                break
            if code[:nl].rstrip(" \t").endswith("\\"):
                end = nl + 1
                continue
            end = nl
            break
        last = code.count("\n", 0, end) + 1
        params, variadic = [], None
        for raw in (x.strip() for x in m.group(2).split(",")):
            if raw == "...":
                variadic = "__VA_ARGS__"
            elif raw.endswith("..."):
                variadic = raw[:-3].strip()
            elif raw:
                params.append(raw)
        out.append((first, last, m.group(1), params, variadic, m.end()))
    return out


def _call_sites(code: str, names: list[str]) -> list[tuple[str, int, list[str]]]:
    """(name, offset, arguments) of every call of one of ``names``."""
    out: list[tuple[str, int, list[str]]] = []
    if not names:
        return out
    pat = "|".join(sorted((re.escape(n) for n in names), key=len, reverse=True))
    for m in re.finditer(r"\b(" + pat + r")\s*\(", code):
        parsed = call_args(code, m.end() - 1)
        if parsed is not None:
            out.append((m.group(1), m.start(), parsed[0]))
    return out


def _wrappers(code: str, live: list[bool], table: dict[str, tuple[str, int | None, int]],
              known_wrappers: dict[str, _Wrapper]) -> dict[str, _Wrapper]:
    """The file's macros that wrap a print call (or another wrapper) with a parameter-built format."""
    found: dict[str, _Wrapper] = {}
    defs = _defines(code)
    for _ in range(3):  # wrappers of wrappers
        names = list(table) + list(known_wrappers) + list(found)
        for first, last, name, params, variadic, body in defs:
            if name in table or name in found or not live[first - 1]:
                continue
            end = body
            for _k in range(first, last + 1):
                nxt = code.find("\n", end + 1)
                end = len(code) if nxt < 0 else nxt
            body_text = code[body:end]
            calls = []
            for inner, _, args in _call_sites(body_text, names):
                words = set(re.findall(r"\w+", " ".join(args)))
                if inner != name and words & (set(params) | {"__VA_ARGS__"} | ({variadic} if variadic else set())):
                    calls.append((inner, args))
            if calls:
                found[name] = _Wrapper(name, params, variadic, calls)
    return found


def _calls(path: Path, root: Path, table: dict[str, tuple[str, int | None, int]], strings: dict[str, str],
           aliases: dict[str, str], xids: dict[str, int], sxids: dict[str, int],
           known: dict[str, int], global_wrappers: dict[str, _Wrapper]) -> list[dict[str, Any]]:
    source = path.read_text(errors="replace")
    code = _strip_comments(source)
    live = _live_lines(code, known)
    wrappers = {**global_wrappers, **_wrappers(code, live, table, global_wrappers)}
    if not any(name in source for name in list(table) + list(wrappers)):
        return []
    rel = _rel(root, path)
    local = _string_macros_in(code, strings)
    if local:
        strings = {**strings, **local}
    in_define: dict[int, tuple[str, set[str]]] = {}  # 1-based line -> (macro defined there, its parameters)
    for first, last, name, params, variadic, _ in _defines(code):
        for j in range(first, last + 1):
            in_define[j] = (name, set(params) | {"__VA_ARGS__"} | ({variadic} if variadic else set()))
    starts = [0] + [i + 1 for i, c in enumerate(code) if c == "\n"]
    out: list[dict[str, Any]] = []
    for name, offset, args in _call_sites(code, list(table) + list(wrappers)):
        line_no = bisect.bisect_right(starts, offset)
        if not live[line_no - 1]:
            continue
        if name in table and re.match(r"\s*#\s*define\s+" + re.escape(name) + r"\b",
                                      code[starts[line_no - 1]:offset + len(name)]):
            continue  # the macro's own definition
        if line_no in in_define:
            dname, dparams = in_define[line_no]
            if dname in table or set(re.findall(r"\w+", " ".join(args))) & dparams:
                continue  # inside a macro that builds the format from its parameters: its call sites count
        todo, depth = [(name, args)], 0
        while any(n in wrappers for n, _ in todo) and depth < 4:
            todo = [c for n, a in todo for c in (wrappers[n].expand(a) if n in wrappers else [(n, a)])]
            depth += 1
        for inner, inner_args in todo:
            if inner in table:
                entry = _one_call(inner, inner_args, table[inner], rel, line_no, strings, aliases, xids, sxids)
                if entry is not None:
                    out.append(entry)
    return out


def _one_call(name: str, args: list[str], spec: tuple[str, int | None, int], rel: str, line_no: int,
              strings: dict[str, str], aliases: dict[str, str], xids: dict[str, int],
              sxids: dict[str, int]) -> dict[str, Any] | None:
    kind, lvl_i, fmt_i = spec
    if fmt_i >= len(args):
        return None
    fmt_arg = args[fmt_i]
    code_val: str | None = None
    prefix = ""
    suffix = ""
    if kind in ("rm", "rm-ex", "rm-assert"):
        lv = args[lvl_i].strip() if lvl_i is not None else ""
        if kind == "rm-assert" and lv == "level":
            level = "NV_CHECK"
        else:
            level = _best(re.findall(r"\w+", lv), _RM_LEVELS) or ""
            if not level:
                return None
    elif kind == "rm-cond":
        level = _best(re.findall(r"\w+", args[1] + " " + args[2]), _RM_LEVELS) or ""
        if not level:
            return None
    elif kind in ("dbg", "dev", "dev-status"):
        lv = _level_name(args[lvl_i or 0], aliases)
        if lv not in _DBG_LEVELS:
            return None
        level = lv
        if kind == "dev":
            prefix = "NVRM: " + _DEV_PREFIX
        elif kind == "dev-status":
            prefix, suffix = "NVRM: " + _DEV_PREFIX, " (0x%x)\n"
    elif kind == "xid":
        level = "Xid"
        num = args[1].strip()
        if num in xids:
            code_val = str(xids[num])
    elif kind == "crashcat":
        level = "portDbgPrintf" if args[1].strip() in ("0", "NV_FALSE") else "Xid"
        prefix = "%s "
    elif kind == "plain":
        level = "portDbgPrintf"
        if name == "NV_ERROR_LOG_DATA":
            prefix = "NVRM: "
    elif kind == "sxid":
        level = "SXid"
        num = args[1].strip()
        if num in sxids:
            code_val = str(sxids[num])
        prefix = _SXID_PREFIX
    elif kind in ("printk", "pr", "devk"):
        level = _PR_LEVEL.get(name, "")
        if "nvidia-uvm/" in rel and kind == "pr":
            prefix = "nvidia-uvm: "
    elif kind == "uvm":
        level, prefix = "UVM_ERR_PRINT_ALWAYS", _UVM_PREFIX
    elif kind == "uvm-assert":
        level, prefix = "UVM_ASSERT_RELEASE", _UVM_PREFIX + "Assert failed, condition %s not true: "
    elif kind in ("drm-err", "drm-dev-err", "drm-warn", "drm-dev-warn"):
        level = "DRM_ERROR" if "err" in kind else "DRM_WARN"
        prefix = "[nvidia-drm] " + ("[GPU ID 0x%08x] " if "dev" in kind else "")
    elif kind == "peer":
        level, prefix = "KERN_ERR", "nvidia-peermem %s:%d ERROR "
    elif kind == "nvkms":
        lv = args[0].strip()
        if lv == "NVKMS_LOG_LEVEL_ERROR":
            level, prefix = "NVKMS_LOG_LEVEL_ERROR", "nvidia-modeset: ERROR: "
        elif lv == "NVKMS_LOG_LEVEL_WARN":
            level, prefix = "NVKMS_LOG_LEVEL_WARN", "nvidia-modeset: WARNING: "
        else:
            return None
        gp = _format(args[1], strings)
        prefix += gp[0] if gp else strings.get(args[1].strip(), "%s")
    else:
        return None
    res = _format(fmt_arg, strings)
    if res is None:
        return None
    fmt, kern = res
    if kind == "printk":
        if not kern:
            return None  # no literal level: KERN_DEFAULT or a level chosen at run time
        lv_k = min(kern, key=lambda k: _KERN_LEVELS[k])
        if _KERN_LEVELS[lv_k] > _KERN_LEVELS["KERN_WARNING"]:
            return None
        level = lv_k
    return {"format": prefix + fmt + suffix, "where": f"{rel}:{line_no}", "level": level, "code": code_val}


# ---------------------------------------------------------------------------------------------------
# Formats, texts and ids

_PRINTF = re.compile(r"%(?:%|[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|z|j|t|q|I64)?"
                     r"(?:p[a-zA-Z]?|[diouxXeEfFgGaAcsn]))")


def _clean(fmt: str) -> str:
    """The format without the NVRM prefix the matcher peels and without the line's trailing newline."""
    s = fmt
    if s.startswith("NVRM: "):
        s = s[len("NVRM: "):]
    elif s.startswith("NVRM:"):
        s = s[len("NVRM:"):]
    while s.endswith("\n"):
        s = s[:-1]
    return s


def _text(fmt: str) -> str:
    return printf_text(fmt, _PRINTF)


def _area(where: str) -> str:
    path = where.rsplit(":", 1)[0]
    parts = path.split("/")
    if parts[0] == "kernel-open":
        return {"nvidia-uvm": "uvm", "nvidia-drm": "drm", "nvidia-modeset": "modeset",
                "nvidia-peermem": "peermem"}.get(parts[1], "linux" if "nvswitch" not in path else "nvswitch")
    if parts[:2] == ["src", "common"]:
        return parts[2]
    rest = parts[2:]  # under src/nvidia
    if rest[0] == "arch":
        return "unix"
    if rest[0] == "generated":
        m = re.match(r"g_(\w+?)_nvoc", parts[-1])
        return (m.group(1) if m else "generated").replace("_", "-")
    if rest[:2] == ["src", "kernel"] and len(rest) > 3:
        sub = rest[3] if rest[2] == "gpu" and len(rest) > 4 else rest[2]
        return sub.replace("_", "-")
    if rest[:2] == ["src", "libraries"]:
        return "lib"
    if rest[0] == "inc" and "gpu" in rest and rest.index("gpu") + 2 < len(rest):
        return rest[rest.index("gpu") + 1].replace("_", "-")
    return "rm"


_STOP = {"the", "a", "an", "of", "to", "for", "in", "on", "is", "and", "with", "at", "from", "by", "be", "was",
         "this", "0x", "s", "d", "x", "u"}


def _slug(text: str) -> str:
    words = re.findall(r"[a-z0-9]+", re.sub(r"\{\}", " ", text).lower())
    kept = [w for w in words if w not in _STOP and not re.fullmatch(r"0x[0-9a-f]*|\d+", w)] or words or ["message"]
    slug = "-".join(kept[:7])
    return slug[:60].rstrip("-") or "message"


# ---------------------------------------------------------------------------------------------------
# Older wordings of messages that signatures rely on, read from older release tags of the same repository
# (git grep of each tag's src/nvidia and kernel-open). Branch numbers say where each wording was found:
# 525.147.05, 535.288.01, 545.29.06, 550.163.01, 560.35.03, 565.77, 570.211.01, 575.64.05, 580.142,
# 590.48.01 and the pinned 595.45.04. ``current`` gives the entry the snapshot itself yields its versions.
_ALL_GSP_TIMEOUT_NOW = ["570", "580", "590", "595"]
CURRENT_VERSIONS: dict[str, list[str]] = {
    "nvrm.xid.timeout-after-waiting-rpc-response-gpu-gsp": _ALL_GSP_TIMEOUT_NOW,
    "nvrm.unix.api-mismatch-client-pid-nvrm-has-version": ["575", "580", "590", "595"],
    "nvrm.gsp.gsp-timeout": ["535", "550", "560", "565", "570", "575", "580", "590", "595"],
    "nvrm.arch.failed-wait-gfw-boot-progress": ["535", "550", "560", "565", "570", "575", "580", "590", "595"],
}
OLDER_WORDINGS: list[dict[str, Any]] = [
    {"id": "nvrm.xid.timeout-after-waiting-rpc-response-gpu-gsp@535",
     "format": "Timeout after %llus of waiting for RPC response from GPU%d GSP! Expected function %d (%s) "
               "(0x%llx 0x%llx).",
     "where": "535.288.01:src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c:1735", "level": "Xid", "code": "119",
     "versions": ["535", "550", "560", "565", "575"]},
    {"id": "nvrm.xid.timeout-after-waiting-rpc-response-gpu-gsp@525",
     "format": "Timeout waiting for RPC from GSP! Expected function %d (%s) (0x%x 0x%x).",
     "where": "525.147.05:src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c:1149", "level": "Xid", "code": "119",
     "versions": ["525"]},
    {"id": "nvrm.gsp.gsp-timeout@525",
     "format": "********************************* GSP Failure **********************************",
     "where": "525.147.05:src/nvidia/src/kernel/gpu/gsp/kernel_gsp.c:1140", "level": "LEVEL_ERROR",
     "versions": ["525", "545"]},
    {"id": "nvrm.unix.api-mismatch-client-pid-nvrm-has-version@570",
     "format": "API mismatch: the client has the version %s, but\nNVRM: this kernel module has the version %s.  "
               "Please\nNVRM: make sure that this kernel module and all NVIDIA driver\nNVRM: components have the "
               "same version.",
     "where": "570.211.01:src/nvidia/arch/nvalloc/unix/src/osapi.c:1119", "level": "NV_DBG_ERRORS",
     "versions": ["525", "535", "550", "560", "565", "570"]},
    {"id": "nvrm.arch.failed-wait-gfw-boot-progress@525",
     "format": "failed to wait for GFW_BOOT: 0x%x (progress 0x%x)",
     "where": "525.147.05:src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_tu102.c:978", "level": "LEVEL_ERROR",
     "versions": ["525"]},
    {"id": "nvrm.arch.failed-wait-gfw-boot-progress@545",
     "format": "failed to wait for GFW_BOOT: 0x%x (progress 0x%x, VBIOS version %s)",
     "where": "545.29.06:src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_tu102.c:1029", "level": "LEVEL_ERROR",
     "versions": ["545"]},
]


def extract(root: Path) -> list[dict[str, Any]]:
    root = root.resolve()
    ko_files = _kernel_open_files(root)
    rm_files = _rm_files(root)
    headers = sorted(p for p in set(ko_files) | set(rm_files) | set((root / "src/common/sdk").rglob("*.h"))
                     if p.suffix == ".h")
    known = dict(_RELEASE)
    known.update(_makefile_defines(root / "src/nvidia/Makefile"))
    rmconfig = root / "src/nvidia/generated/rmconfig.h"
    if rmconfig.is_file():
        for m in re.finditer(r"^#define\s+(RMCFG_\w+)\s+(\d+)\b", rmconfig.read_text(), re.M):
            known[m.group(1)] = int(m.group(2))
    strings = _string_macros(headers)
    aliases = _aliases(headers + [p for p in ko_files if p.suffix == ".c"], known)
    xids = _numbers([root / "src/common/sdk/nvidia/inc/nverror.h"], r"ROBUST_CHANNEL_|GSP_|[A-Z]")
    sxids = _numbers(sorted((root / "src/common/nvswitch").rglob("*.h")), r"NVSWITCH_ERR_")
    found: list[dict[str, Any]] = []
    for files, table in ((ko_files, _KO_CALLS), (rm_files, _RM_CALLS)):
        global_wrappers: dict[str, _Wrapper] = {}
        for path in files:
            if path.suffix == ".h":
                text = path.read_text(errors="replace")
                if any(name in text for name in table):
                    code = _strip_comments(text)
                    global_wrappers.update(_wrappers(code, _live_lines(code, known), table, global_wrappers))
        for path in files:
            found += _calls(path, root, table, strings, aliases, xids, sxids, known, global_wrappers)

    entries: list[dict[str, Any]] = []
    by_text: dict[str, dict[str, Any]] = {}
    used: set[str] = set()
    for f in sorted(found, key=lambda f: (f["where"].rsplit(":", 1)[0], int(f["where"].rsplit(":", 1)[1]))):
        fmt = _clean(f["format"])
        if not fmt.strip():
            continue
        text = _text(fmt)
        if text in by_text:
            continue
        area = "xid" if f["level"] == "Xid" else ("sxid" if f["level"] == "SXid" else _area(f["where"]))
        base = f"nvrm.{area}.{_slug(text)}"
        mid = base if base not in used else f"{base}-{hashlib.sha1(text.encode()).hexdigest()[:6]}"
        used.add(mid)
        entry = {"id": mid, "format": fmt, "text": text, "where": f["where"], "level": f["level"]}
        if f["code"]:
            entry["code"] = f["code"]
        by_text[text] = entry
        entries.append(entry)
    ids = {e["id"]: e for e in entries}
    for cur_id, versions in CURRENT_VERSIONS.items():
        if cur_id in ids:
            ids[cur_id]["versions"] = list(versions)
    for old in OLDER_WORDINGS:
        if old["id"].split("@")[0] in ids and old["id"] not in ids:
            e = {"id": old["id"], "format": old["format"], "text": _text(old["format"]), "where": old["where"],
                 "level": old["level"]}
            if old.get("code"):
                e["code"] = old["code"]
            e["versions"] = list(old["versions"])
            entries.append(e)
    return entries
