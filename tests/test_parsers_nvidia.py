"""NVIDIA-tool parsers: corpus files are detected as the right kind, key facts become events with
the right kind/attrs/GPU, time series become MetricSamples, and no input raises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from forensics.parsers.common.base import ParseContext
from forensics.parsers.registry import detect, parser_by_name
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis import Options, parse_input
from forensics.events import Event, MetricSample, Severity, TsSource
from forensics.ingest.sources import InputFile, expand_inputs
from forensics.ingest.textdoc import TextDocument

CASES = Path(__file__).parent / "corpus" / "cases"

NVIDIA_PARSERS = ("nvidia-smi", "nvidia-smi-q", "nvidia-smi-xml", "nvidia-smi-csv", "nvidia-smi-dmon",
                  "nvidia-smi-pmon", "nvidia-smi-topo", "dcgmi-diag", "nvidia-bug-report", "lspci",
                  "k8s-device-plugin")

Parsed = tuple[str, list[Event], list[MetricSample], list[str]]


def _ns(text: str) -> int:
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (dt - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


def _file(path: Path) -> Parsed:
    (item,) = list(expand_inputs([str(path)]))
    report, events, metrics = parse_input(item, Options())
    return report.kind, events, metrics, report.warnings


def _text(text: str, options: Options | None = None) -> Parsed:
    report, events, metrics = parse_input(InputFile("out.txt", text.encode(), mtime=1.7e9), options or Options())
    return report.kind, events, metrics, report.warnings


def _sample(name: str, index: int = 0) -> str:
    return parser_by_name(name).samples[index]


@pytest.mark.parametrize(
    ("case", "file", "kind"),
    [
        ("stall-nvidia-smi-one-gpu-idle", "nvidia-smi.txt", "nvidia-smi"),
        ("wsl41062-dxg-eoverflow-nvml-blocked", "nvidia-smi.txt", "nvidia-smi"),
        ("stas00-xid63-row-remap-pending", "nvidia-smi.txt", "nvidia-smi-q"),
        ("janhq183-lspci-link-downgraded-riser", "lspci.txt", "lspci"),
        ("k8sdp189-xid69-device-plugin", "device-plugin.log", "k8s-device-plugin"),
    ],
)
def test_corpus_file_is_detected_and_parses_cleanly(case: str, file: str, kind: str) -> None:
    got, events, metrics, warnings = _file(CASES / case / file)
    assert got == kind
    assert not warnings
    assert events or metrics


def test_nvidia_smi_table_gives_one_sample_per_gpu_and_gpu_info() -> None:
    _, events, metrics, _ = _file(CASES / "stall-nvidia-smi-one-gpu-idle" / "nvidia-smi.txt")
    assert [m.gpu for m in metrics] == ["0000:53:00.0", "0000:64:00.0"]
    first = metrics[0].values
    assert first["util_gpu_pct"] == 100 and first["power_w"] == 116 and first["power_limit_w"] == 700
    assert first["mem_used_mib"] == 55217 and first["mem_total_mib"] == 81559 and first["temp_c"] == 37
    assert metrics[0].ts == _ns("2024-09-12T23:12:25Z") and metrics[0].ts_source is TsSource.LOCAL
    infos = [e for e in events if e.kind == "gpu-info"]
    assert [e.attrs["name"] for e in infos] == ["NVIDIA H100 80GB HBM3"] * 2
    assert infos[0].attrs["driver"] == "535.183.01" and infos[0].attrs["index"] == 0


def test_nvidia_smi_snapshots_repeat_and_processes_map_to_gpus() -> None:
    snap = """Thu Nov 14 10:11:{s} 2024
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 566.14                 Driver Version: 566.14         CUDA Version: 12.7     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                  Driver-Model | Bus-Id          Disp.A | Volatile Uncorr. ECC |
|=========================================+========================+======================|
|   0  NVIDIA GeForce RTX 5090      WDDM  |   00000000:01:00.0  On |                  N/A |
|  0%   66C    P1            512W /  575W |   29010MiB /  32607MiB |     {u}%      Default |
+-----------------------------------------+------------------------+----------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|=========================================================================================|
|    0   N/A  N/A            4321      C   ...\\Python312\\python.exe              N/A      |
+-----------------------------------------------------------------------------------------+
"""
    kind, events, metrics, warnings = _text(snap.format(s="10", u="98") + snap.format(s="11", u="0"))
    assert kind == "nvidia-smi" and not warnings
    assert [m.values["util_gpu_pct"] for m in metrics] == [98, 0]
    assert [m.ts for m in metrics] == [_ns("2024-11-14T10:11:10Z"), _ns("2024-11-14T10:11:11Z")]
    assert all(m.gpu == "0000:01:00.0" for m in metrics)
    procs = [e for e in events if "pid" in e.attrs]
    assert len(procs) == 1 and procs[0].attrs["pid"] == 4321 and procs[0].gpu == "0000:01:00.0"
    assert sum(1 for e in events if "name" in e.attrs) == 1  # gpu-info once per GPU


@pytest.mark.parametrize(
    ("text", "code", "gpu"),
    [
        ("Failed to initialize NVML: GPU access blocked by the operating system", "OPERATING_SYSTEM", None),
        ("Unable to determine the device handle for GPU0000:03:00.0: Unknown Error", "UNKNOWN", "0000:03:00.0"),
        ("Unable to determine the device handle for GPU 0000:05:00.0: GPU is lost.  Reboot the system to recover "
         "this GPU", "GPU_IS_LOST", "0000:05:00.0"),
        ("Unable to determine the device handle for GPU0: 0000:01:00.0: GPU is lost.  Reboot the system to "
         "recover this GPU", "GPU_IS_LOST", "0000:01:00.0"),
        ("No devices were found", "NOT_FOUND", None),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
         "NVIDIA driver is installed and running.", "DRIVER_NOT_LOADED", None),
        ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124",
         "LIB_RM_VERSION_MISMATCH", None),
    ],
)
def test_nvidia_smi_error_texts_are_error_events(text: str, code: str, gpu: str | None) -> None:
    kind, events, _, _ = _text(text + "\n")
    assert kind == "nvidia-smi"
    ev = events[0]
    assert ev.kind == "nvidia-smi" and ev.severity is Severity.ERROR
    assert ev.attrs["nvml_error"] == code and ev.gpu == gpu


def test_nvidia_smi_q_remap_pending_and_ecc_counters() -> None:
    _, events, metrics, _ = _file(CASES / "stas00-xid63-row-remap-pending" / "nvidia-smi.txt")
    info, pending = events
    assert info.kind == "gpu-info" and info.gpu == "0000:10:1c.0"
    assert info.attrs["name"] == "NVIDIA A100-SXM4-80GB" and info.attrs["driver"] == "510.73.08"
    assert info.attrs["remapped_pending"] is True and info.attrs["remapped_failure"] is False
    assert pending.severity is Severity.WARNING and pending.attrs["remapped_pending"] is True
    assert "Remapped Rows Pending: Yes" in pending.message
    (m,) = metrics
    assert m.values["remapped_pending"] == 1 and m.values["ecc_sbe_volatile"] == 177
    assert m.values["ecc_dbe_volatile"] == 0
    assert m.ts == _ns("2023-06-07T19:32:16Z")


def test_nvidia_smi_q_link_below_max_and_readings() -> None:
    kind, events, metrics, warnings = _text(_sample("nvidia-smi-q", 1))
    assert kind == "nvidia-smi-q" and not warnings
    link = next(e for e in events if e.kind == "pcie-link")
    assert link.severity is Severity.WARNING and link.attrs["width"] == 4 and link.attrs["width_max"] == 16
    (m,) = metrics
    assert m.values == {"util_gpu_pct": 97, "util_mem_pct": 41, "mem_total_mib": 16303, "mem_used_mib": 9120,
                        "temp_c": 61, "power_w": 231.52, "power_limit_w": 300, "pcie_gen": 4, "pcie_gen_max": 4,
                        "pcie_width": 4, "pcie_width_max": 16, "pcie_replay": 0}


def test_nvidia_smi_xml_reports_pcie_sram_uncorrectable_errors() -> None:
    kind, events, metrics, warnings = _text(_sample("nvidia-smi-xml"))
    assert kind == "nvidia-smi-xml" and not warnings
    ecc = next(e for e in events if "sram_sources" in e.attrs)
    assert ecc.severity is Severity.ERROR and ecc.gpu == "0000:01:00.0"
    assert ecc.attrs["sram_sources"] == {"pcie": 2} and "pcie=2" in ecc.message
    assert metrics[0].values["ecc_dbe_volatile"] == 2 and metrics[0].values["temp_c"] == 45


def test_q_text_and_xml_of_the_same_gpu_give_the_same_events() -> None:
    text = """Timestamp                                 : Thu Nov 14 10:12:00 2024
