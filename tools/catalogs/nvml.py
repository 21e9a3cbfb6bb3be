"""The NVML / nvidia-smi message catalogue extractor (docs/catalogs.md).

The snapshot is a directory holding (found anywhere below it):

* ``libnvidia-ml.so.<driver version>``: NVIDIA's management library (from the Debian package
  libnvidia-ml1, unpacked with dpkg-deb -x). It is loaded with ctypes and ``nvmlErrorString(code)`` is called
  for every return code; that needs no GPU and no kernel module.
* ``pynvml.py`` of nvidia-ml-py (NVIDIA's Python bindings): the ``NVML_ERROR_*`` names and numbers (also of
  codes newer than the library), the exception class each code becomes (``NVMLError_GpuIsLost``, by the
  rule pynvml states in ``_extractNVMLErrorsAsClasses``) and pynvml's own texts (``_errcode_to_string``)
  where they differ from the library's.
* ``nvidia-smi`` (Debian package nvidia-smi, same driver version): closed source. Its failure texts are
  the ``_NVIDIA_SMI`` list below, each taken from a real log or NVIDIA's documentation (address given) and
  checked here to be a string of that binary, so its exact printf form (``%s``) is the one the binary holds.

Entries: ``nvml.return.*`` (level ``nvmlReturn_t``, the library's text), ``nvml.return-name.*`` (the
``NVML_ERROR_*`` name), ``nvml.pynvml.*`` (level ``NVMLError``: class names and pynvml's texts) and
``nvml.nvidia-smi.*`` (level ``nvidia-smi``). ``code`` is ``"<name> = <number>"`` wherever a return code is
known. Severity is decided by the rules file. Only texts, names and numbers are taken.
"""

from __future__ import annotations

import ctypes
import re
import string
from pathlib import Path
from typing import Any

#: nvidia-smi failure texts: (id summary, printf form as in the binary, where it was seen).
_NVIDIA_SMI: list[tuple[str, str, str]] = [
    ("driver-not-reachable",
     "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest"
     " NVIDIA driver is installed and running.", "https://github.com/microsoft/WSL/issues/5265"),
    ("failed-initialize-nvml", "Failed to initialize NVML: %s", "https://github.com/tinygrad/open-gpu-kernel-modules/issues/47"),
    ("nvml-library-version", "NVML library version: %d.%02d", "https://github.com/tinygrad/open-gpu-kernel-modules/issues/47"),
    ("failed-shut-down-nvml", "Failed to properly shut down NVML: %s", "https://github.com/microsoft/WSL/issues/41062"),
    ("version-mismatch-smi-nvml", "Mismatch in versions between nvidia-smi and NVML.",
     "https://github.com/Bruce-Lee-LY/cuda_hook/issues/15"),
    ("using-smi-provided-with-driver", "Are you sure you are using nvidia-smi provided with the driver?",
     "https://github.com/Bruce-Lee-LY/cuda_hook/issues/15"),
    ("expected-nvml-version-mismatch",
     "Mismatch in expected NVML version.  Are you sure you are using the correct NVML version?", ""),
    ("no-devices-were-found", "No devices were found", "https://github.com/NVIDIA/NVSentinel/issues/684"),
    ("no-devices-readable",
     "No devices were found. Please make sure /dev/nvidia* files are readable by current user.", ""),
    ("no-devices-found", "No devices found.", ""),
    ("device-handle", "Unable to determine the device handle for GPU %s: %s",
     "https://github.com/NVIDIA/open-gpu-kernel-modules/issues/387"),
    ("device-handle-no-space", "Unable to determine the device handle for GPU%s: %s",
     "https://github.com/pdbear/syno_nvidia_gpu_driver/issues/22"),
    ("device-handle-lowercase", "Unable to determine the device handle for gpu %s: %s", ""),
    ("gpu-is-lost-reboot", "GPU is lost.  Reboot the system to recover this GPU", "https://github.com/JosephKJ/OWOD/issues/81"),
    ("number-of-gpus", "Unable to determine the number of available GPUs: %s", ""),
    ("number-of-devices", "Failed to determine the number of available devices: %s", ""),
    ("pci-info", "Unable to determine PCI info for GPU %s: %s", ""),
    ("communicate-check-permissions", "Unable to communicate with GPU %s.  Check permissions.", ""),
    ("inforom-corrupted-at-gpu", "WARNING: infoROM is corrupted at gpu %s", "https://github.com/NVIDIA/gpu-operator/issues/20"),
    ("inforom-corrupted", "WARNING: infoROM is corrupted", "https://github.com/microsoft/pai/issues/3756"),
    ("critical-xid", "GPU %s: Detected Critical Xid Error", ""),
    ("gpus-could-not-be-reset", "The following GPUs could not be reset:", "https://github.com/NVIDIA/NVSentinel/issues/1690"),
    ("reset-devices-in-use",
     "%u %s currently being used by one or more other processes (e.g., Fabric Manager, CUDA application,"
     " graphics application such as an X server, or a monitoring application such as another instance of"
     " nvidia-smi). Please first kill all processes using %s and all compute applications running in the"
     " system.", "https://github.com/NVIDIA/NVSentinel/issues/1690"),
    ("reset-incomplete",
     "%u %s did not complete reset successfully, and may be in an unstable state. Please reboot your system.", ""),
    ("reset-error-occurred", "Error occurred during reset of GPU %s: %s", ""),
    ("reset-error-encountered", "Error encountered during reset of GPU %s: %s", ""),
    ("reset-group-allocation",
     "GPU Reset couldn't run because it failed to allocate group of reset devices : %s", ""),
    ("reset-criterion",
     "GPU Reset couldn't progress because the specified devices do not meet the reset criterion (e.g. NVLink"
     " connected GPUs must be reset together). Please append the following device indexes to the command line"
     " and retry.", ""),
    ("reset-fabric-state", "GPU Reset couldn't run because fabric state could not be determined: %s", ""),
    ("could-not-reset-device", "ERROR: could not reset device: %d", ""),
    ("internal-smi-error", "Internal nvidia-smi error", ""),
    ("internal-nvml-error", "Internal NVML error", ""),
]

