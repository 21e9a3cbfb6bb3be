"""An operating-system crash no signature knows is an honest unknown, not "no failure found"."""

from __future__ import annotations

from pathlib import Path

from forensics.analysis import analyze

DATA = Path(__file__).parent / "data" / "health"


def test_a_blue_screen_recorded_by_kernel_power_41_is_a_bugcheck_that_names_no_gpu_module() -> None:
    # Real Chinese-locale export (nvitop#136): Kernel-Power 41 with BugcheckCode 80 = 0x50, no GPU module:
    # windows-bugcheck's low-confidence variant (any stop code is a bug check), no longer an unknown.
    analysis = analyze([str(DATA / "nvitop136-zh-kernel-power-41.txt")])
    root = analysis.verdict.root_cause
    assert root is not None and root.signature == "windows-bugcheck"
    assert "does not name the GPU driver" in root.title and root.category == "platform"
    assert any("BugcheckCode 80 = 0x50" in e.message for e in root.evidence)


def test_kernel_power_41_after_a_power_loss_is_not_a_crash(tmp_path: Path) -> None:
    # The same export with BugcheckCode 0: the machine lost power or was switched off; no stop code.
    text = (DATA / "nvitop136-zh-kernel-power-41.txt").read_text(encoding="utf-8")
    assert 'BugcheckCode">80</Data>' in text
    cleared = text.replace('BugcheckCode">80</Data>', 'BugcheckCode">0</Data>')
    path = tmp_path / "kp41-power-loss.txt"
    path.write_text(cleared, encoding="utf-8")
    analysis = analyze([str(path)])
    assert analysis.verdict.root_cause is None, analysis.verdict.summary