Driver Version                            : 566.14

Attached GPUs                             : 1
GPU 00000000:01:00.0
    Product Name                          : NVIDIA GeForce RTX 5090
    GPU UUID                              : GPU-1c9d7c35-0f9e-4c1e-8f5e-3a2b1c0d9e8f
    PCI
        GPU Link Info
            PCIe Generation
                Max                       : 5
                Current                   : 5
            Link Width
                Max                       : 16x
                Current                   : 16x
        Replays Since Reset               : 0
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 2
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            SRAM Correctable              : 0
            SRAM Uncorrectable            : 2
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
            Aggregate Uncorrectable SRAM Sources
                SRAM L2                   : 0
                SRAM SM                   : 0
                SRAM Microcontroller      : 0
                SRAM PCIE                 : 2
                SRAM Other                : 0
    Temperature
        GPU Current Temp                  : 45 C
"""
    _, q_events, q_metrics, _ = _text(text)
    _, x_events, x_metrics, _ = _text(_sample("nvidia-smi-xml"))

    def shape(evs: list[Event]) -> list[tuple[str, str, str | None, Severity, int | None]]:
        return [(e.kind, e.message, e.gpu, e.severity, e.ts) for e in evs]

    assert shape(q_events) == shape(x_events)
    assert [dict(m.values) for m in q_metrics] == [dict(m.values) for m in x_metrics]


# `nvidia-smi -q` GPU Reset Status and SRAM sources. The reset-status lines are verbatim from a public
# RoboTwin2 server note (RTX 3090 GPU 2 at 00000000:39:00.0, driver 535.247.01); the SRAM source lines
# are the field names of a real H100 `nvidia-smi -q` (driver 550), with a PCIE count set.
RESET_Q = """==============NVSMI LOG==============

