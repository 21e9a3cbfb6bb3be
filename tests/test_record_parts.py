"""Recorder parts on their own: redaction, arming, the NVML wrapper over the fake, call deadlines."""

from __future__ import annotations

import mmap
import os
import threading
import time
from pathlib import Path

import pytest

from forensics.record import fake_nvml
from forensics.record.arm import arm_env
from forensics.record.deadline import SLOT_BYTES, SLOTS, CallGuard, read_slots
from forensics.record.nvml import COLUMNS, FIELDS, Nvml, NvmlUnavailable, normalize_pci
from forensics.record.redact import REDACTED, is_secret_name, redact_argv, redact_env, redact_value


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                  "AWS_SESSION_TOKEN", "DB_PASSWORD", "PGPASSWORD", "MY_SERVICE_KEY", "MYSQL_PWD",
                                  "GITHUB_TOKEN", "api-key", "--hf-token", "OPENAI_API_KEY", "AZURE_CLIENT_SECRET"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["PATH", "PWD", "HOME", "CUDA_VISIBLE_DEVICES", "TOKENIZERS_PARALLELISM",
                                  "NCCL_IB_HCA", "KEYBOARD_LAYOUT", "TORCH_NCCL_TRACE_BUFFER_SIZE", "SSH_AUTH_SOCK"])
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_redaction_of_values_env_and_argv() -> None:
    assert redact_value("https://user:pa55@host:8443/x?y=1") == f"https://{REDACTED}@host:8443/x?y=1"
    assert redact_value("git+https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r") == \
        f"git+https://{REDACTED}@github.com/o/r"
    assert redact_value("key AKIAIOSFODNN7EXAMPLE here") == f"key {REDACTED} here"
    assert redact_value("plain/path:with:colons") == "plain/path:with:colons"
    env = redact_env({"HF_TOKEN": "hf_x", "PATH": "/bin", "EMPTY_TOKEN": "", "NOTE": "token hf_" + "a" * 30})
    assert env == {"HF_TOKEN": REDACTED, "PATH": "/bin", "EMPTY_TOKEN": "", "NOTE": f"token {REDACTED}"}
    argv = ["train.py", "--token", "abc", "--api-key=def", "--lr", "3e-4", "optim.password=ghi", "--verbose",
            "-k", "x"]
    assert redact_argv(argv) == ["train.py", "--token", REDACTED, f"--api-key={REDACTED}", "--lr", "3e-4",
                                 f"optim.password={REDACTED}", "--verbose", "-k", "x"]


