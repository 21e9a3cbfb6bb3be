"""NCCL_DEBUG output: ``host:pid:tid [cudaDev] NCCL INFO|WARN ...`` lines (catalog §1.7).

Only a few INFO lines are facts worth an event (communicator init with rank, size, device and
PCI bus id; the GPU a worker's CPU affinity is set for, by its NVML number; the NCCL version;
environment echoes); the rest is chatter and stays in the file.
WARN lines are events, with the ``file.cc:line -> code`` return-code chain that follows them
folded into their detail. NCCL >= 2.26 puts ``[YYYY-MM-DD HH:MM:SS] `` before WARN lines; that
stamp is peeled off with the other logging headers (``stream_text``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from forensics.lazy_re import lazy_compile
from forensics.pci import normalize_pci

if TYPE_CHECKING:
    from forensics.ingest.textdoc import Data

__all__ = ["NcclLine", "bus_id_to_pci", "chain_code", "nccl_tests_outcome", "parse_nccl_line", "parse_nccl_tests"]

_LINE = lazy_compile(r"^(?P<host>[\w.-]+):(?P<pid>\d{1,10}):(?P<tid>\d{1,10}) \[(?P<dev>\d{1,6})\] "
                     r"(?:(?P<src>[\w./-]+:\d+) )?NCCL (?P<lv>INFO|WARN|ERROR|ABORT|TRACE) ?(?P<msg>.*)$")
_INIT = lazy_compile(r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)"
                     r"(?: nvmlDev (?P<nvml>\d+))? busId (?P<bus>[0-9a-f:.]+)")
_VERSION = lazy_compile(r"NCCL version (?P<v>[\d.]+(?:\+\S+)?)")
#: ``Setting affinity for GPU 3 to ffff,ffff``: the worker's GPU by its NVML number (not the CUDA one, which
#: ``CUDA_VISIBLE_DEVICES`` renumbers), as nvidia-smi numbers it.
_AFFINITY = lazy_compile(r"^Setting affinity for GPU (?P<nvml>\d+) to ")
_ENV = lazy_compile(r"(?P<name>NCCL_\w+) set by environment to (?P<value>.*?)\.?$")
_CHAIN = lazy_compile(r"^(?P<src>[\w./-]+:\d+) -> (?P<code>\d+)(?: \[[\w ]+\])?$")
#: NCCL result codes (nccl.h).
NCCL_RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
                4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 7: "ncclInProgress",
                8: "ncclTimeout"}


@dataclass
class NcclLine:
    """One NCCL debug line: who printed it and what it says."""

    host: str
    pid: int
    tid: int
    cuda_dev: int
    level: str
    message: str
    source: str | None
    attrs: dict[str, Any] = field(default_factory=dict)
    notable: bool = False


def bus_id_to_pci(bus: str) -> str | None:
    """NCCL's ``busId`` (``c9000``, ``0000:c9:00.0``) as a PCI address ``dddd:bb:dd.f``."""
    digits = bus.replace(":", "").replace(".", "").lower()
    if not digits or any(c not in "0123456789abcdef" for c in digits) or len(digits) < 5:
        return None
    func, dev, bus_no, domain = digits[-1], digits[-3:-1], digits[-5:-3], digits[:-5] or "0"
    try:
        return f"{int(domain, 16):04x}:{bus_no}:{dev}.{int(func, 16) & 7}"
    except ValueError:
        return None


def parse_nccl_line(text: str) -> NcclLine | None:
    """Parse one NCCL debug line (prefixes already removed); ``None`` when it is not one."""
    m = _LINE.match(text)
    if not m:
        return None
    rec = NcclLine(m.group("host"), int(m.group("pid")), int(m.group("tid")), int(m.group("dev")), m.group("lv"),
                   m.group("msg").strip(), m.group("src"))
    msg = rec.message
    rec.attrs = {"host": rec.host, "pid": rec.pid, "tid": rec.tid, "cuda_dev": rec.cuda_dev}
    if rec.source:
        rec.attrs["src"] = rec.source
    if rec.level != "INFO" and rec.level != "TRACE":
        rec.notable = True
    elif "Init COMPLETE" in msg:
        i = _INIT.search(msg)
        if i:
            rec.attrs.update(rank=int(i.group("rank")), nranks=int(i.group("nranks")), comm=i.group("comm"),
                             bus_id=i.group("bus"))
            if i.group("nvml"):
                rec.attrs["nvml_dev"] = int(i.group("nvml"))
            pci = bus_id_to_pci(i.group("bus"))
            if pci:
                rec.attrs["pci"] = pci
        rec.notable = True
    elif msg.startswith("Setting affinity for GPU") and (a := _AFFINITY.match(msg)):
        rec.attrs["nvml_dev"] = int(a.group("nvml"))
        rec.notable = True
    elif "NCCL version" in msg:
        v = _VERSION.search(msg)
        if v:
            rec.attrs["version"] = v.group("v")
        rec.notable = True
    elif "set by environment to" in msg:
        e = _ENV.search(msg)
        if e:
            rec.attrs["env"] = e.group("name")
            rec.attrs["value"] = e.group("value")
        rec.notable = True
    return rec