Timestamp                                 : Sat Jul 25 16:59:02 2026
Driver Version                            : 535.247.01
CUDA Version                              : 12.2

Attached GPUs                             : 8
GPU 00000000:39:00.0
    Product Name                          : NVIDIA GeForce RTX 3090
    GPU Reset Status
        Reset Required                    : {reset}
        Drain and Reset Recommended       : {drain}
    ECC Errors
        Volatile
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
        Aggregate
            SRAM Correctable              : 0
            SRAM Uncorrectable Parity     : 0
            SRAM Uncorrectable SEC-DED    : 0
            DRAM Correctable              : 0
            DRAM Uncorrectable            : 0
            SRAM Threshold Exceeded       : No
        Aggregate Uncorrectable SRAM Sources
            SRAM L2                       : 0
            SRAM SM                       : 0
            SRAM Microcontroller          : 0
            SRAM PCIE                     : {pcie}
            SRAM Other                    : 0
"""
# The same facts as `nvidia-smi -q -x` prints them (tag names as in real 555/575-driver XML dumps).
RESET_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<timestamp>Sat Jul 25 16:59:02 2026</timestamp>
\t<driver_version>535.247.01</driver_version>
\t<attached_gpus>8</attached_gpus>
\t<gpu id="00000000:39:00.0">
\t\t<product_name>NVIDIA GeForce RTX 3090</product_name>
\t\t<gpu_reset_status>
\t\t\t<reset_required>{reset}</reset_required>
\t\t\t<drain_and_reset_recommended>{drain}</drain_and_reset_recommended>
\t\t</gpu_reset_status>
\t\t<ecc_errors>
\t\t\t<volatile>
\t\t\t\t<sram_correctable>0</sram_correctable>
\t\t\t\t<sram_uncorrectable_parity>0</sram_uncorrectable_parity>
\t\t\t\t<sram_uncorrectable_secded>0</sram_uncorrectable_secded>
\t\t\t\t<dram_correctable>0</dram_correctable>
\t\t\t\t<dram_uncorrectable>0</dram_uncorrectable>
\t\t\t</volatile>
\t\t\t<aggregate>
\t\t\t\t<sram_correctable>0</sram_correctable>
\t\t\t\t<sram_uncorrectable_parity>0</sram_uncorrectable_parity>
\t\t\t\t<sram_uncorrectable_secded>0</sram_uncorrectable_secded>
\t\t\t\t<dram_correctable>0</dram_correctable>
\t\t\t\t<dram_uncorrectable>0</dram_uncorrectable>
\t\t\t\t<sram_threshold_exceeded>No</sram_threshold_exceeded>
\t\t\t</aggregate>
\t\t\t<aggregate_uncorrectable_sram_sources>
\t\t\t\t<sram_l2>0</sram_l2>
\t\t\t\t<sram_sm>0</sram_sm>
\t\t\t\t<sram_microcontroller>0</sram_microcontroller>
\t\t\t\t<sram_pcie>{pcie}</sram_pcie>
\t\t\t\t<sram_other>0</sram_other>
\t\t\t</aggregate_uncorrectable_sram_sources>
\t\t</ecc_errors>
\t</gpu>
</nvidia_smi_log>
"""


