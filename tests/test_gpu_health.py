"""GPU health tools' own output as evidence without any Xid line: nvidia-smi -q ECC / retired pages /
remapped rows / clock reasons / PCIe link (also excerpts without the GPU header and grepped
counters), the default table's ECC cell, dcgmi health and diag, the DCGM host-engine log."""

from __future__ import annotations

from pathlib import Path

from forensics.analysis import Options, analyze, parse_input
from forensics.events import Event, Severity
from forensics.ingest.sources import InputFile

DATA = Path(__file__).parent / "data" / "health"


def _events(text: str) -> tuple[str, list[Event]]:
    report, events, _metrics = parse_input(InputFile("out.txt", text.encode(), mtime=1.7e9), Options())
    return report.kind, events


def _root(path: Path) -> str | None:
    return analyze([str(path)], Options()).verdict.root_cause_id


def _risks(path: Path) -> list[str]:
    return [f.signature for f in analyze([str(path)], Options()).findings if f.risk]


def test_q_excerpt_without_gpu_header_reads_volatile_and_aggregate_sram() -> None:
    kind, events = _events((DATA / "stas00-smi-q-sram-uncorrectable.txt").read_text())
    assert kind == "nvidia-smi-q"
    (ecc,) = [e for e in events if "uncorrectable ECC errors" in e.message]
    assert ecc.severity is Severity.ERROR
    assert ecc.attrs["ecc_uncorrectable_volatile"] == 1 and ecc.attrs["ecc_uncorrectable_aggregate"] == 5
    assert ecc.attrs["ecc_uncorrectable_parts"] == {"volatile SRAM": 1, "aggregate SRAM": 5}
    assert ecc.gpu is None


def test_uncorrectable_sram_count_is_the_root_cause() -> None:
    assert _root(DATA / "stas00-smi-q-sram-uncorrectable.txt") == "xid-ecc-dbe"
    assert _root(DATA / "stas00-smi-q-grep-uncorrectable.txt") == "xid-ecc-dbe"


def test_aggregate_only_count_is_a_risk_not_a_cause(tmp_path: Path) -> None:
    text = (DATA / "stas00-smi-q-sram-uncorrectable.txt").read_text()
    lifetime_only = text.replace("SRAM Uncorrectable            : 1", "SRAM Uncorrectable            : 0")
    p = tmp_path / "q.txt"
    p.write_text(lifetime_only)
    assert _root(p) is None
    assert "xid-ecc-dbe" in _risks(p)


def test_older_double_bit_layout_retired_pages_and_exhausted_banks() -> None:
    # Shape: the pre-R450 "Single Bit / Double Bit" ECC layout and the Retired Pages / Remapped Rows
    # sections as the nvidia-smi documentation names their fields.
    text = """GPU 00000000:84:00.0
    Product Name                    : Tesla V100-PCIE-16GB
    ECC Errors
        Volatile
            Single Bit
                Device Memory       : 12
                Total               : 12
            Double Bit
                Device Memory       : 2
                Register File       : 0
                Total               : 2
        Aggregate
            Single Bit
                Total               : 40
            Double Bit
                Total               : 3
    Retired Pages
        Single Bit ECC              : 1
        Double Bit ECC              : 3
        Pending Page Blacklist      : No
    Remapped Rows
        Correctable Error           : 0
        Uncorrectable Error         : 2
        Pending                     : No
        Remapping Failure Occurred  : No
        Bank Remap Availability Histogram
            Max                     : 638 bank(s)
            High                    : 0 bank(s)
            Partial                 : 1 bank(s)
            Low                     : 0 bank(s)
            None                    : 1 bank(s)
"""
    kind, events = _events(text)
    assert kind == "nvidia-smi-q"
    msgs = {e.message for e in events}
    ecc = next(e for e in events if "uncorrectable ECC errors" in e.message)
    assert ecc.attrs["ecc_uncorrectable_volatile"] == 2 and ecc.attrs["ecc_uncorrectable_aggregate"] == 3
    assert ecc.gpu == "0000:84:00.0"
    assert any("retired pages: 3 for double-bit" in m for m in msgs)
    assert any("rows remapped after uncorrectable errors: 2" in m for m in msgs)
    assert any("1 memory bank(s) have no spare row left" in m for m in msgs)


def test_healthy_q_counters_stay_quiet() -> None:
    text = (DATA / "stas00-smi-q-sram-uncorrectable.txt").read_text().replace(": 1\n", ": 0\n").replace(": 5\n",
                                                                                                    ": 0\n")
    _kind, events = _events(text)
    assert not [e for e in events if e.severity >= Severity.WARNING]


def test_table_ecc_cell() -> None:
    healthy = (DATA / "k8sdp243-nvidia-smi-table.txt").read_text()
    kind, events = _events(healthy)
    assert kind == "nvidia-smi"
    assert not [e for e in events if "Volatile Uncorr" in e.message]
    # the same row with a count in the cell (shape: k8s-device-plugin#267 shows such a row as a screenshot)
    _kind, events = _events(healthy.replace("Off |                    0 |", "Off |                    1 |"))
    (ecc,) = [e for e in events if "Volatile Uncorr. ECC 1" in e.message]
    assert ecc.gpu == "0000:00:07.0" and ecc.severity is Severity.ERROR


