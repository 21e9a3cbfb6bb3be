"""What a bundle says about the machine and the run, beside the logs: ``manifest.json`` and the
``host/`` snapshots (``gpus.json``, ``versions.json``, ``system.json``, ``env.json``,
``command.json``, ``pip-freeze.txt``, ``nvidia-smi-topo.txt``, ``nvidia-driver.txt``).

``analyze`` deliberately skips these files (they are facts, not evidence); the report, ``diff``
and ``pack`` read them here. A bundle can be a directory, a directory holding bundles, or a
packed archive (``.tar.gz``, ``.tgz``, ``.tar``, ``.zip``), read in memory with size caps.
Everything shown to a person is redacted again (:mod:`forensics.secrets`).
"""

from __future__ import annotations

import io
import os
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from forensics.ingest.reader import Budget, Limits, gunzip, load_json, read_file
from forensics.secrets import redact_text

__all__ = ["BundleFacts", "GpuRow", "read_bundle_facts", "INTERESTING_ENV"]

MANIFEST = "manifest.json"
#: host/ files read for facts, with a cap each (a report never needs more)
_HOST_FILES = ("gpus.json", "versions.json", "system.json", "env.json", "command.json", "pip-freeze.txt",
               "nvidia-smi-topo.txt", "nvidia-driver.txt", "snapshot.json")
_CAP = 8 << 20
_MAX_MEMBERS = 20_000

#: environment variables that change how a run uses memory, links or devices (names or prefixes)
INTERESTING_ENV = ("NCCL_", "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_", "CUDA_MODULE_LOADING", "CUDA_VISIBLE_DEVICES",
                   "CUDA_LAUNCH_BLOCKING", "CUDA_DEVICE_MAX_CONNECTIONS", "TORCH_", "NVIDIA_VISIBLE_DEVICES",
                   "OMP_NUM_THREADS", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "NVSHMEM_", "TORCHINDUCTOR_",
                   "XLA_", "HF_HUB_OFFLINE", "ACCELERATE_")
#: packages worth a line of their own in the software table (pip freeze names, lower case)
KEY_PACKAGES = ("torch", "transformers", "accelerate", "peft", "deepspeed", "bitsandbytes", "flash-attn",
                "flash_attn", "xformers", "triton", "vllm", "megatron-core", "apex", "datasets", "numpy",
                "nvidia-nccl-cu12", "nvidia-nccl-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "jax",
                "tensorflow", "mamba-ssm", "causal-conv1d", "safetensors", "lightning", "pytorch-lightning")


@dataclass
class GpuRow:
    """One GPU as the hardware table shows it."""

    index: int | str
    pci: str
    name: str
    mem_total_mib: float | None
    link: str  # "Gen5 x16 (max Gen5 x16)"
    degraded: bool
    note: str  # "runs below its slot's maximum", "x4 slot (usually chipset lanes)"
    power_limit_w: float | None = None
    vbios: str = ""