def _notable(events: list[Event]) -> list[Event]:
    return [e for e in events if e.message.startswith("GPU 0000:39:00.0:")]


@pytest.mark.parametrize("template", [RESET_Q, RESET_XML], ids=["q", "xml"])
def test_reset_required_and_drain_and_reset_become_error_events(template: str) -> None:
    kind, events, _, warnings = _text(template.format(reset="Yes", drain="Yes", pcie=0))
    assert kind in ("nvidia-smi-q", "nvidia-smi-xml") and not warnings
    notable = _notable(events)
    reset = next(e for e in notable if e.attrs.get("reset_required") is True)
    drain = next(e for e in notable if e.attrs.get("drain_and_reset_recommended") is True)
    assert reset.severity is Severity.ERROR and "Reset Required: Yes" in reset.message
    assert drain.severity is Severity.ERROR and "Drain and Reset Recommended: Yes" in drain.message
    assert reset.gpu == drain.gpu == "0000:39:00.0"
    info = next(e for e in events if e.kind == "gpu-info" and "reset_required" in e.attrs and e not in notable)
    assert info.attrs["reset_required"] is True and info.attrs["drain_and_reset_recommended"] is True


@pytest.mark.parametrize("template", [RESET_Q, RESET_XML], ids=["q", "xml"])
@pytest.mark.parametrize("value", ["No", "N/A", "Requested functionality has been deprecated"])
def test_a_healthy_or_deprecated_reset_status_says_nothing(template: str, value: str) -> None:
    _, events, _, _ = _text(template.format(reset=value, drain=value, pcie=0))
    assert _notable(events) == []


@pytest.mark.parametrize("template", [RESET_Q, RESET_XML], ids=["q", "xml"])
def test_sram_source_counts_are_reported_while_the_totals_read_zero(template: str) -> None:
    _, events, _, _ = _text(template.format(reset="No", drain="No", pcie=3))
    (sram,) = _notable(events)
    assert sram.severity is Severity.ERROR and sram.attrs["sram_sources"] == {"pcie": 3}
    assert "SRAM sources: pcie=3" in sram.message and "ecc_uncorrectable_aggregate" not in sram.attrs


