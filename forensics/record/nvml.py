"""The one place that talks to NVML: which fields a sample reads, and how errors become N/A.

Everything the recorder asks NVML goes through :class:`Nvml`. Every call is made
through a *guard* (see :mod:`forensics.record.deadline`) that publishes "call X on GPU
N started at T" to the supervisor, which replaces the sampler process when a call does
not return in time. Errors never escape: ``NotSupported`` retires the field for that
GPU, ``GpuIsLost`` is reported once, anything else is N/A (``None``) for that sample.

``FIELDS`` is the table of what a sample reads: only cheap calls (measured on an
H200: 1–30 µs; the PCIe replay counter ~180 µs so it is read at 1 Hz). Never
``nvmlDeviceGetPcieThroughput`` (it samples for 20 ms) nor energy counters.

The module behind ``import pynvml`` is the real ``nvidia-ml-py`` unless the
environment variable ``FORENSICS_FAKE_NVML`` names a scenario of
:mod:`forensics.record.fake_nvml` — a stand-in for tests only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from types import ModuleType
from typing import Any

__all__ = ["FAKE_ENV", "FIELDS", "Field", "GpuInfo", "Nvml", "load_module", "normalize_pci"]

FAKE_ENV = "FORENSICS_FAKE_NVML"

Guard = Callable[..., Any]  # guard(call_name, gpu_index, fn, *args) -> fn(*args)


def load_module() -> ModuleType:
    """The NVML binding: ``pynvml`` from nvidia-ml-py, or the test fake when asked for."""
    if os.environ.get(FAKE_ENV):
        from forensics.record import fake_nvml

        return fake_nvml.configure(os.environ[FAKE_ENV])
    import pynvml

    return pynvml


def normalize_pci(bus_id: str | bytes) -> str:
    """``00000000:3B:00.0`` (NVML) → ``0000:3b:00.0``."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode(errors="replace")
    bus_id = bus_id.strip().lower()
    domain, sep, rest = bus_id.partition(":")
    if sep and len(domain) > 4:
        domain = domain[-4:]
    return f"{domain}{sep}{rest}"


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _bus_id(pci_info: Any) -> str:
    return normalize_pci(pci_info.busId)


def _apply(fn: Callable[[Any], Any], handle: Any, convert: Callable[[Any], Any]) -> Any:
    return convert(fn(handle))


@dataclass(frozen=True)
class Field:
    """One NVML read: ``call`` (the NVML function, for deadline reports), the columns it
    fills (ARCHITECTURE.md names), their short keys in nvml.jsonl, whether it is read
    only once a second (``slow``) rather than every tick, and how to read it."""

    call: str
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    slow: bool
    read: Callable[[ModuleType, Any], tuple[float | int | None, ...]]


def _mem(n: ModuleType, h: Any) -> tuple[int, int]:
    m = n.nvmlDeviceGetMemoryInfo(h)
    return m.used >> 20, m.total >> 20


def _util(n: ModuleType, h: Any) -> tuple[int, int]:
    u = n.nvmlDeviceGetUtilizationRates(h)
    return u.gpu, u.memory


