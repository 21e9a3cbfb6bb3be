"""A Windows bug check is found in every shape Windows reports it (tests/data/windows/bugcheck/SOURCES.md):
any stop code is a `windows-bugcheck`, at low confidence when nothing names the GPU stack; a GPU stop code
is a confident one; a Kernel-Power 41 with BugcheckCode 0 (a power loss) is no bug check."""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import analyze
from forensics.findings import Confidence

DATA = Path(__file__).parent / "data" / "windows" / "bugcheck"


def _root(path: Path):  # type: ignore[no-untyped-def]
    analysis = analyze([str(path)])
    return analysis, analysis.verdict.root_cause


@pytest.mark.parametrize("name", ["wdd1815-kernel-power-41-fragment.xml", "systeminformer821-windbg-3b-dxgmms2.txt",
                                  "winark8-kd-fatal-system-error-3b.txt"])
def test_a_stop_that_names_no_gpu_module_is_a_low_confidence_bugcheck(name: str) -> None:
    analysis, root = _root(DATA / name)
    assert root is not None and root.signature == "windows-bugcheck", analysis.verdict.summary
    assert analysis.verdict.confidence != Confidence.HIGH
    assert "does not name the GPU driver" in root.title


def test_kernel_power_41_xml_without_its_event_element_is_one_event() -> None:
    analysis, _ = _root(DATA / "wdd1815-kernel-power-41-fragment.xml")
    [event] = [e for e in analysis.timeline.events if e.kind == "winevent"]
    assert event.attrs["event_id"] == 41 and event.attrs["bugcheck_code"] == "0x1a"
    assert event.attrs["named_data"]["BugcheckParameter1"] == "0x3470"


def test_windbg_analysis_pasted_from_its_title_keeps_the_title() -> None:
    analysis, _ = _root(DATA / "systeminformer821-windbg-3b-dxgmms2.txt")
    [event] = [e for e in analysis.timeline.events if e.kind == "bugcheck"]
    assert event.attrs["code"] == 0x3B and event.attrs["name"] == "SYSTEM_SERVICE_EXCEPTION"


def test_a_bluescreen_report_of_0x116_is_a_gpu_bugcheck() -> None:
    analysis, root = _root(DATA / "bluescreen-bccode-116.txt")
    assert root is not None and root.signature == "windows-bugcheck"
    assert "does not name" not in root.title and analysis.verdict.confidence == Confidence.HIGH


def test_kernel_power_41_with_bugcheck_code_0_is_a_power_loss_not_a_bugcheck(tmp_path: Path) -> None:
    text = (DATA / "wdd1815-kernel-power-41-fragment.xml").read_text(encoding="utf-8")
    assert '"BugcheckCode">26<' in text
    path = tmp_path / "kp41-power-loss.xml"
    path.write_text(text.replace('"BugcheckCode">26<', '"BugcheckCode">0<'), encoding="utf-8")
    analysis, root = _root(path)
    assert root is None or root.signature != "windows-bugcheck", analysis.verdict.summary
