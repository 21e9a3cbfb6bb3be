"""NCCL's message catalogue extractor (docs/catalogs.md).

Reads a snapshot of https://github.com/NVIDIA/nccl (the directory holding ``src/``) and returns one raw
entry per distinct message:

* every ``WARN(fmt, ...)`` call in ``src/`` (C/C++/CUDA sources and headers): level ``WARN``. The format is
  the call's first argument, adjacent literals joined, ``<inttypes.h>`` macros (``PRIu64`` ...) resolved,
  a macro parameter used as a string (``"Call to " name " failed"``) or stringised (``#name``) written as
  a value. NCCL prints every WARN as ``host:pid:tid [dev] file.cc:LINE NCCL WARN <text>`` (2.30.7 adds
  ``(function)`` before ``NCCL WARN``) and copies the text into ``ncclGetLastError()``, which PyTorch
  prints after ``Last error:``. A WARN run inside ``NOWARN(...)`` prints at INFO level instead; the
  extractor keeps the producer's word (``WARN``) and the rules file decides the severity.
* every text ``ncclGetErrorString()`` returns for an ``ncclResult_t`` (``src/init.cc``): level
  ``ncclResult_t``, the enum name in ``code``. Frameworks print it after ``NCCL error in: ...,`` /
  ``NCCL error:``.
* a few ``INFO(...)`` lines signatures read (``Init COMPLETE``; the ``-> N`` return-code chain): level
  ``INFO``, listed in ``_INFO_WANTED`` by a fragment of their format.

The same format at several places is one entry, placed at its first occurrence (files in sorted order).
Only texts, levels and places are taken; no code is copied.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from csource import call_args  # tools/catalogs/csource.py (build.py puts this folder on the path)

EXTENSIONS = {".cc", ".h", ".cu", ".cuh", ".c", ".cpp", ".hpp"}

# <inttypes.h> macros that appear inside NCCL's format strings (glibc, LP64).
_PRI = {
    "PRIu64": "lu", "PRId64": "ld", "PRIi64": "li", "PRIx64": "lx", "PRIX64": "lX", "PRIo64": "lo",
    "PRIu32": "u", "PRId32": "d", "PRIi32": "i", "PRIx32": "x", "PRIX32": "X",
    "PRIu16": "hu", "PRId16": "hd", "PRIx16": "hx", "PRIu8": "hhu", "PRIx8": "hhx",
    "PRIuPTR": "lu", "PRIxPTR": "lx",
}

#: INFO lines kept because a signature or the engine reads them: (pattern on the format, id summary).
_INFO_WANTED = [
    (r"parent %p.*- Init COMPLETE$", "init-complete-split"),
    (r"- Init COMPLETE$", "init-complete"),
    (r"^%s:%d (?:\(%s\) )?-> %d$", "return-code-chain"),
]

#: Older wordings of mapped messages, found by running this extractor on every release tag v2.7.3-1 ...
#: v2.29.7-1 of the same repository: (id of the message, last release printing this wording, first release
#: printing it, place in that last release, the format there). The entry's id is "<id>@<last release>".
_OLDER_FOR = "2.30.7"
_OLDER_WORDINGS: list[tuple[str, str, str, str, str]] = [
    ('nccl.net-ib.net-ib-got-completion-peer', '2.19.4', '2.18.1', 'src/transport/net_ib.cc:1333',
     'NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d '
     '(%s)%s%s%s%s'),
    ('nccl.net-ib.net-ib-got-completion-peer', '2.21.5', '2.20.3', 'src/transport/net_ib.cc:1909',
     'NET/IB : Got completion from peer %s with status=%d opcode=%d len=%d vendor err %d '
     '(%s)%s%s%s%s'),
    ('nccl.net-ib.net-ib-got-completion-peer', '2.28.3', '2.22.3', 'src/transport/net_ib.cc:2470',
     'NET/IB: Got completion from peer %s with status=%d opcode=%d len=%u vendor err %u '
     '(%s)%s%s%s%s hca %s'),
    ('nccl.net-ib.net-ib-got-completion-peer', '2.28.9', '2.28.7', 'src/transport/net_ib.cc:2543',
     'NET/IB: Got completion from peer %s with status=%s(%d) opcode=%s(%d) reqSize=%d vendor_err=%u '
     'req_type=%s%s%s%s%s hca %s'),
    ('nccl.net-ib.net-ib-got-non-fatal', '2.19.4', '2.7.3', 'src/transport/net_ib.cc:95',
     'NET/IB : Got async event : %s'),
    ('nccl.net-ib.net-ib-got-non-fatal', '2.22.3', '2.20.3', 'src/transport/net_ib.cc:103',
     'NET/IB : %s:%d Got async event : %s'),
    ('nccl.net-ib.net-ib-got-non-fatal', '2.28.3', '2.23.4', 'src/transport/net_ib.cc:212',
     'NET/IB : %s:%d Got async error event: %s'),
    ('nccl.net-ib.net-ib-async-fatal-event-cq', '2.29.7', '2.23.4', 'src/transport/net_ib/common.cc:105',
     'NET/IB : %s:%d async fatal event on CQ (%p): %s'),
    ('nccl.net-ib.net-ib-async-fatal-event-qp', '2.29.7', '2.23.4', 'src/transport/net_ib/common.cc:112',
     'NET/IB : %s:%d async fatal event on QP (%p): %s'),
    ('nccl.os.connect-failed', '2.23.4', '2.16.2', 'src/misc/socket.cc:485',
     'socketStartConnect: Connect to %s failed : %s'),
    ('nccl.os.connect-failed', '2.26.6', '2.24.3', 'src/misc/socket.cc:556',
     '%s: Connect to %s failed : %s'),
    ('nccl.os.ncclossocketpollconnect-failed-error', '2.23.4', '2.20.3', 'src/misc/socket.cc:535',
     'socketPollConnect: Connect to %s returned %d(%s) errno %d(%s)'),
    ('nccl.os.ncclossocketpollconnect-failed-error', '2.28.9', '2.27.3', 'src/misc/socket.cc:622',
     'socketPollConnect to %s failed with error %s'),
    ('nccl.socket.socketstartconnect-exceeded-retries', '2.23.4', '2.16.2', 'src/misc/socket.cc:468',
     'socketStartConnect: exceeded retries (%d)'),
    ('nccl.socket.socketstartconnect-exceeded-timeouts', '2.23.4', '2.16.2', 'src/misc/socket.cc:477',
     'socketStartConnect: exceeded timeouts (%d)'),
    ('nccl.socket.socketpollconnect-exceeded-retries', '2.23.4', '2.16.2', 'src/misc/socket.cc:518',
     'socketPollConnect: exceeded retries (%d)'),
    ('nccl.socket.socketpollconnect-exceeded-timeouts', '2.23.4', '2.16.2', 'src/misc/socket.cc:527',
     'socketPollConnect: exceeded timeouts (%d)'),
    ('nccl.os.connect-returned-exceeded-error-retry', '2.26.6', '2.24.3', 'src/misc/socket.cc:544',
     '%s: connect returned %s, exceeded error retry count (%d)'),
    ('nccl.os.ncclossocketprogressopt-call-failed', '2.23.4', '2.16.2', 'src/misc/socket.cc:30',
     'socketProgressOpt: Call to recv from %s failed : %s'),
    ('nccl.os.ncclossocketprogressopt-call-failed', '2.28.9', '2.24.3', 'src/misc/socket.cc:46',
     'socketProgressOpt: Call to %s %s failed : %s'),
    ('nccl.os.ncclossockettryaccept-accept-failed', '2.28.9', '2.18.1', 'src/misc/socket.cc:458',
     'socketTryAccept: Accept failed: %s'),
    ('nccl.enqueue.cudaarch-dynamic-smem-exceeds-device', '2.29.3', '2.26.2', 'src/enqueue.cc:71',
     'cudaArch %d ncclMaxSharedMem %d exceeds device/fn maxSharedMem %zu'),
    ('nccl.checks.call-failed', '2.22.3', '2.7.3', 'src/include/checks.h:49',
     'Call to %s failed : %s'),
    ('nccl.init.multiple-ranks-are-using-same', '2.29.7', '2.7.3', 'src/init.cc:974',
     'Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx'),
    ('nccl.net-ib.collective-mismatch-error', '2.19.4', '2.12.10', 'src/transport/net_ib.cc:1119',
     'NET/IB : req %d/%d tag %x peer %s collective mismatch error, local size %d remote size %d'),
    ('nccl.os.failed-open-libnvidia-ml-so', '2.29.7', '2.7.3', 'src/misc/nvmlwrap.cc:76',
     'Failed to open libnvidia-ml.so.1'),
    ('nccl.bootstrap.bootstrap-root-mismatch-info-procs', '2.22.3', '2.7.3', 'src/bootstrap.cc:140',
     'Bootstrap Root : mismatch in rank count from procs %d : %d'),
    ('nccl.bootstrap.bootstrap-root-mismatch-info-procs', '2.28.9', '2.23.4', 'src/bootstrap.cc:327',
     'Bootstrap Root : mismatch in info from procs, nranks %d vs %d, nroots %d vs %d, iroot %d vs %d'),
    ('nccl.os.error-failed-extend-bytes-error', '2.21.5', '2.12.7', 'src/misc/shmutils.cc:72',
     'Error: failed to extend %s to %ld bytes'),
    ('nccl.os.error-could-not-map-size', '2.21.5', '2.16.2', 'src/misc/shmutils.cc:83',
     'Could not map %s size %zi, error: %s'),
    ('nccl.info.init-complete', '2.20.5', '2.18.3', 'src/init.cc:1523',
     'comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx - Init COMPLETE'),
    ('nccl.net-ib.net-ib-got-completion-peer', '2.17.1', '2.10.3', 'src/transport/net_ib.cc:1261',
     'NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d'),
    ('nccl.net-ib.net-ib-got-completion-peer', '2.9.9', '2.7.3', 'src/transport/net_ib.cc:846',
     'NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d'),
    ('nccl.os.connect-failed', '2.15.5', '2.10.3', 'src/misc/socket.cc:456',
     'Net : Connect to %s failed : %s'),
    ('nccl.os.connect-failed', '2.9.9', '2.7.3', 'src/include/socket.h:406',
     'Connect to %s failed : %s'),
    ('nccl.os.ncclossocketprogressopt-call-failed', '2.15.5', '2.10.3', 'src/misc/socket.cc:518',
     'Net : Call to recv from %s failed : %s'),
    ('nccl.os.ncclossocketprogressopt-call-failed', '2.9.9', '2.7.3', 'src/include/socket.h:424',
     'Call to recv failed : %s'),
    ('nccl.info.init-complete', '2.15.5', '2.7.3', 'src/init.cc:1096',
     'comm %p rank %d nranks %d cudaDev %d busId %lx - Init COMPLETE'),
    ('nccl.info.init-complete', '2.18.1', '2.16.2', 'src/init.cc:1326',
     'comm %p rank %d nranks %d cudaDev %d busId %lx commId 0x%llx - Init COMPLETE'),
    ('nccl.net-socket.net-socket-peer-message-truncated', '2.12.7', '2.10.3', 'src/transport/net_socket.cc:503',
     'NET/Socket : peer %s message truncated : receiving %d bytes instead of %d'),
    ('nccl.net-socket.net-socket-peer-message-truncated', '2.26.6', '2.12.10', 'src/transport/net_socket.cc:545',
     'NET/Socket : peer %s message truncated : receiving %d bytes instead of %d. If you believe '
     'your socket network is in healthy state, \n          there may be a mismatch in collective '
     'sizes or environment settings (e.g. NCCL_PROTO, NCCL_ALGO) between ranks'),
    ('nccl.nvls.failed-bind-nvlink-sharp-nvls', '2.28.9', '2.27.3', 'src/transport/nvls.cc:285',
     "Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : CUDA error %d '%s'.\nThis "
     'is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.\nDo '
     'not force-enable NVLS (NCCL_NVLS_ENABLE=1) if you wish to avoid this error in the future.'),
]

#: The first release (among those checked) that prints the pinned wording of a message with older wordings.
_CURRENT_SINCE: dict[str, str] = {
    'nccl.bootstrap.bootstrap-root-mismatch-info-procs': '2.29.2',
    'nccl.checks.call-failed': '2.23.4',
    'nccl.enqueue.cudaarch-dynamic-smem-exceeds-device': '2.29.7',
    'nccl.info.init-complete': '2.23.4',
    'nccl.init.multiple-ranks-are-using-same': '2.30.7',
    'nccl.net-ib.net-ib-async-fatal-event-cq': '2.30.7',
    'nccl.net-ib.net-ib-async-fatal-event-qp': '2.30.7',
    'nccl.net-ib.net-ib-got-completion-peer': '2.29.2',
    'nccl.net-ib.net-ib-got-non-fatal': '2.28.7',
    'nccl.net-socket.net-socket-peer-message-truncated': '2.27.3',
    'nccl.nvls.failed-bind-nvlink-sharp-nvls': '2.29.2',
    'nccl.os.connect-failed': '2.27.3',
    'nccl.os.connect-returned-exceeded-error-retry': '2.27.3',
    'nccl.os.error-could-not-map-size': '2.22.3',
    'nccl.os.error-failed-extend-bytes-error': '2.22.3',
    'nccl.os.failed-open-libnvidia-ml-so': '2.30.7',
    'nccl.os.ncclossocketpollconnect-failed-error': '2.29.2',
    'nccl.os.ncclossocketprogressopt-call-failed': '2.29.2',
    'nccl.os.ncclossockettryaccept-accept-failed': '2.29.2',
}

# %m is glibc's strerror(errno).
_PRINTF = re.compile(r"%[-+ #0']*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|L|z|j|t|q)?[diouxXeEfFgGaAcspnm]")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "0": "\0", "a": "\a", "?": "?"}


def _strip_comments(src: str) -> str:
    """Blank out // and /* */ comments, keeping strings, character literals and line numbers."""
    out: list[str] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            i = j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch for ch in src[i:j] if ch == "\n"))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _call_args(src: str, open_paren: int) -> list[str] | None:
    """The top-level comma-separated arguments of the call whose '(' is at ``open_paren``."""
    got = call_args(src, open_paren, newline_ends_string=False)
    return got[0] if got else None


