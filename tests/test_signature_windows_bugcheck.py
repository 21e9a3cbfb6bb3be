"""A 0x133/0xEA bugcheck alone is weaker evidence of a GPU fault than one that names the GPU driver."""

from pathlib import Path

from forensics.analysis import analyze
from forensics.findings import Confidence

BANNER = """\
*******************************************************************************
*                        Bugcheck Analysis                                    *
*******************************************************************************

DPC_WATCHDOG_VIOLATION (133)
The DPC watchdog detected a prolonged run time at an IRQL of DISPATCH_LEVEL
or above.
BUGCHECK_CODE:  133
"""


def _verdict(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    p = tmp_path / "windbg.txt"
    p.write_text(text)
    return analyze([str(p)]).verdict


def test_driver_watchdog_bugcheck_alone_is_not_high_confidence(tmp_path: Path) -> None:
    v = _verdict(tmp_path, BANNER)
    assert v.root_cause_id == "windows-bugcheck"
    assert v.confidence != Confidence.HIGH


def test_driver_watchdog_bugcheck_naming_nvlddmkm_is_high_confidence(tmp_path: Path) -> None:
    v = _verdict(tmp_path, BANNER + "\nMODULE_NAME: nvlddmkm\n\nIMAGE_NAME:  nvlddmkm.sys\n")
    assert v.root_cause_id == "windows-bugcheck"
    assert v.confidence == Confidence.HIGH