def test_reset_status_reads_the_same_from_text_and_xml() -> None:
    def shape(events: list[Event]) -> list[tuple[str, str | None, Severity]]:
        return [(e.message, e.gpu, e.severity) for e in _notable(events)]

    q = _text(RESET_Q.format(reset="Yes", drain="No", pcie=2))[1]
    x = _text(RESET_XML.format(reset="Yes", drain="No", pcie=2))[1]
    assert shape(q) == shape(x) and len(shape(q)) == 2


def test_signatures_anchor_on_the_reset_state_and_the_pcie_sram_count() -> None:
    from forensics.evaluation.examples import analyze_text
    from forensics.match import load_signatures

    signatures = load_signatures(())
    fired = {f.signature for f in analyze_text(RESET_Q.format(reset="Yes", drain="No", pcie=0), signatures)}
    assert "driver-hang" in fired
    fired = {f.signature for f in analyze_text(RESET_XML.format(reset="No", drain="Yes", pcie=0), signatures)}
    assert "driver-hang" in fired
    fired = {f.signature for f in analyze_text(RESET_Q.format(reset="No", drain="No", pcie=1), signatures)}
    assert fired == {"p2p-sram-error"}
    assert not analyze_text(RESET_Q.format(reset="No", drain="No", pcie=0), signatures)


def test_query_gpu_csv_maps_columns_and_local_times() -> None:
    kind, events, metrics, warnings = _text(_sample("nvidia-smi-csv"))
    assert kind == "nvidia-smi-csv" and not warnings
    assert [m.gpu for m in metrics] == ["0000:01:00.0", "0000:0c:00.0", "0000:01:00.0"]
    assert metrics[0].values == {"util_gpu_pct": 98, "mem_used_mib": 29010, "mem_total_mib": 32607,
                                 "power_w": 512.31, "temp_c": 66, "pcie_gen": 5, "pcie_gen_max": 5}
    assert "power_w" not in metrics[2].values  # [N/A]
    assert metrics[0].ts == _ns("2024-11-14T10:11:10.125Z") and metrics[0].ts_source is TsSource.LOCAL
    assert [e.attrs["name"] for e in events] == ["NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5070 Ti"]
    _, _, metrics, _ = _text(_sample("nvidia-smi-csv"), Options(tz=timezone(timedelta(hours=1))))
    assert metrics[0].ts == _ns("2024-11-14T09:11:10.125Z") and metrics[0].ts_source is TsSource.EXACT


def test_query_gpu_csv_without_header_reads_identity_and_says_why() -> None:
    text = "2024/11/14 10:11:10.125, 00000000:01:00.0, 98, 29010\n2024/11/14 10:11:11.125, 00000000:01:00.0, 0, 1\n"
    kind, events, metrics, warnings = _text(text)
    assert kind == "nvidia-smi-csv" and not metrics
    assert [e.gpu for e in events] == ["0000:01:00.0"] and any("header" in w for w in warnings)


def test_dmon_with_and_without_date_columns() -> None:
    kind, _, metrics, warnings = _text(_sample("nvidia-smi-dmon"))
    assert kind == "nvidia-smi-dmon" and not warnings
    assert [(m.gpu, m.values["util_gpu_pct"]) for m in metrics] == [("0", 98), ("1", 97), ("0", 0)]
    assert metrics[0].values["power_w"] == 512 and metrics[0].values["sm_clock_mhz"] == 2790
    assert "mem_temp" not in metrics[0].values and metrics[0].ts is None
    repeated = _sample("nvidia-smi-dmon", 1) + "\n".join(_sample("nvidia-smi-dmon", 1).splitlines()[:2]) + \
        "\n 20241114   10:11:11      0    118     60      -      0      0      0      0\n"
    _, _, metrics, _ = _text(repeated)
    assert [m.ts for m in metrics] == [_ns("2024-11-14T10:11:10Z")] * 2 + [_ns("2024-11-14T10:11:11Z")]
    assert metrics[-1].values["util_gpu_pct"] == 0