_PRINTF = re.compile(r"%[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?(?:hh|h|ll|l|z)?[diouxXfeEgGcsp]")


def to_text(fmt: str) -> str:
    out = fmt.replace("{", "{{").replace("}", "}}").replace("%%", "\0")
    return _PRINTF.sub("{}", out).replace("\0", "%")


def _one(root: Path, pattern: str) -> Path:
    found = sorted(p for p in root.rglob(pattern) if p.is_file() and not p.is_symlink())
    if not found:
        raise SystemExit(f"nothing matches {pattern} under {root}")
    return found[-1]


def _kebab(name: str) -> str:
    return name.removeprefix("NVML_ERROR_").lower().replace("_", "-")


def _holds(data: bytes, text: str) -> bool:
    """Whether the binary holds ``text`` as one printed line: a C string or a line of one (nvidia-smi prints
    some two-line messages from one string)."""
    return re.search(rb"[\x00\n]" + re.escape(text.encode()) + rb"[\x00\n]", data) is not None


def _pynvml(path: Path) -> tuple[list[tuple[str, int, int]], dict[str, str], int]:
    src = path.read_text(errors="replace")
    codes = []
    for m in re.finditer(r"^(NVML_ERROR_\w+)\s*=\s*(\d+)\s*$", src, re.M):
        codes.append((m.group(1), int(m.group(2)), src.count("\n", 0, m.start()) + 1))
    texts = {}
    body = re.search(r"_errcode_to_string\s*=\s*\{(.*?)\n\s*\}", src, re.S)
    if body:
        for m in re.finditer(r"(NVML_ERROR_\w+)\s*:\s*\"((?:[^\"\\]|\\.)*)\"", body.group(1)):
            texts[m.group(1)] = m.group(2)
    rule = re.search(r"def _extractNVMLErrorsAsClasses", src)
    return codes, texts, (src.count("\n", 0, rule.start()) + 1) if rule else 0


def extract(root: Path) -> list[dict[str, Any]]:
    root = Path(root)
    lib_path = _one(root, "libnvidia-ml.so.*.*")
    version = lib_path.name.removeprefix("libnvidia-ml.so.")
    lib = ctypes.CDLL(str(lib_path))
    lib.nvmlErrorString.restype = ctypes.c_char_p
    unknown = lib.nvmlErrorString(999).decode()
    py = _one(root, "pynvml.py")
    codes, py_texts, class_line = _pynvml(py)
    entries: list[dict[str, Any]] = []
    for name, value, line in codes:
        code = f"{name} = {value}"
        described = lib.nvmlErrorString(value).decode()
        if value == 999 or described != unknown:  # the library knows the code (newer codes read "Unknown Error")
            entries.append({"id": f"nvml.return.{_kebab(name)}", "format": described, "text": to_text(described),
                            "where": f"{lib_path.name}: nvmlErrorString({value})", "level": "nvmlReturn_t",
                            "code": code})
        entries.append({"id": f"nvml.return-name.{_kebab(name)}", "format": name, "text": name,
                        "where": f"pynvml.py:{line}", "level": "nvmlReturn_t", "code": code})
        cls = "NVMLError_" + string.capwords(name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        entries.append({"id": f"nvml.pynvml.class-{_kebab(name)}", "format": cls, "text": cls,
                        "where": f"pynvml.py:{class_line}", "level": "NVMLError", "code": code})
        own = py_texts.get(name)
        if own and own != described:
            entries.append({"id": f"nvml.pynvml.text-{_kebab(name)}", "format": own, "text": to_text(own),
                            "where": f"pynvml.py:{line} (_errcode_to_string)", "level": "NVMLError", "code": code})
    fallback = re.search(r'"(NVML Error with code %d)"', py.read_text(errors="replace"))
    if fallback:
        entries.append({"id": "nvml.pynvml.text-error-with-code", "format": fallback.group(1),
                        "text": to_text(fallback.group(1)), "where": "pynvml.py (NVMLError.__str__)",
                        "level": "NVMLError"})
    smi = max((p for p in root.rglob("nvidia-smi") if p.is_file() and not p.is_symlink()),
              key=lambda p: p.stat().st_size)  # the binary, not a lintian override of the same name
    held = smi.read_bytes()
    for summary, fmt, seen in _NVIDIA_SMI:
        if not _holds(held, fmt):
            raise SystemExit(f"nvidia-smi {version} does not hold {fmt!r}")
        where = f"nvidia-smi {version}" + (f"; seen in {seen}" if seen else "")
        entries.append({"id": f"nvml.nvidia-smi.{summary}", "format": fmt, "text": to_text(fmt), "where": where,
                        "level": "nvidia-smi"})
    return entries


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(extract(Path(sys.argv[1])), indent=1, ensure_ascii=False))