def test_dcgm_hostengine_health_line_and_noise() -> None:
    kind, events = _events((DATA / "dcgm270-hostengine-health-thermal.log").read_text())
    assert kind == "dcgm-hostengine"
    (ev,) = events
    assert ev.kind == "dcgm" and ev.gpu == "2" and ev.attrs["health_system"] == "Thermal"
    assert ev.message.startswith("DCGM health Thermal: Warning - Detected clocks event due to thermal violation")
    assert _root(DATA / "dcgm270-hostengine-health-thermal.log") == "thermal-or-power-throttle"
    kind, events = _events((DATA / "dcgm174-hostengine-nvswitch-noise.log").read_text())
    assert kind == "dcgm-hostengine"
    assert len(events) == 3  # the same poll error, kept a few times only
    assert events[0].ts is not None and events[0].attrs["module"] == "NvSwitch"
    assert events[0].attrs["src"].endswith("DcgmModuleNvSwitch.cpp:388")
    assert _root(DATA / "dcgm174-hostengine-nvswitch-noise.log") is None


def test_dcgmi_health_json_healthy_and_warning() -> None:
    kind, events = _events((DATA / "dcgm263-health-healthy.json").read_text())
    assert kind == "dcgmi-json"
    assert [e.message for e in events] == ["dcgmi health: Overall Health Healthy"]
    # Shape: the same report with a GPU whose NVLink and memory systems warn (the children layout of
    # `dcgmi health -c -j` in DCGM 3.x).
    text = """{"body": {"GPU ID: 3": {"children": {"NVLink system": {"children": {"Warning": {"value":
 "Detected a NvLink CRC flit error rate above threshold for GPU 3"}}, "value": "Warning"},
 "Memory system": {"children": {"Failure": {"value": "A double-bit ECC error has occurred on GPU 3."}},
 "value": "Failure"}}, "value": "Failure"}, "Overall Health": {"value": "Failure"}},
 "header": ["Health Monitor Report"]}"""
    kind, events = _events(text)
    assert kind == "dcgmi-json"
    by = {e.attrs["health_system"]: e for e in events if "health_system" in e.attrs}
    assert set(by) == {"NVLink", "Memory"} and all(e.gpu == "3" for e in by.values())
    assert by["Memory"].severity is Severity.ERROR and "double-bit ECC error" in by["Memory"].message


def test_dcgmi_diag_json() -> None:
    # Shape: `dcgmi diag -r 3 -j` layout of DCGM 3.x (test_categories → tests → results).
    text = """{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
 {"name": "GPU Memory", "results": [{"gpu_id": "0", "status": "Pass"},
  {"gpu_id": "1", "status": "Fail", "warnings": [{"warning": "GPU 1 had uncorrectable memory errors", "error_id": 3}]}]}
 ]}], "version": "3.3.5"}}"""
    kind, events = _events(text)
    assert kind == "dcgmi-json"
    (ev,) = events
    assert ev.message == "dcgmi diag GPU Memory: Fail - GPU: 1 — GPU 1 had uncorrectable memory errors"
    assert ev.gpu == "1" and ev.severity is Severity.ERROR


def test_dcgmi_health_table() -> None:
    from forensics.parsers.registry import parser_by_name

    kind, events = _events(parser_by_name("dcgmi-health").samples[0])
    assert kind == "dcgmi-health"
    warn = next(e for e in events if e.attrs.get("health_system") == "PCIe")
    assert warn.gpu == "0" and "13 Reconnect PCIe card." in warn.message
    assert any(e.attrs.get("overall") == "warning" for e in events)


def test_xml_retired_pages_and_remap_histogram() -> None:
    # Shape: `nvidia-smi -q -x` tags of the retired-pages and row-remapper sections (nvsmi DTD names).
    text = """<?xml version="1.0" ?>
<nvidia_smi_log>
  <driver_version>535.161.08</driver_version>
  <gpu id="00000000:3B:00.0">
    <product_name>NVIDIA A100-SXM4-80GB</product_name>
    <retired_pages>
      <multiple_single_bit_retirement><retired_count>0</retired_count></multiple_single_bit_retirement>
      <double_bit_retirement><retired_count>2</retired_count></double_bit_retirement>
      <pending_blacklist>No</pending_blacklist>
      <pending_retirement>No</pending_retirement>
    </retired_pages>
    <remapped_rows>
      <remapped_row_corr>0</remapped_row_corr>
      <remapped_row_unc>1</remapped_row_unc>
      <remapped_row_pending>No</remapped_row_pending>
      <remapped_row_failure>No</remapped_row_failure>
      <remapped_row_histogram>
        <row_remap_histogram_max>639 bank(s)</row_remap_histogram_max>
        <row_remap_histogram_none>1 bank(s)</row_remap_histogram_none>
      </remapped_row_histogram>
    </remapped_rows>
  </gpu>
</nvidia_smi_log>
"""
    kind, events = _events(text)
    assert kind == "nvidia-smi-xml"
    msgs = [e.message for e in events]
    assert any("retired pages: 2 for double-bit" in m for m in msgs), msgs
    assert any("rows remapped after uncorrectable errors: 1" in m for m in msgs), msgs
    assert any("1 memory bank(s) have no spare row left" in m for m in msgs), msgs


def test_dcgmi_diag_dcgm4_per_gpu_rows() -> None:
    real = (DATA / "dcgm253-diag-dcgm4-pass.txt").read_text()
    kind, events = _events(real)
    assert kind == "dcgmi-diag"
    assert [e.message for e in events] == ["dcgmi diag: 1 tests, 0 failed"]
    # Shape: the same table with one GPU failing and a DCGM 4 "Warning: GPU2" note row
    failing = real.replace("| software                  | Pass  ", "| software                  | Fail  ").replace(
        "|                           | GPU2: Pass                                     |",
        "|                           | GPU2: Fail                                     |\n"
        "| Warning: GPU2             | Persistence mode for GPU 2 is disabled.        |")
    _kind, events = _events(failing)
    bad = next(e for e in events if e.attrs.get("test") == "software")
    assert bad.gpu == "2" and bad.attrs["gpus"] == ["2"]
    assert "GPU3" not in bad.message and "Persistence mode for GPU 2 is disabled." in bad.message