def test_pmon_gives_one_event_per_process_and_gpu() -> None:
    kind, events, _, _ = _text(_sample("nvidia-smi-pmon"))
    assert kind == "nvidia-smi-pmon"
    assert [(e.gpu, e.attrs["pid"]) for e in events] == [("0", 4321), ("1", 4322)]
    _, events, _, _ = _text(_sample("nvidia-smi-pmon", 1))
    assert events[0].attrs["process"] == "python train.py" and events[0].ts == _ns("2024-11-14T10:11:10Z")


def test_topo_matrix_flags_pairs_without_direct_p2p() -> None:
    kind, events, _, _ = _text(_sample("nvidia-smi-topo"))
    assert kind == "nvidia-smi-topo"
    pair = next(e for e in events if "link" in e.attrs)
    assert pair.attrs["link"] == "PHB" and pair.attrs["p2p_direct"] is False and "no direct" in pair.message
    assert [e.attrs.get("cpu_affinity") for e in events if "cpu_affinity" in e.attrs] == ["0-31", "0-31"]
    nvlink = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV12\t0-63\t0\nGPU1\tNV12\t X \t0-63\t0\n"
    _, events, _, _ = _text(nvlink)
    pair = next(e for e in events if "link" in e.attrs)
    assert pair.attrs["link"] == "NV12" and pair.attrs["p2p_direct"] is True


def test_dcgmi_diag_failed_tests_with_wrapped_warning() -> None:
    kind, events, _, warnings = _text(_sample("dcgmi-diag"))
    assert kind == "dcgmi-diag" and not warnings
    failed = [e for e in events if e.attrs.get("result") == "fail"]
    assert [e.attrs["test"] for e in failed] == ["Page Retirement/Row Remap", "GPU Memory"]
    assert all(e.severity is Severity.ERROR and e.gpu == "1" for e in failed)
    assert failed[0].attrs["notes"] == ["GPU 1 There are 1 uncorrectable memory errors and row remappings are pending."]
    summary = events[-1]
    assert summary.attrs["failed"] == 2 and summary.attrs["tests"] == 6


def test_bug_report_sections_go_to_their_parsers_with_real_line_numbers() -> None:
    text = _sample("nvidia-bug-report")
    kind, events, metrics, warnings = _text(text)
    assert kind == "nvidia-bug-report" and not warnings
    lines = text.splitlines()
    pending = next(e for e in events if e.attrs.get("remapped_pending") is True and e.severity is Severity.WARNING)
    assert lines[pending.origin.line - 1].startswith("GPU 00000000:10:1C.0")
    assert pending.ts == _ns("2023-06-07T19:32:16Z")
    link = next(e for e in events if e.kind == "pcie-link")
    assert "LnkSta" in lines[link.origin.line - 1] and link.gpu == "0000:10:1c.0"
    doc_offsets = text.encode()
    assert doc_offsets[link.origin.offset:].startswith(lines[link.origin.line - 1].encode())
    assert metrics and metrics[0].gpu == "0000:10:1c.0"


def test_lspci_link_downgrade_speed_is_info_width_is_warning() -> None:
    _, events, _, _ = _file(CASES / "janhq183-lspci-link-downgraded-riser" / "lspci.txt")
    (ev,) = events
    assert ev.kind == "pcie-link" and ev.severity is Severity.INFO and ev.gpu is None
    assert (ev.attrs["gen"], ev.attrs["gen_max"], ev.attrs["width"], ev.attrs["width_max"]) == (1, 4, 16, 16)
    assert ev.attrs["speed_downgraded"] is True and ev.attrs["width_downgraded"] is False
    _, events, _, _ = _text(_sample("lspci", 1))
    assert [e.kind for e in events] == ["gpu-info", "pcie-link"]  # the audio function is not a GPU
    assert events[1].severity is Severity.WARNING and events[1].gpu == "0000:0c:00.0"


