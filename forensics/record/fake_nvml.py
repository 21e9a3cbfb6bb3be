"""A stand-in for ``pynvml`` — for tests only.

Selected by ``FORENSICS_FAKE_NVML=<scenario>[:key=value,...]`` (read by
:func:`forensics.record.nvml.load_module`); the real path is used whenever the
variable is unset. Scenarios:

``ok``      two GPUs whose readings move with time (``gpus=N`` for another count)
``absent``  ``nvmlInit`` fails as it does without a driver (``NVML Shared Library Not Found``)
``nogpu``   NVML works but sees no GPU
``hang``    the call named ``call=`` (default ``nvmlDeviceGetPowerUsage``) never returns once
            ``after=`` seconds have passed since init; with ``once=PATH`` only the first
            process hangs (it creates PATH), so a replacement sampler recovers
``xid``     like ``ok``, and an Xid ``xid=`` (default 79) event on GPU 0 ``after=`` seconds
            after the listener starts

Any scenario takes ``procs=N``: N worker processes on GPU 0 (pids 5000…), each growing to 2 GiB in its
first second and working (SM 60 %); those listed in ``idle=`` (indexes joined by ``+``) grow on to
``cap=`` MiB by ``after=`` seconds and then sit idle there, their memory frozen (no utilization sample:
what NVML reports for a process that ran no kernel). Without ``procs`` GPU 0 has one process, 4242.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any

__all__ = ["configure"]

NVML_SUCCESS = 0
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_P2P_CAPS_INDEX_READ = 0
NVML_P2P_CAPS_INDEX_WRITE = 1
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
NVML_P2P_STATUS_NOT_SUPPORTED = 5
nvmlEventTypeSingleBitEccError = 0x1
nvmlEventTypeDoubleBitEccError = 0x2
nvmlEventTypeXidCriticalError = 0x8


class NVMLError(Exception):
    _messages = {
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    }

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self._messages.get(self.value, f"Unknown Error {self.value}")


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - pynvml's names
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_NOT_SUPPORTED)


class NVMLError_Timeout(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_TIMEOUT)


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    def __init__(self) -> None:
        super().__init__(NVML_ERROR_LIBRARY_NOT_FOUND)


@dataclass
class _Config:
    scenario: str = "ok"
    gpus: int = 2
    call: str = "nvmlDeviceGetPowerUsage"
    after: float = 0.0
    once: str = ""
    xid: int = 79
    procs: int = 0
    idle: str = ""
    cap: int = 6144


_cfg = _Config()
_t0 = 0.0
_module = sys.modules[__name__]


def configure(spec: str) -> ModuleType:
    """Set the scenario from ``FORENSICS_FAKE_NVML`` and return this module as ``pynvml``."""
    global _cfg
    name, _, rest = spec.partition(":")
    cfg = _Config(scenario=name or "ok")
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        current = getattr(cfg, key, None)
        if current is not None:
            setattr(cfg, key, type(current)(value))
    _cfg = cfg
    return _module


def _maybe_hang(call: str) -> None:
    if _cfg.scenario != "hang" or call != _cfg.call or time.monotonic() - _t0 < _cfg.after:
        return
    if _cfg.once:
        try:
            os.close(os.open(_cfg.once, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
    while True:  # a wedged driver: the call never returns
        time.sleep(3600)


# -- library ---------------------------------------------------------------------------------
def nvmlInit() -> None:  # noqa: N802 - pynvml's names
    global _t0
    if _cfg.scenario == "absent":
        raise NVMLError_LibraryNotFound()
    _t0 = time.monotonic()


def nvmlShutdown() -> None:  # noqa: N802
    pass


def nvmlDeviceGetCount() -> int:  # noqa: N802
    return 0 if _cfg.scenario == "nogpu" else _cfg.gpus


def nvmlDeviceGetHandleByIndex(i: int) -> Any:  # noqa: N802
    return SimpleNamespace(index=i)


def nvmlSystemGetDriverVersion() -> str:  # noqa: N802
    return "999.99.99-fake"


def nvmlSystemGetNVMLVersion() -> str:  # noqa: N802
    return "99.999.99-fake"


def nvmlSystemGetCudaDriverVersion() -> int:  # noqa: N802
    return 13000


def nvmlDeviceGetPciInfo(h: Any) -> Any:  # noqa: N802
    return SimpleNamespace(busId=f"00000000:{0x3B + h.index:02X}:00.0")


def nvmlDeviceGetName(h: Any) -> str:  # noqa: N802
    return "Fake GPU"


def nvmlDeviceGetUUID(h: Any) -> str:  # noqa: N802
    return f"GPU-fake-{h.index:04d}"


def nvmlDeviceGetSerial(h: Any) -> str:  # noqa: N802
    raise NVMLError_NotSupported()


def nvmlDeviceGetVbiosVersion(h: Any) -> str:  # noqa: N802
    return "96.00.00.00.00"


def _phase() -> float:
    return time.monotonic() - _t0


def nvmlDeviceGetMemoryInfo(h: Any) -> Any:  # noqa: N802
    total = 80 << 30
    used = (1 << 30) + int(_phase() * 10) % 7 * (256 << 20)
    return SimpleNamespace(total=total, used=used, free=total - used)


def nvmlDeviceGetUtilizationRates(h: Any) -> Any:  # noqa: N802
    return SimpleNamespace(gpu=int(_phase() * 37) % 101, memory=int(_phase() * 11) % 60)


def nvmlDeviceGetPowerUsage(h: Any) -> int:  # noqa: N802
    _maybe_hang("nvmlDeviceGetPowerUsage")
    return 100_000 + int(_phase() * 1000) % 300_000


def nvmlDeviceGetTemperature(h: Any, sensor: int) -> int:  # noqa: N802
    return 40 + int(_phase()) % 5


def nvmlDeviceGetClockInfo(h: Any, kind: int) -> int:  # noqa: N802
    return 1980 if kind == NVML_CLOCK_SM else 3201


def nvmlDeviceGetCurrentClocksEventReasons(h: Any) -> int:  # noqa: N802
    return 0


def nvmlDeviceGetCurrPcieLinkGeneration(h: Any) -> int:  # noqa: N802
    return 5


def nvmlDeviceGetMaxPcieLinkGeneration(h: Any) -> int:  # noqa: N802
    return 5


def nvmlDeviceGetCurrPcieLinkWidth(h: Any) -> int:  # noqa: N802
    return 16


def nvmlDeviceGetMaxPcieLinkWidth(h: Any) -> int:  # noqa: N802
    return 16


def nvmlDeviceGetEnforcedPowerLimit(h: Any) -> int:  # noqa: N802
    return 700_000


def nvmlDeviceGetPcieReplayCounter(h: Any) -> int:  # noqa: N802
    return 0


def nvmlDeviceGetTotalEccErrors(h: Any, kind: int, counter: int) -> int:  # noqa: N802
    return 0


def nvmlDeviceGetRemappedRows(h: Any) -> tuple[int, int, int, int]:  # noqa: N802
    return 0, 0, 0, 0


def _idle() -> set[int]:
    return {int(i) for i in _cfg.idle.split("+") if i.strip().isdigit()}


def _worker_mib(i: int) -> int:
    t = _phase()
    if i in _idle():
        return 1024 + int((_cfg.cap - 1024) * min(1.0, t / max(_cfg.after, 0.1)))
    return 1024 + int(1024 * min(1.0, t))


def nvmlDeviceGetComputeRunningProcesses(h: Any) -> list[Any]:  # noqa: N802
    if h.index != 0:
        return []
    if _cfg.procs:
        return [SimpleNamespace(pid=5000 + i, usedGpuMemory=_worker_mib(i) << 20) for i in range(_cfg.procs)]
    return [SimpleNamespace(pid=4242, usedGpuMemory=512 << 20)]


def nvmlDeviceGetProcessUtilization(h: Any, last_seen_us: int) -> list[Any]:  # noqa: N802
    now_us = time.time_ns() // 1000
    working = [] if h.index != 0 else [4242] if not _cfg.procs else [
        5000 + i for i in range(_cfg.procs) if i not in _idle() or _phase() < _cfg.after]
    if not working:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return [SimpleNamespace(pid=pid, timeStamp=max(now_us, last_seen_us + 1), smUtil=60, memUtil=20, encUtil=0,
                            decUtil=0) for pid in working]


def nvmlDeviceGetPersistenceMode(h: Any) -> int:  # noqa: N802
    return 1


def nvmlDeviceGetEccMode(h: Any) -> tuple[int, int]:  # noqa: N802
    return 1, 1


def nvmlDeviceGetP2PStatus(a: Any, b: Any, index: int) -> int:  # noqa: N802
    return NVML_P2P_STATUS_NOT_SUPPORTED if index == NVML_P2P_CAPS_INDEX_NVLINK else NVML_P2P_STATUS_OK


# -- events ----------------------------------------------------------------------------------
class _EventSet:
    def __init__(self) -> None:
        self.devices: list[Any] = []
        self.started = time.monotonic()
        self.sent = False


def nvmlEventSetCreate() -> _EventSet:  # noqa: N802
    return _EventSet()


def nvmlDeviceRegisterEvents(h: Any, mask: int, event_set: _EventSet) -> None:  # noqa: N802
    event_set.devices.append(h)


def nvmlEventSetWait_v2(event_set: _EventSet, timeout_ms: int) -> Any:  # noqa: N802
    if _cfg.scenario == "xid" and not event_set.sent and event_set.devices:
        due = event_set.started + _cfg.after
        wait = due - time.monotonic()
        if wait <= timeout_ms / 1000:
            time.sleep(max(0.0, wait))
            event_set.sent = True
            return SimpleNamespace(device=event_set.devices[0], eventType=nvmlEventTypeXidCriticalError,
                                   eventData=_cfg.xid, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
    time.sleep(timeout_ms / 1000)
    raise NVMLError_Timeout()


def nvmlEventSetFree(event_set: _EventSet) -> None:  # noqa: N802
    pass