def _unescape(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x":
                m = re.match(r"[0-9a-fA-F]+", body[i + 2:])
                hx = m.group(0) if m else "0"
                out.append(chr(int(hx, 16)))
                i += 2 + len(hx)
                continue
            if nxt in "01234567" and re.match(r"[0-7]{1,3}", body[i + 1:]):
                oc = re.match(r"[0-7]{1,3}", body[i + 1:]).group(0)  # type: ignore[union-attr]
                out.append(chr(int(oc, 8)))
                i += 1 + len(oc)
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(#?\s*[A-Za-z_]\w*))', re.S)


def _format_of(arg: str, params: set[str]) -> str | None:
    """The printf format an argument spells: adjacent literals, PRI macros, macro parameters as values.

    None when the argument is not a format written in place (a variable, a function call, ...)."""
    pieces: list[str] = []
    pos, literal = 0, False
    arg = arg.strip()
    while pos < len(arg):
        m = _TOKEN.match(arg, pos)
        if not m:
            return None
        if m.group(1) is not None:
            pieces.append(_unescape(m.group(1)))
            literal = True
        else:
            word = m.group(2).replace(" ", "")
            if word in _PRI:
                pieces.append(_PRI[word])
            elif word.lstrip("#") in params:
                pieces.append("%s")  # a macro parameter spliced in as text: a value at the call site
            else:
                return None
        pos = m.end()
    return "".join(pieces) if literal else None


def to_text(fmt: str) -> str:
    """``format`` -> ``text``: each printf conversion becomes ``{}``, ``%%`` a percent, braces doubled."""
    out: list[str] = []
    i = 0
    while i < len(fmt):
        if fmt.startswith("%%", i):
            out.append("%")
            i += 2
            continue
        m = _PRINTF.match(fmt, i) if fmt[i] == "%" else None
        if m:
            out.append("{}")
            i = m.end()
            continue
        out.append({"{": "{{", "}": "}}"}.get(fmt[i], fmt[i]))
        i += 1
    return "".join(out)


def _area(rel: str) -> str:
    """The id's area from the source path (transport/net_ib/connect.cc -> net-ib)."""
    p = rel.removeprefix("src/")
    table = [
        ("transport/net_ib", "net-ib"), ("transport/net_socket", "net-socket"), ("transport/net.cc", "net"),
        ("transport/p2p", "p2p"), ("transport/shm", "shm"), ("transport/nvls", "nvls"),
        ("transport/coll_net", "collnet"), ("transport/generic", "transport"), ("transport/profiler", "profiler"),
        ("transport", "transport"), ("misc/socket", "socket"), ("misc/ibvwrap", "ibverbs"),
        ("misc/ibvsymbols", "ibverbs"), ("misc/cudawrap", "cuda"), ("misc/nvmlwrap", "nvml"),
        ("misc/gdrwrap", "gdrcopy"), ("misc/shmutils", "shm"), ("misc/ipcsocket", "ipc-socket"),
        ("misc/mlx5dv", "mlx5"), ("misc/strongstream", "stream"), ("misc/param", "param"),
        ("misc/argcheck", "argcheck"), ("misc/tuner", "tuner"), ("misc/profiler", "profiler"),
        ("misc", "misc"), ("graph/", "graph"), ("plugin/net", "plugin-net"), ("plugin/tuner", "plugin-tuner"),
        ("plugin/profiler", "plugin-profiler"), ("plugin/env", "plugin-env"), ("plugin/rma", "plugin-rma"),
        ("plugin/gin", "plugin-gin"), ("plugin", "plugin"), ("ras/", "ras"), ("register/", "register"),
        ("rma/", "rma"), ("gin/", "gin"), ("devcomm/", "devcomm"), ("device/", "device"), ("os/", "os"),
        ("param/", "param"), ("include/param", "param"), ("include/alloc", "alloc"),
        ("include/checks", "checks"), ("include/cudawrap", "cuda"), ("include/ibvwrap", "ibverbs"),
        ("include/gdrwrap", "gdrcopy"), ("include/nvmlwrap", "nvml"), ("include/socket", "socket"),
        ("include/", "include"), ("scheduler/", "scheduler"), ("bootstrap", "bootstrap"), ("proxy", "proxy"),
        ("init", "init"), ("enqueue", "enqueue"), ("group", "group"), ("collectives", "collectives"),
        ("channel", "channel"), ("transport.cc", "transport"), ("allocator", "alloc"), ("mem_manager", "alloc"),
        ("ce_coll", "ce-coll"), ("dev_runtime", "dev-runtime"), ("sym_kernels", "symmetric"),
        ("mnnvl", "mnnvl"), ("enhcompat", "compat"), ("debug", "debug"),
    ]
    for prefix, area in table:
        if p.startswith(prefix):
            return area
    return Path(p).stem.replace("_", "-")


_STOP = {"the", "a", "an", "to", "of", "for", "is", "in", "on", "at", "and", "or", "with", "by", "be", "from"}


def _slug(text: str, words: int) -> str:
    plain = text.replace("{}", " ")
    tokens = [t for t in re.split(r"[^A-Za-z0-9]+", plain.lower()) if t]
    kept = [t for t in tokens if t not in _STOP] or tokens or ["message"]
    return "-".join(kept[:words])


def _entries_in(rel: str, src: str, loc_prefix: str) -> list[tuple[int, str, str]]:
    """(line, level, format) for the WARN calls (and the wanted INFO calls) in one file."""
    code = _strip_comments(src)
    constants = {m.group(1): _unescape(m.group(2)) for m in re.finditer(
        r'(?:constexpr|const|static)[\w\s]*char\s*(?:const\s*)?\*\s*(?:const\s+)?(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*;',
        code)}
    found: list[tuple[int, str, str]] = []
    # Parameters of the #define each call sits in (a multi-line macro continues with backslashes).
    for m in re.finditer(r"(?<![\w#])(WARN|INFO|INFO_LOC)\s*\(", code):
        level = m.group(1)
        line_start = code.rfind("\n", 0, m.start()) + 1
        if re.match(r"\s*#\s*define\s+(WARN|INFO|INFO_LOC)\b", code[line_start:m.end()]):
            continue
        params = _macro_params(code, m.start())
        args = _call_args(code, m.end() - 1)
        if not args:
            continue
        fmt_arg = args[0] if level == "WARN" else (args[1] if len(args) > 1 else "")
        fmt = _format_of(fmt_arg, params)
        if fmt is None:
            continue
        if fmt == "%s" and len(args) == (2 if level == "WARN" else 3):
            # WARN("%s", kMessage) with a string constant of the same file: the constant is the text.
            fmt = constants.get(args[-1].strip(), fmt)
        if level == "INFO_LOC":  # INFO with the call site's "file:line (function) " in front
            fmt, level = loc_prefix + fmt, "INFO"
        if level == "INFO" and not any(re.search(k, fmt) for k, _ in _INFO_WANTED):
            continue
        found.append((code.count("\n", 0, m.start()) + 1, level, fmt))
    return found


def _macro_params(code: str, pos: int) -> set[str]:
    """The parameter names of the #define that ``pos`` lies in, if any."""
    start = code.rfind("\n", 0, pos) + 1
    while start > 0:
        prev_end = start - 1
        prev_start = code.rfind("\n", 0, prev_end) + 1
        if code[prev_start:prev_end].rstrip().endswith("\\"):
            start = prev_start
        else:
            break
    m = re.match(r"\s*#\s*define\s+\w+\(([^)]*)\)", code[start:])
    if not m:
        return set()
    # Only a define that really reaches pos (its lines continue with backslashes up to it).
    body = code[start:pos]
    if any(not ln.rstrip().endswith("\\") for ln in body.split("\n")[:-1]):
        return set()
    return {p.strip() for p in m.group(1).split(",") if p.strip() and p.strip() != "..."}


def _info_loc_prefix(debug_h: Path) -> str:
    """What INFO_LOC writes before the call's format (2.30: "%s:%d (%s) ": file, line, function)."""
    if debug_h.is_file():
        m = re.search(r'#define\s+INFO_LOC_FN\([^)]*\)\s*\\?\s*INFO\(\(?FLAGS\)?,\s*"((?:[^"\\]|\\.)*)"\s*fmt',
                      debug_h.read_text(errors="replace"))
        if m:
            return _unescape(m.group(1))
    return "%s:%d "


def _error_strings(src: str) -> list[tuple[int, str, str]]:
    """(line, enum name, text) for each case of ncclGetErrorString in init.cc."""
    m = re.search(r"const char\*\s*ncclGetErrorString\s*\(\s*ncclResult_t\s+\w+\s*\)\s*\{", src)
    if not m:
        return []
    end = src.find("\n}", m.end())
    body = src[m.end():end]
    base = src.count("\n", 0, m.end()) + 1
    out: list[tuple[int, str, str]] = []
    for c in re.finditer(r"(case\s+(nccl\w+)|default)\s*:\s*\n?\s*return\s+\"((?:[^\"\\]|\\.)*)\"", body):
        out.append((base + body.count("\n", 0, c.start()), c.group(2) or "default", _unescape(c.group(3))))
    return out


def _version(root: Path) -> str:
    """The snapshot's release, from makefiles/version.mk (NCCL_MAJOR / NCCL_MINOR / NCCL_PATCH)."""
    mk = root / "makefiles" / "version.mk"
    text = mk.read_text() if mk.is_file() else ""
    parts = [re.search(rf"NCCL_{k}\s*:=\s*(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


def extract(root: Path) -> list[dict[str, Any]]:
    root = Path(root)
    files = sorted(p for p in (root / "src").rglob("*") if p.is_file() and p.suffix in EXTENSIONS)
    loc_prefix = _info_loc_prefix(root / "src" / "include" / "debug.h")
    entries: list[dict[str, Any]] = []
    seen_formats: set[tuple[str, str]] = set()
    ids: set[str] = set()

    def add(entry: dict[str, Any], words: int = 5) -> None:
        base, stem = entry.pop("_base"), entry.pop("_stem")
        for n in range(words, words + 8):
            slug = _slug(entry["text"], n)
            if "-" not in slug:  # a one-word summary ("{}() failed: {}"): name the file it comes from
                slug = f"{stem}-{slug}"
            cand = f"nccl.{base}.{slug}"
            if cand not in ids:
                break
        else:
            k = 2
            while f"{cand}-{k}" in ids:
                k += 1
            cand = f"{cand}-{k}"
        ids.add(cand)
        entries.append({"id": cand, **entry})

    for path in files:
        rel = path.relative_to(root).as_posix()
        src = path.read_text(errors="replace")
        for line, level, fmt in _entries_in(rel, src, loc_prefix):
            key = (level, fmt)
            if key in seen_formats:
                continue
            seen_formats.add(key)
            text = to_text(fmt)
            base = _area(rel)
            if level == "INFO":
                summary = next(v for k, v in _INFO_WANTED if re.search(k, fmt))
                entries.append({"id": f"nccl.info.{summary}", "format": fmt, "text": text,
                                "where": f"{rel}:{line}", "level": "INFO"})
                ids.add(f"nccl.info.{summary}")
                continue
            add({"_base": base, "_stem": path.stem.replace("_", "-"), "format": fmt, "text": text,
                 "where": f"{rel}:{line}", "level": level})
    entries += _error_strings_of(root / "src" / "init.cc")
    ras = root / "src" / "ras" / "client_support.cc"
    if ras.is_file():
        for line, fmt in _ras_report_lines(ras.read_text(errors="replace")):
            add({"_base": "ras-report", "_stem": "ras", "format": fmt, "text": to_text(fmt),
                 "where": f"src/ras/client_support.cc:{line}", "level": "RAS"})
    pinned = _version(root)
    if pinned != _OLDER_FOR:
        return entries  # the older wordings below were checked against v2.30.7 only
    for entry in entries:
        if entry["id"] in _CURRENT_SINCE:
            entry["versions"] = [_CURRENT_SINCE[entry["id"]], pinned]
    current = {e["id"]: e for e in entries}
    for base, last, first, where, fmt in _OLDER_WORDINGS:
        level = current[base]["level"] if base in current else "WARN"
        entries.append({"id": f"{base}@{last}", "format": fmt, "text": to_text(fmt),
                        "where": f"{where} (v{last}-1)", "level": level, "versions": [first, last]})
    return entries


def _ras_report_lines(src: str) -> list[tuple[int, str]]:
    """(line, format) of the one-line texts the RAS client's report prints (``rasOutAppend``), level ``RAS``:
    what ``ncclras`` shows of a job's communicators (ranks with different operation counts or status,
    errors on ranks, missing and dead processes). Multi-line tables and headers are left out."""
    code = _strip_comments(src)
    found: list[tuple[int, str]] = []
    seen: set[str] = set()
    for m in re.finditer(r"(?<![\w])rasOutAppend\s*\(", code):
        args = _call_args(code, m.end() - 1)
        fmt = _format_of(args[0], set()) if args else None
        if fmt is None:
            continue
        fmt = fmt.strip("\n")
        words = re.findall(r"[A-Za-z]{3,}", to_text(fmt))
        if "\n" in fmt or fmt in seen or len(words) < 2 or fmt.lstrip().startswith(('"', "{", "}", "[", "]")):
            continue  # multi-line tables, the JSON report, a row of numbers
        seen.add(fmt)
        found.append((code.count("\n", 0, m.start()) + 1, fmt.strip()))
    return found


def _error_strings_of(init: Path) -> list[dict[str, Any]]:
    """One entry per failure text of ncclGetErrorString() (init.cc)."""
    out: list[dict[str, Any]] = []
    if not init.is_file():
        return out
    for line, name, text in _error_strings(init.read_text(errors="replace")):
        if name in ("ncclSuccess", "ncclInProgress"):
            continue  # not failures: "no error", "NCCL operation in progress"
        summary = re.sub(r"(?<!^)(?=[A-Z])", "-", name.removeprefix("nccl")).lower()
        out.append({"id": f"nccl.result.{summary}", "format": text, "text": to_text(text),
                    "where": f"src/init.cc:{line}", "level": "ncclResult_t",
                    "code": name if name != "default" else ""})
    return out


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(extract(Path(sys.argv[1])), indent=1, ensure_ascii=False))