@dataclass
class BundleFacts:
    """One bundle's manifest and host files (raw bytes by name) and what they say."""

    where: str  # the bundle as the user named it (directory, or archive!prefix)
    manifest: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)

    # -- raw access -------------------------------------------------------------------------
    def json(self, name: str) -> Any:
        """A host file parsed as JSON (``None``: absent, not JSON, or nested too deep to be a snapshot)."""
        raw = self.files.get(name)
        return load_json(raw) if raw else None

    def text(self, name: str) -> str:
        raw = self.files.get(name)
        return redact_text(raw.decode("utf-8", "replace"))[0] if raw else ""

    @property
    def host(self) -> str:
        host = self.manifest.get("host")
        return host[:_MAX_TEXT] if isinstance(host, str) and host else "?"

    # -- hardware ---------------------------------------------------------------------------
    def gpus(self) -> list[GpuRow]:
        data = self.json("gpus.json")
        paths = self._peer_paths()
        rows: list[GpuRow] = []
        listed = data.get("gpus") if isinstance(data, dict) else None
        for g in listed[:1024] if isinstance(listed, list) else []:
            if not isinstance(g, dict):
                continue
            gen, width = g.get("pcie_gen"), g.get("pcie_width")
            gen_max, width_max = g.get("pcie_gen_max"), g.get("pcie_width_max")
            link = _link(gen, width) + (f" (max {_link(gen_max, width_max)})" if gen_max or width_max else "")
            degraded = _below(gen, gen_max) or _below(width, width_max)
            notes = []
            if degraded:
                notes.append("link below its maximum")
            if isinstance(width_max, int) and 0 < width_max <= 4:
                notes.append(f"x{width_max} slot (usually chipset lanes, not the CPU's)")
            peers = paths.get(f"GPU{g.get('index')}", [])
            if peers and all(p in _VIA_HOST for p in peers):
                notes.append(f"peers only through the host ({'/'.join(sorted(set(peers)))} in topo -m)")
            rows.append(GpuRow(g.get("index", len(rows)), str(g.get("pci", "")), str(g.get("name", "?")),
                               _num(g.get("mem_total_mib")), link, degraded, "; ".join(notes),
                               _num(g.get("power_limit_w")), str(g.get("vbios") or "")))
        return rows

    def p2p(self) -> dict[str, list[list[str]]]:
        """The NVML P2P status matrices (read, write, nvlink, atomics …) from ``gpus.json``."""
        data = self.json("gpus.json")
        p2p = data.get("p2p") if isinstance(data, dict) else None
        if not isinstance(p2p, dict):
            return {}
        return {k: [[str(c) for c in row] for row in v] for k, v in p2p.items()
                if isinstance(v, list) and all(isinstance(r, list) for r in v)}

    def _peer_paths(self) -> dict[str, list[str]]:
        """GPU name (``GPU0``) -> its path kind to every other GPU (``NV18``, ``PIX``, ``PHB``, ``SYS`` …)."""
        rows = self.topology()
        if not rows:
            return {}
        head = rows[0]
        out: dict[str, list[str]] = {}
        for r in rows[1:]:
            out[r[0]] = [c for j, c in enumerate(r[1:], 1)
                         if j < len(head) and re.fullmatch(r"GPU\d+", head[j]) and head[j] != r[0]]
        return out

    def topology(self) -> list[list[str]]:
        """``nvidia-smi topo -m`` as rows of cells (header first); legend and ANSI dropped."""
        text = re.sub(r"\x1b\[[0-9;]*m", "", self.text("nvidia-smi-topo.txt"))
        rows: list[list[str]] = []
        for line in text.splitlines():
            if not line.strip() or line.strip().startswith("Legend"):
                if rows:
                    break
                continue
            cells = [c.strip() for c in re.split(r"\t+| {2,}", line.strip("\n")) if c.strip()]
            if not rows:
                cells = [""] + cells
            rows.append(cells)
        return rows

    # -- software ---------------------------------------------------------------------------
    def software(self) -> dict[str, str]:
        """Component -> version, in the order a person reads them."""
        out: dict[str, str] = {}
        system = self.json("system.json") or {}
        versions = self.json("versions.json") or {}
        gpus = self.json("gpus.json") or {}
        osinfo = system.get("os") if isinstance(system, dict) else None
        if isinstance(osinfo, dict) and osinfo.get("pretty_name"):
            out["OS"] = str(osinfo["pretty_name"])
        if isinstance(system, dict) and system.get("kernel"):
            kernel = str(system["kernel"])
            out["Kernel"] = kernel + (" (WSL2)" if "microsoft" in kernel.lower() or "wsl" in kernel.lower() else "")
        driver = gpus.get("driver_version") if isinstance(gpus, dict) else None
        if not driver and isinstance(versions, dict) and versions.get("driver"):
            m = re.search(r"\b(\d{3}\.\d+(?:\.\d+)?)\b", str(versions["driver"]))
            driver = m.group(1) if m else None
        if driver:
            out["NVIDIA driver"] = str(driver)
        if isinstance(gpus, dict) and gpus.get("cuda_driver_version"):
            out["CUDA (driver)"] = str(gpus["cuda_driver_version"])
        if isinstance(versions, dict):
            if versions.get("python"):
                out["Python"] = str(versions["python"])
            if versions.get("torch"):
                out["torch"] = str(versions["torch"])
            if versions.get("torch_cuda"):
                out["torch CUDA build"] = str(versions["torch_cuda"])
            if versions.get("cudnn"):
                out["cuDNN"] = str(versions["cudnn"])
            if versions.get("nccl"):
                out["NCCL"] = str(versions["nccl"])
        env = self.env()
        if env.get("CUDA_VERSION"):
            out["CUDA (container)"] = env["CUDA_VERSION"]
        return out

    def packages(self) -> dict[str, str]:
        """pip freeze as name -> version (lower-case names; VCS/URL installs keep their reference)."""
        out: dict[str, str] = {}
        for line in self.text("pip-freeze.txt").splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "==" in line:
                name, _, version = line.partition("==")
            elif " @ " in line:
                name, _, version = line.partition(" @ ")
            else:
                name, version = line, ""
            out[name.strip().lower().replace("_", "-")] = version.strip()
        return out

    def key_packages(self) -> dict[str, str]:
        pkgs = self.packages()
        wanted = {k.replace("_", "-") for k in KEY_PACKAGES}
        return {k: v for k, v in pkgs.items() if k in wanted}

    def env(self) -> dict[str, str]:
        data = self.json("env.json")
        if not isinstance(data, dict):
            return {}
        return {str(k): redact_text(str(v))[0] for k, v in data.items()}

    def interesting_env(self) -> dict[str, str]:
        """The variables that change memory, links or devices, as the child saw them."""
        env = self.env()
        return {k: v for k, v in sorted(env.items()) if k.startswith(INTERESTING_ENV)}

    # -- the run ----------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """The run as the manifest tells it, each field of the type the recorder writes (a hand-made or
        hostile manifest's other values are left out, never passed on)."""
        m = self.manifest
        raw_command = m.get("command")
        command: list[Any] = raw_command if isinstance(raw_command, list) else []
        start, end = _int(m.get("start_ns")), _int(m.get("end_ns")) or _int(m.get("heartbeat_ns"))
        duration = (end - start) / 1e9 if start is not None and end is not None and abs(end - start) < 1 << 62 \
            else None
        return {
            "host": self.host,
            "command": redact_text(" ".join(_quote(str(a)) for a in command[:_MAX_ARGS]))[0][:_MAX_TEXT],
            "cwd": redact_text(_str(m.get("cwd")) or "")[0],
            "status": _str(m.get("status")),
            "exit_code": _int(m.get("exit_code")),
            "signal": _str(m.get("signal_name")) or _str(m.get("signal")) or _int(m.get("signal")),
            "start": _str(m.get("start")),
            "end": _str(m.get("end")) or _str(m.get("heartbeat")),
            "duration_s": round(duration, 3) if duration is not None else None,
            "gpus": len(self.gpus()) or None,
        }


