"""The CUDA runtime and driver error-code catalogue extractor (docs/catalogs.md).

Reads an installed CUDA toolkit (the directory holding ``include/`` and ``lib64/``, e.g. /usr/local/cuda):

* ``include/driver_types.h``: the ``cudaError`` enum (runtime API), each code's name, number and place;
* ``lib64/libcudart.so*``: the producer itself, loaded with ctypes, for ``cudaGetErrorString(code)`` (the
  description frameworks print: PyTorch's ``CUDA error: <description>``, NCCL's ``Cuda failure 'x'``) and
  ``cudaGetErrorName(code)`` (the ``cudaErrorXxx`` name, printed by Thrust, PyTorch's "Search for
  `cudaErrorXxx'" hint and others). Neither needs a GPU or a driver;
* ``include/cuda.h``: the ``CUresult`` enum (driver API). ``cuGetErrorString`` lives in libcuda, the
  driver, which a toolkit does not ship, so a driver code's only text here is its name
  (``CUDA_ERROR_XXX``, which is what ``cuGetErrorName`` returns and what the driver API's callers print);
  the descriptions in cuda.h's comments are documentation, not printed text, and are not used.

Three kinds of entry, all with ``code = "<name> = <number>"``: ``cuda.runtime.*`` (level ``cudaError_t``,
the description), ``cuda.runtime-name.*`` (level ``cudaError_t``, the name) and ``cuda.driver.*`` (level
``CUresult``, the name). Success codes are left out. Every other code is an error the API call returned;
the rules file decides which are warnings (query results such as ``cudaErrorNotReady``). No code of the
producer is copied: only the names, numbers and texts it returns.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any

#: Older runtime descriptions of mapped codes (id, last release, first release, where it was found, text).
#: 27's was read by running libcudart.so.11.0 of the nvidia-cuda-runtime-cu11 11.7.99 and 11.8.89 wheels
#: (12.8.90's prints the 13.0 text); 46's comes from real logs: CUDA 11.7.99 and later print the 13.0 text.
_OLDER_FOR = 13000
_OLDER_WORDINGS: list[tuple[str, str, str, str, str]] = [
    ("cuda.runtime.invalid-norm-setting", "11.8", "11.7",
     "libcudart.so.11.0 of nvidia-cuda-runtime-cu11 11.8.89",
     "read as normalized float not supported for 32-bit non float type"),
    ("cuda.runtime.devices-unavailable", "8.0", "8.0",
     "https://github.com/NVIDIA/DIGITS/issues/2005 (driver 375.26, CUDA 8);"
     " also https://github.com/AUTOMATIC1111/stable-diffusion-webui/issues/2986 (2022, CUDA 11)",
     "all CUDA-capable devices are busy or unavailable"),
]

#: The oldest release checked that prints the 13.0 text of a code with an older wording.
_CURRENT_SINCE = {"cuda.runtime.invalid-norm-setting": "12.8", "cuda.runtime.devices-unavailable": "11.7"}

_ENTRY = re.compile(r"^\s*,?\s*(\w+)\s*=\s*(-?\d+)\s*,?", re.M)


def _enum_body(src: str, start_pattern: str) -> tuple[str, int]:
    m = re.search(start_pattern, src)
    if not m:
        raise SystemExit(f"enum not found: {start_pattern}")
    end = src.index("}", m.end())
    return src[m.end():end], src.count("\n", 0, m.end())


def _enum(path: Path, start_pattern: str) -> list[tuple[str, int, int]]:
    """(name, value, line) of each member of the enum that starts with ``start_pattern``."""
    src = path.read_text(errors="replace")
    body, base_line = _enum_body(src, start_pattern)
    # Comments hold '=' and numbers too: blank them, keeping the line count.
    body = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), body, flags=re.S)
    body = re.sub(r"//[^\n]*", "", body)
    out = []
    for m in _ENTRY.finditer(body):
        out.append((m.group(1), int(m.group(2)), base_line + body.count("\n", 0, m.start(1)) + 1))
    return out


def _kebab(name: str) -> str:
    if name.startswith("CUDA_ERROR_"):
        return name.removeprefix("CUDA_ERROR_").lower().replace("_", "-")
    core = name.removeprefix("cudaError")
    core = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", core)
    core = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", core)
    return core.lower()


def _text(fmt: str) -> str:
    return fmt.replace("{", "{{").replace("}", "}}")


def _cudart(root: Path) -> ctypes.CDLL:
    libs = sorted((root / "lib64").glob("libcudart.so*")) or sorted((root / "lib").glob("libcudart.so*"))
    if not libs:
        raise SystemExit(f"no libcudart.so under {root}/lib64: the descriptions come from running it")
    lib = ctypes.CDLL(str(libs[-1]))
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    lib.cudaGetErrorName.restype = ctypes.c_char_p
    return lib


def extract(root: Path) -> list[dict[str, Any]]:
    root = Path(root)
    lib = _cudart(root)
    entries: list[dict[str, Any]] = []
    runtime = _enum(root / "include" / "driver_types.h", r"enum\s+__device_builtin__\s+cudaError\s*\{")
    for name, value, line in runtime:
        if value == 0 or name == "cudaErrorApiFailureBase":
            continue  # cudaSuccess; the base of an internal range, not an error a call returns
        described = lib.cudaGetErrorString(value).decode()
        returned_name = lib.cudaGetErrorName(value).decode()
        if returned_name != name:
            continue  # a value the library no longer describes (removed code)
        where = f"include/driver_types.h:{line}"
        code = f"{name} = {value}"
        entries.append({"id": f"cuda.runtime.{_kebab(name)}", "format": described, "text": _text(described),
                        "where": where, "level": "cudaError_t", "code": code})
        entries.append({"id": f"cuda.runtime-name.{_kebab(name)}", "format": name, "text": name,
                        "where": where, "level": "cudaError_t", "code": code})
    driver = _enum(root / "include" / "cuda.h", r"typedef\s+enum\s+cudaError_enum\s*\{")
    for name, value, line in driver:
        if value == 0:
            continue  # CUDA_SUCCESS
        entries.append({"id": f"cuda.driver.{_kebab(name)}", "format": name, "text": name,
                        "where": f"include/cuda.h:{line}", "level": "CUresult", "code": f"{name} = {value}"})
    if _toolkit_version(root) == _OLDER_FOR:
        current = {e["id"]: e for e in entries}
        for eid, since in _CURRENT_SINCE.items():
            current[eid]["versions"] = [since, "13.0"]
        for base, last, first, where, text in _OLDER_WORDINGS:
            entries.append({"id": f"{base}@{last}", "format": text, "text": _text(text), "where": where,
                            "level": current[base]["level"], "code": current[base]["code"],
                            "versions": [first] if first == last else [first, last]})
    return entries


def _toolkit_version(root: Path) -> int:
    m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", (root / "include" / "cuda.h").read_text(errors="replace"))
    return int(m.group(1)) if m else 0


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(extract(Path(sys.argv[1])), indent=1, ensure_ascii=False))