def chain_code(rec: NcclLine) -> int | None:
    """The result code of an error-propagation line ``INFO file.cc:123 -> 6``; ``None`` otherwise."""
    if rec.level != "INFO":
        return None
    m = _CHAIN.match(rec.message)
    return int(m.group("code")) if m else None


_TESTS_HEAD = lazy_compile(r"^# nThread (\d+) nGpus (\d+) minBytes (\d+) maxBytes (\d+)")
_TESTS_FAIL = lazy_compile(r"Test (?:CUDA |NCCL )?failure (\S+)(?: '([^']*)')?")


#: One nccl-tests result row: size, count, type, then redop and/or root, then time/algbw/busbw (any
#: prefix before it: mpirun tags, ``srun -l`` labels). Its presence means collectives completed.
_TESTS_ROW = lazy_compile(
    rb"(?m)^[^\n]{0,60}?\s(\d+)\s+\d+\s+(?:float|double|half|bfloat16|int8|uint8|int32|uint32|int64|uint64|"
    rb"fp8_e4m3|fp8_e5m2|char|int|uint)\s+(?:[a-z]+\s+)?-?\d+\s+[\d.]+\s+[\d.]+\s+[\d.]+"
)
_TESTS_PASSED = lazy_compile(rb"Out of bounds values\s*:\s*0\s+OK")
_MAX_ROWS = 10_000


#: One line of the header's device list (``#  Rank  0 Group  0 Pid 78 on host device  0 [0x07] …``).
_TESTS_RANK = lazy_compile(rb"(?m)^[^\n]{0,60}?Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s")
#: The same line's rank, CUDA device and bus (``[0x07]``: the bus number; ``[0000:2c:00]``: the address).
_TESTS_DEVICE = lazy_compile(rb"Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S+\s+device\s+(\d+)\s+"
                             rb"\[(0x[0-9a-fA-F]{1,2}|[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)\]")
_DEVICE_LIST_BYTES = 1 << 20
#: How far after its header a run's rows and summary are looked for (a whole sweep is a few hundred
#: rows; without a bound a header early in a 20 GB log would have the rest of it searched twice).
_OUTCOME_BYTES = 64 << 20


def nccl_tests_outcome(data: Data, start: int, expected_ranks: int = 0) -> dict[str, Any]:
    """What followed an nccl-tests header at byte ``start``: how many result rows (capped), whether the
    ``Out of bounds values : 0 OK`` summary was printed, and whether the device list was cut. A header with
    no row after it is a run that never finished one collective (a hang, or output cut right there).
    nccl-tests prints its device list in one piece, every thread's and GPU's rank (at least ``nThread ×
    nGpus`` = ``expected_ranks``): fewer lines than that is a paste cut inside the list, not a hang."""
    rows = 0
    end = start + _OUTCOME_BYTES
    for _ in _TESTS_ROW.finditer(data, start, end):
        rows += 1
        if rows >= _MAX_ROWS:
            break
    listed = 0
    devices: list[dict[str, Any]] = []
    for m in _TESTS_RANK.finditer(data, start, start + _DEVICE_LIST_BYTES):
        listed += 1
        line_end = data.find(b"\n", m.end())
        d = _TESTS_DEVICE.search(data, m.start(), line_end if line_end >= 0 else len(data))
        if d is not None and listed <= max(expected_ranks, 1) and len(devices) < 64:
            bus = d.group(3).decode()
            pci = f"0000:{int(bus, 16):02x}:00.0" if bus.startswith("0x") else normalize_pci(bus)
            devices.append({"rank": int(d.group(1)), "device": int(d.group(2)), "pci": pci})
    out: dict[str, Any] = {"result_rows": rows, "passed": _TESTS_PASSED.search(data, start, end) is not None,
                           "device_list_cut": rows == 0 and 0 < listed < expected_ranks}
    if devices and len(devices) == listed:
        out["devices"] = devices
    return out


def parse_nccl_tests(text: str) -> tuple[str, dict[str, Any], bool] | None:
    """An nccl-tests header or failure line: (message, attrs, is_error)."""
    m = _TESTS_HEAD.match(text)
    if m:
        return text, {"tool": "nccl-tests", "nthread": int(m.group(1)), "ngpus": int(m.group(2))}, False
    m = _TESTS_FAIL.search(text)
    if m:
        attrs: dict[str, Any] = {"tool": "nccl-tests", "src": m.group(1)}
        if m.group(2):
            attrs["error"] = m.group(2)
        return text, attrs, True
    return None