@pytest.mark.parametrize(("torch", "buffer", "dump", "deprecated"), [
    ("2.13.0+cpu", "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", ("TORCH_NCCL_TRACE_BUFFER_SIZE",
                                                                      "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")),
    ("2.7.0", "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", ("TORCH_NCCL_TRACE_BUFFER_SIZE",
                                                                 "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")),
    ("2.5.1", "TORCH_NCCL_TRACE_BUFFER_SIZE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", ("TORCH_FR_BUFFER_SIZE",
                                                                                 "TORCH_FR_DUMP_TEMP_FILE")),
    (None, "TORCH_FR_BUFFER_SIZE", "TORCH_FR_DUMP_TEMP_FILE", ("TORCH_NCCL_TRACE_BUFFER_SIZE",)),
])
def test_arming_sets_the_names_the_childs_torch_reads(tmp_path: Path, torch: str | None, buffer: str, dump: str,
                                                      deprecated: tuple[str, ...]) -> None:
    added = arm_env({}, tmp_path, torch)
    assert added[buffer] == "2000" and added["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert not set(deprecated) & set(added)
    assert added[dump] == str(tmp_path.resolve() / "torch" / "flight-recorder-rank-")


def test_armed_paths_are_absolute_from_a_relative_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    added = arm_env({}, Path("forensics-runs/b"), "2.13.0")
    for name in ("TORCH_FR_DUMP_TEMP_FILE", "TORCHELASTIC_ERROR_FILE"):
        assert os.path.isabs(added[name]) and added[name].startswith(str(tmp_path / "forensics-runs" / "b"))


def test_arming_never_overrides_the_user(tmp_path: Path) -> None:
    added = arm_env({}, tmp_path)
    assert added["TORCHELASTIC_ERROR_FILE"] == str(tmp_path / "torch" / "elastic-error.json")
    assert added["PYTHONFAULTHANDLER"] == "1"
    mine = {"TORCH_FR_BUFFER_SIZE": "10", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "/x/", "PYTHONFAULTHANDLER": "0",
            "TORCHELASTIC_ERROR_FILE": "/e.json", "TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}
    assert arm_env(mine, tmp_path) == {}


def test_field_table_uses_the_architecture_columns() -> None:
    assert set(COLUMNS.values()) == {
        "mem_used_mib", "mem_total_mib", "util_gpu_pct", "util_mem_pct", "power_w", "power_limit_w", "temp_c",
        "sm_clock_mhz", "mem_clock_mhz", "clock_reasons", "pcie_gen", "pcie_gen_max", "pcie_width",
        "pcie_width_max", "pcie_replay", "ecc_sbe_volatile", "ecc_dbe_volatile", "remapped_pending",
        "remapped_failure"}
    calls = " ".join(f.call for f in FIELDS)
    assert "Throughput" not in calls and "Energy" not in calls
    assert normalize_pci("00000000:3B:00.0") == "0000:3b:00.0" and normalize_pci(b"0000:5d:00.0") == "0000:5d:00.0"


def _plain(name: str, gpu: int, fn, *args, extra_ms: int = 0):  # type: ignore[no-untyped-def]
    return fn(*args)


def test_wrapper_over_the_fake_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "ok:gpus=3")
    nv = Nvml(_plain)
    assert [g.pci for g in nv.gpus] == ["0000:3b:00.0", "0000:3c:00.0", "0000:3d:00.0"]
    fast, _ = nv.sample(nv.gpus[0], slow_due=False)
    full, _ = nv.sample(nv.gpus[0], slow_due=True)
    assert "pl" not in fast and full["pl"] == 700.0 and full["mt"] == 80 * 1024
    assert nv.processes(nv.gpus[0]) == [[4242, 512]]
    info = nv.static_info()
    assert info["driver_version"] == "999.99.99-fake" and info["cuda_driver_version"] == "13.0"
    assert info["gpus"][0]["serial"] is None and info["gpus"][0]["pcie_gen_max"] == 5
    assert info["p2p"]["nvlink"][0] == ["X", "NOT_SUPPORTED", "NOT_SUPPORTED"]
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "absent")
    with pytest.raises(NvmlUnavailable, match="Library Not Found"):
        Nvml(_plain)
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "nogpu")
    with pytest.raises(NvmlUnavailable, match="no GPU"):
        Nvml(_plain)


def test_unsupported_field_is_retired_and_errors_are_na(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORENSICS_FAKE_NVML", "ok")
    nv = Nvml(_plain)
    calls = {"n": 0}

    def unsupported(h: object) -> int:
        calls["n"] += 1
        raise fake_nvml.NVMLError_NotSupported()

    def flaky(h: object, sensor: int) -> int:
        raise fake_nvml.NVMLError(999)

    monkeypatch.setattr(fake_nvml, "nvmlDeviceGetPowerUsage", unsupported)
    monkeypatch.setattr(fake_nvml, "nvmlDeviceGetTemperature", flaky)
    for _ in range(3):
        values, _ = nv.sample(nv.gpus[0], slow_due=False)
        assert "pw" not in values and values["tc"] is None
    assert calls["n"] == 1


def test_deadline_page_reports_a_call_that_does_not_return() -> None:
    page = mmap.mmap(-1, SLOTS * SLOT_BYTES)
    guard = CallGuard(page, 1)
    release = threading.Event()
    t = threading.Thread(target=guard, args=("nvmlDeviceGetPowerUsage", 3, release.wait, 5))
    t.start()
    time.sleep(0.05)
    assert read_slots(page, time.time_ns(), 10**10) == []
    [stuck] = read_slots(page, time.time_ns() + 2 * 10**9, 10**9)
    assert (stuck.slot, stuck.call, stuck.gpu) == (1, "nvmlDeviceGetPowerUsage", 3)
    release.set()
    t.join()
    assert read_slots(page, time.time_ns() + 2 * 10**9, 10**9) == []
    assert guard("x", 0, lambda: 42, extra_ms=5000) == 42