#: A manifest's text fields are short (a host name, an ISO time); longer ones are cut to this.
_MAX_TEXT = 4096
_MAX_ARGS = 1000


def _str(value: Any) -> str | None:
    return value[:_MAX_TEXT] if isinstance(value, str) and value else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 1 << 63 else None


#: ``nvidia-smi topo -m`` path kinds that cross a host bridge or the CPU interconnect (no PCIe switch, no NVLink)
_VIA_HOST = frozenset({"PHB", "NODE", "SYS", "SOC"})


def _quote(arg: str) -> str:
    return arg if arg and not re.search(r"[\s'\"$`\\]", arg) else "'" + arg.replace("'", "'\\''") + "'"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _link(gen: Any, width: Any) -> str:
    g = f"Gen{gen}" if isinstance(gen, int) else "Gen?"
    w = f"x{width}" if isinstance(width, int) else "x?"
    return f"{g} {w}"


def _below(cur: Any, top: Any) -> bool:
    return isinstance(cur, int) and isinstance(top, int) and 0 < cur < top


# -- reading bundles (through the bounded reader: forensics/ingest/reader.py) -----------------------
def _is_manifest(raw: bytes) -> dict[str, Any] | None:
    data = load_json(raw)
    return data if isinstance(data, dict) and data.get("format") == "gpu-forensics-bundle" else None