def _clock_reasons(n: ModuleType, h: Any) -> tuple[int]:
    """Clock-event reasons; drivers older than the binding only know the older "throttle" name."""
    fn = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None)
    if fn is not None:
        try:
            return (int(fn(h)),)
        except Exception as exc:
            if getattr(exc, "value", None) != getattr(n, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
                raise
    return (int(n.nvmlDeviceGetCurrentClocksThrottleReasons(h)),)


def _ecc(kind_name: str) -> Callable[[ModuleType, Any], tuple[int]]:
    def read(n: ModuleType, h: Any) -> tuple[int]:
        kind = getattr(n, kind_name)
        return (int(n.nvmlDeviceGetTotalEccErrors(h, kind, n.NVML_VOLATILE_ECC)),)

    return read


def _remapped(n: ModuleType, h: Any) -> tuple[int, int]:
    _corr, _unc, pending, failure = n.nvmlDeviceGetRemappedRows(h)
    return int(bool(pending)), int(bool(failure))


FIELDS: tuple[Field, ...] = (
    Field("nvmlDeviceGetMemoryInfo", ("mem_used_mib", "mem_total_mib"), ("mu", "mt"), False, _mem),
    Field("nvmlDeviceGetUtilizationRates", ("util_gpu_pct", "util_mem_pct"), ("ug", "um"), False, _util),
    Field("nvmlDeviceGetPowerUsage", ("power_w",), ("pw",), False,
          lambda n, h: (round(n.nvmlDeviceGetPowerUsage(h) / 1000, 1),)),
    Field("nvmlDeviceGetTemperature", ("temp_c",), ("tc",), False,
          lambda n, h: (n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU),)),
    Field("nvmlDeviceGetClockInfo(SM)", ("sm_clock_mhz",), ("cs",), False,
          lambda n, h: (n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM),)),
    Field("nvmlDeviceGetClockInfo(MEM)", ("mem_clock_mhz",), ("cm",), False,
          lambda n, h: (n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM),)),
    Field("nvmlDeviceGetCurrentClocksEventReasons", ("clock_reasons",), ("cr",), False, _clock_reasons),
    Field("nvmlDeviceGetCurrPcieLinkGeneration", ("pcie_gen",), ("lg",), False,
          lambda n, h: (n.nvmlDeviceGetCurrPcieLinkGeneration(h),)),
    Field("nvmlDeviceGetCurrPcieLinkWidth", ("pcie_width",), ("lw",), False,
          lambda n, h: (n.nvmlDeviceGetCurrPcieLinkWidth(h),)),
    # Slow-changing or slower calls: once a second at the default 10 Hz.
    Field("nvmlDeviceGetEnforcedPowerLimit", ("power_limit_w",), ("pl",), True,
          lambda n, h: (round(n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000, 1),)),
    Field("nvmlDeviceGetMaxPcieLinkGeneration", ("pcie_gen_max",), ("lgx",), True,
          lambda n, h: (n.nvmlDeviceGetMaxPcieLinkGeneration(h),)),
    Field("nvmlDeviceGetMaxPcieLinkWidth", ("pcie_width_max",), ("lwx",), True,
          lambda n, h: (n.nvmlDeviceGetMaxPcieLinkWidth(h),)),
    Field("nvmlDeviceGetPcieReplayCounter", ("pcie_replay",), ("rp",), True,
          lambda n, h: (n.nvmlDeviceGetPcieReplayCounter(h),)),
    Field("nvmlDeviceGetTotalEccErrors(corrected)", ("ecc_sbe_volatile",), ("es",), True,
          _ecc("NVML_MEMORY_ERROR_TYPE_CORRECTED")),
    Field("nvmlDeviceGetTotalEccErrors(uncorrected)", ("ecc_dbe_volatile",), ("ed",), True,
          _ecc("NVML_MEMORY_ERROR_TYPE_UNCORRECTED")),
    Field("nvmlDeviceGetRemappedRows", ("remapped_pending", "remapped_failure"), ("rmp", "rmf"), True, _remapped),
)

#: short key in nvml.jsonl -> MetricSample column
COLUMNS: dict[str, str] = {k: c for f in FIELDS for k, c in zip(f.keys, f.columns, strict=True)}


@dataclass
class GpuInfo:
    index: int
    handle: Any
    pci: str
    name: str
    uuid: str


class NvmlUnavailable(Exception):
    """NVML cannot be used here (no library, no driver, no GPU); the message says why."""