def test_device_plugin_xid_event() -> None:
    _, events, _, _ = _file(CASES / "k8sdp189-xid69-device-plugin" / "device-plugin.log")
    xid, unhealthy = events
    assert xid.kind == "xid" and xid.attrs["xid"] == 69 and xid.severity is Severity.ERROR
    assert xid.gpu == xid.attrs["uuid"] == "GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8"
    assert xid.ts == _ns("2020-08-10T19:09:42Z") and xid.ts_source is TsSource.LOCAL
    assert unhealthy.kind == "log" and unhealthy.attrs["unhealthy"] is True
    _, events, _, _ = _text(_sample("k8s-device-plugin", 1))
    (xid,) = [e for e in events if e.kind == "xid"]
    assert xid.attrs["xid"] == 79 and xid.gpu == "GPU-1c9d7c35-0f9e-4c1e-8f5e-3a2b1c0d9e8f"


@pytest.mark.parametrize("name", NVIDIA_PARSERS)
@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.characters(codec="utf-8"), max_size=600))
def test_parsers_never_raise_on_arbitrary_text(name: str, text: str) -> None:
    parser = parser_by_name(name)
    prefix = (parser.samples[0].splitlines(keepends=True) or [""])[0]
    for body in (text, prefix + text, parser.samples[0][: len(text)] + text):
        doc = TextDocument.from_bytes(body.encode(), "fuzz")
        ctx = ParseContext(path="fuzz", source="file:fuzz", year=2025)
        list(parser.parse(doc, ctx))
        parser.detect(doc.head())


def test_detection_of_nvidia_samples_is_not_claimed_by_another_parser() -> None:
    for name in NVIDIA_PARSERS:
        for sample in parser_by_name(name).samples:
            assert detect(TextDocument.from_bytes(sample.encode(), "s").head())[0].name == name


#: A user's error pasted above the nvidia-smi table they ran next, as posted in
#: https://github.com/microsoft/Bringing-Old-Photos-Back-to-Life/issues/28 (cut in the process table).
_ERROR_ABOVE_TABLE = """\
when I run code\uff0cget the error like thie
"RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable"

I already installed cuna,nvidia driver,check the processes, this is the info
(venv) dash@dash-KVM:~/Bringing-Old-Photos-Back-to-Life-master$ nvidia-smi 
Fri Oct 23 11:07:33 2020       
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 440.118.02   Driver Version: 440.118.02   CUDA Version: 10.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GRID T4-8Q          On   | 00000000:00:09.0 Off |                  N/A |
| N/A   N/A    P8    N/A /  N/A |    592MiB /  8192MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""  # noqa: W291

#: Host names and a date above a healthy table, from https://github.com/cBio/cbio-cluster/issues/144.
_PROSE_ABOVE_TABLE = """\
gpu-2-16-gpu1
1
gpu-2-16.local
Thu Oct 16 23:48:03 2014       
+------------------------------------------------------+                       
| NVIDIA-SMI 340.29     Driver Version: 340.29         |                       
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX TITAN   Off  | 0000:03:00.0     N/A |                  N/A |
| 57%   79C    P0    N/A /  N/A |    362MiB /  6143MiB |     N/A    E. Thread |
+-------------------------------+----------------------+----------------------+
"""  # noqa: W291


def test_lines_pasted_around_the_table_are_read_as_text() -> None:
    kind, events, samples, _ = _text(_ERROR_ABOVE_TABLE)
    assert kind == "nvidia-smi" and len(samples) == 1
    err = [e for e in events if "busy or unavailable" in e.message]
    assert err and err[0].origin.line == 2  # at its own line of the raw file
    kind, events, samples, _ = _text(_PROSE_ABOVE_TABLE)
    assert kind == "nvidia-smi" and len(samples) == 1
    assert [e.kind for e in events] == ["gpu-info"]  # host names and a date are no events
