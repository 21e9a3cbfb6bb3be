"""GPU health tools' own output as evidence without any Xid line: nvidia-smi -q ECC / retired pages /
remapped rows / clock reasons / PCIe link (also excerpts without the GPU header and grepped
counters), the default table's ECC cell, dcgmi health and diag, the DCGM host-engine log."""

from __future__ import annotations

from pathlib import Path

from forensics.analysis import Options, analyze, parse_input
from forensics.events import Event, Severity
from forensics.sources import InputFile

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