def _from_dir(root: Path) -> list[BundleFacts]:
    out: list[BundleFacts] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames.sort()
        seen += len(filenames)
        if seen > _MAX_MEMBERS:
            break
        if MANIFEST not in filenames:
            continue
        base = Path(dirpath)
        manifest = _is_manifest(_regular(base / MANIFEST) or b"")
        if manifest is None:
            continue
        files: dict[str, bytes] = {}
        for name in _HOST_FILES:
            raw = _regular(base / "host" / name)
            if raw is not None:
                files[name] = raw
        out.append(BundleFacts(str(base), manifest, files))
        dirnames[:] = []  # a bundle's own subdirectories hold no other bundle
    return out


def _regular(path: Path) -> bytes | None:
    """Up to :data:`_CAP` bytes of a regular file inside a bundle (never a link, FIFO or device)."""
    try:
        return read_file(path, _CAP, follow=False).data
    except OSError:
        return None


def _archive_members(raw: bytes, name: str) -> list[tuple[str, bytes]]:
    """(name, bytes) of the archive members that matter here: manifests and host files. A gzip
    layer is unpacked under the decompression budget and bomb ratio ``analyze`` has."""
    import tarfile
    import zipfile

    if raw[:2] == b"\x1f\x8b":
        limits = Limits()
        raw, _warnings, _ending = gunzip(raw, name, limits, Budget(limits))
    wanted = {MANIFEST, *_HOST_FILES}
    out: list[tuple[str, bytes]] = []
    if raw[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as zf:
                for info in zf.infolist()[:_MAX_MEMBERS]:
                    if PurePosixPath(info.filename).name in wanted and info.file_size <= _CAP:
                        out.append((info.filename, zf.read(info)))
        except (zipfile.BadZipFile, zlib.error, OSError, RuntimeError, NotImplementedError, ValueError, EOFError,
                OverflowError):
            return out
        return out
    try:
        with tarfile.open(fileobj=io.BytesIO(raw), mode="r:") as tar:
            for count, member in enumerate(tar):
                if count >= _MAX_MEMBERS:
                    break
                if member.isfile() and PurePosixPath(member.name).name in wanted and member.size <= _CAP:
                    fh = tar.extractfile(member)
                    if fh is not None:
                        out.append((member.name, fh.read(_CAP)))
    except (tarfile.TarError, OSError, EOFError, ValueError):
        return out
    return out


def _from_archive(path: Path) -> list[BundleFacts]:
    limits = Limits()
    try:
        raw = read_file(path, limits.max_file_bytes, named=True, special_cap=limits.max_special_bytes).data
    except OSError:
        return []
    members = _archive_members(raw, str(path))
    bundles: dict[str, BundleFacts] = {}
    for name, data in members:
        if PurePosixPath(name).name == MANIFEST and (manifest := _is_manifest(data)) is not None:
            prefix = name[: len(name) - len(MANIFEST)]
            bundles[prefix] = BundleFacts(f"{path}!{prefix.rstrip('/')}", manifest)
    for name, data in members:
        parts = PurePosixPath(name)
        if parts.parent.name != "host":
            continue
        prefix = str(parts.parent.parent)
        prefix = "" if prefix == "." else prefix + "/"
        if prefix in bundles:
            bundles[prefix].files[parts.name] = data
    return [bundles[k] for k in sorted(bundles)]


def _is_archive(path: Path) -> bool:
    try:
        head = read_file(path, 262, named=True).data
    except OSError:
        return False
    return head[:2] == b"\x1f\x8b" or head[:4] == b"PK\x03\x04" or head[257:262] == b"ustar"


def read_bundle_facts(paths: list[str] | tuple[str, ...]) -> list[BundleFacts]:
    """The facts of every bundle behind ``paths`` (directories, directories of bundles, archives);
    logs that are not bundles contribute nothing."""
    out: list[BundleFacts] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            out += _from_dir(p)
        elif p.is_file() and _is_archive(p):
            out += _from_archive(p)
    return out