class Nvml:
    """An initialised NVML session with the GPUs it sees."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.mod: ModuleType
        try:
            self.mod = load_module()
        except ImportError as exc:
            raise NvmlUnavailable(f"nvidia-ml-py is not installed ({exc})") from None
        n = self.mod
        try:
            guard("nvmlInit", -1, n.nvmlInit)
            count = guard("nvmlDeviceGetCount", -1, n.nvmlDeviceGetCount)
        except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, NoPermission …
            raise NvmlUnavailable(_describe(exc)) from None
        if count == 0:
            raise NvmlUnavailable("NVML sees no GPU")
        self.gpus: list[GpuInfo] = []
        for i in range(count):
            try:
                h = guard("nvmlDeviceGetHandleByIndex", i, n.nvmlDeviceGetHandleByIndex, i)
            except Exception as exc:
                self.gpus.append(GpuInfo(i, None, "", f"unavailable: {_describe(exc)}", ""))
                continue
            pci = self._call("nvmlDeviceGetPciInfo", i, partial(_apply, n.nvmlDeviceGetPciInfo, h, _bus_id))
            name = self._call("nvmlDeviceGetName", i, partial(_apply, n.nvmlDeviceGetName, h, _text))
            uuid = self._call("nvmlDeviceGetUUID", i, partial(_apply, n.nvmlDeviceGetUUID, h, _text))
            self.gpus.append(GpuInfo(i, h, pci or "", name or "", uuid or ""))
        self._unsupported: set[tuple[int, str]] = set()
        self._util_seen: dict[int, int] = {}  # GPU index -> the newest per-process sample read (µs)
        self.lost: set[int] = set()

    def _call(self, name: str, gpu: int, fn: Callable[[], Any]) -> Any:
        """One guarded read; ``None`` on any error."""
        try:
            return self.guard(name, gpu, fn)
        except Exception:
            return None

    # -- sampling ---------------------------------------------------------------------------
    def sample(self, gpu: GpuInfo, slow_due: bool) -> tuple[dict[str, float | int | None], str | None]:
        """One GPU's fields by short key (the slow ones too when ``slow_due``); and an error worth an event."""
        out: dict[str, float | int | None] = {}
        notable: str | None = None
        if gpu.handle is None:
            return out, None
        n = self.mod
        for f in FIELDS:
            if (f.slow and not slow_due) or (gpu.index, f.call) in self._unsupported:
                continue
            try:
                values = self.guard(f.call, gpu.index, f.read, n, gpu.handle)
            except Exception as exc:
                values = (None,) * len(f.keys)
                kind = _error_kind(n, exc)
                if kind == "unsupported":
                    self._unsupported.add((gpu.index, f.call))
                    continue
                if kind == "lost" and gpu.index not in self.lost:
                    self.lost.add(gpu.index)
                    notable = f"{f.call}: {_describe(exc)}"
            out.update(zip(f.keys, values, strict=True))
        return out, notable

    def processes(self, gpu: GpuInfo) -> list[list[int]] | None:
        """``[[pid, used_mib], …]`` of the compute processes on ``gpu``; ``None`` if unknown."""
        if gpu.handle is None or (gpu.index, "procs") in self._unsupported:
            return None
        n = self.mod
        try:
            procs = self.guard("nvmlDeviceGetComputeRunningProcesses", gpu.index,
                               n.nvmlDeviceGetComputeRunningProcesses, gpu.handle)
        except Exception as exc:
            if _error_kind(n, exc) == "unsupported":
                self._unsupported.add((gpu.index, "procs"))
            return None
        out = []
        for p in procs:
            used = getattr(p, "usedGpuMemory", None)
            out.append([int(p.pid), int(used) >> 20 if isinstance(used, int) else -1])
        return sorted(out)

    def process_utilization(self, gpu: GpuInfo) -> list[list[int]] | None:
        """``[[pid, sm %, memory %], …]`` of the processes that ran on ``gpu`` since the last call (NVML's
        ``nvmlDeviceGetProcessUtilization``, what ``nvidia-smi pmon`` shows; several samples of one process
        are averaged); ``[]`` when none ran (NVML's NOT_FOUND: every process idle), ``None`` if unknown."""
        if gpu.handle is None or (gpu.index, "putil") in self._unsupported:
            return None
        n = self.mod
        since = self._util_seen.get(gpu.index, 0)
        try:
            samples = self.guard("nvmlDeviceGetProcessUtilization", gpu.index,
                                 n.nvmlDeviceGetProcessUtilization, gpu.handle, since)
        except Exception as exc:
            kind = _error_kind(n, exc)
            if kind == "unsupported":
                self._unsupported.add((gpu.index, "putil"))
            elif getattr(exc, "value", None) == getattr(n, "NVML_ERROR_NOT_FOUND", 6):
                return []
            return None
        per: dict[int, list[tuple[int, int]]] = {}
        for smp in samples or []:
            pid = int(getattr(smp, "pid", 0))
            stamp = int(getattr(smp, "timeStamp", 0))
            if pid <= 0 or stamp <= since:
                continue
            per.setdefault(pid, []).append((int(getattr(smp, "smUtil", 0)), int(getattr(smp, "memUtil", 0))))
            self._util_seen[gpu.index] = max(self._util_seen.get(gpu.index, 0), stamp)
        return sorted([pid, round(sum(s for s, _ in v) / len(v)), round(sum(m for _, m in v) / len(v))]
                      for pid, v in per.items())

    # -- static facts -----------------------------------------------------------------------
    def static_info(self) -> dict[str, Any]:
        """Driver versions, per-GPU identity and PCIe link, and the P2P status matrix."""
        n = self.mod
        info: dict[str, Any] = {
            "driver_version": self._call("nvmlSystemGetDriverVersion", -1,
                                         lambda: _text(n.nvmlSystemGetDriverVersion())),
            "nvml_version": self._call("nvmlSystemGetNVMLVersion", -1, lambda: _text(n.nvmlSystemGetNVMLVersion())),
            "cuda_driver_version": self._call("nvmlSystemGetCudaDriverVersion", -1,
                                              lambda: _cuda_version(n.nvmlSystemGetCudaDriverVersion())),
            "gpus": [],
        }
        for g in self.gpus:
            entry: dict[str, Any] = {"index": g.index, "pci": g.pci, "name": g.name, "uuid": g.uuid}
            if g.handle is not None:
                for key, call, convert in _STATIC:
                    fn = getattr(n, call, None)
                    if fn is not None:
                        entry[key] = self._call(call, g.index, partial(_apply, fn, g.handle, convert))
            info["gpus"].append(entry)
        info["p2p"] = self._p2p_matrix()
        return info

    def _p2p_matrix(self) -> dict[str, list[list[str]]]:
        n = self.mod
        caps = {name.removeprefix("NVML_P2P_CAPS_INDEX_").lower(): getattr(n, name)
                for name in ("NVML_P2P_CAPS_INDEX_READ", "NVML_P2P_CAPS_INDEX_WRITE", "NVML_P2P_CAPS_INDEX_NVLINK",
                             "NVML_P2P_CAPS_INDEX_ATOMICS", "NVML_P2P_CAPS_INDEX_PROP")
                if hasattr(n, name)}
        status_names = {getattr(n, s): s.removeprefix("NVML_P2P_STATUS_") for s in dir(n)
                        if s.startswith("NVML_P2P_STATUS_")}
        out: dict[str, list[list[str]]] = {}
        for cap, idx in caps.items():
            rows = []
            for a in self.gpus:
                row = []
                for b in self.gpus:
                    if a.index == b.index:
                        row.append("X")
                        continue
                    if a.handle is None or b.handle is None:
                        row.append("N/A")
                        continue
                    st = self._call("nvmlDeviceGetP2PStatus", a.index,
                                    partial(n.nvmlDeviceGetP2PStatus, a.handle, b.handle, idx))
                    row.append("N/A" if st is None else status_names.get(st, str(st)))
                rows.append(row)
            out[cap] = rows
        return out

    # -- events -----------------------------------------------------------------------------
    def handle_key(self, handle: Any) -> int:
        """A stable key for a device handle, to map an event back to its GPU."""
        try:
            return int(ctypes.cast(handle, ctypes.c_void_p).value or 0)
        except (TypeError, ctypes.ArgumentError):
            return id(handle)

    def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            self.guard("nvmlShutdown", -1, self.mod.nvmlShutdown)


#: static facts per GPU: (key in host/gpus.json, NVML call taking a handle, conversion)
_STATIC: tuple[tuple[str, str, Callable[[Any], Any]], ...] = (
    ("serial", "nvmlDeviceGetSerial", _text),
    ("vbios", "nvmlDeviceGetVbiosVersion", _text),
    ("pcie_gen", "nvmlDeviceGetCurrPcieLinkGeneration", int),
    ("pcie_gen_max", "nvmlDeviceGetMaxPcieLinkGeneration", int),
    ("pcie_width", "nvmlDeviceGetCurrPcieLinkWidth", int),
    ("pcie_width_max", "nvmlDeviceGetMaxPcieLinkWidth", int),
    ("mem_total_mib", "nvmlDeviceGetMemoryInfo", lambda m: m.total >> 20),
    ("power_limit_w", "nvmlDeviceGetEnforcedPowerLimit", lambda mw: mw / 1000),
    ("persistence_mode", "nvmlDeviceGetPersistenceMode", int),
    ("ecc_mode_current", "nvmlDeviceGetEccMode", lambda modes: int(modes[0])),
)


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _error_kind(n: ModuleType, exc: BaseException) -> str:
    if isinstance(exc, AttributeError | TypeError | NotImplementedError):
        return "unsupported"  # an older binding without this call
    value = getattr(exc, "value", None)
    if value == getattr(n, "NVML_ERROR_NOT_SUPPORTED", 3) or value == getattr(n, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
        return "unsupported"
    if value == getattr(n, "NVML_ERROR_GPU_IS_LOST", 15):
        return "lost"
    return "error"


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def event_mask(n: ModuleType) -> Sequence[tuple[str, int]]:
    """The event types the listener asks for, by name."""
    return [(name, getattr(n, attr)) for name, attr in (
        ("xid", "nvmlEventTypeXidCriticalError"),
        ("ecc-single-bit", "nvmlEventTypeSingleBitEccError"),
        ("ecc-double-bit", "nvmlEventTypeDoubleBitEccError"),
    ) if hasattr(n, attr)]
