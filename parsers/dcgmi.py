"""``dcgmi diag -r N``: DCGM's diagnostic result table (``| Test | Result |`` rows, section rulers,
cells wrapped onto continuation rows, ``Warning``/``Info`` rows under a test).

Every failed or warned test becomes an ``nvidia-smi`` event (error / warning) with the GPUs it
names and its warning text; one summary event says how many tests ran and failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import smi_event

from forensics.events import Severity
from forensics.ingest.textdoc import Line, TextDocument
from forensics.lazy_re import lazy_compile

__all__ = ["PARSER"]

_ROW = lazy_compile(r"^\|\s*(.*?)\s*\|\s*(.*?)\s*\|\s*$")
_SECTION = lazy_compile(r"^[|+]\s*-{3,}\s*([A-Za-z][A-Za-z ]*?)\s*-{2,}")
_RESULT = lazy_compile(r"^(?:GPU\s*\d+\s*:\s*)?(Pass|Fail|Warn|Skip|Not Run)\b", re.I)
#: DCGM 4 prints one result row per GPU (``GPU0: Fail``) and notes as ``Warning: GPU0`` / ``Info: GPU1``
_GPU_RESULT = lazy_compile(r"^GPU\s*(\d+)\s*:\s*(\w+)", re.I)
_NOTE_GPU = lazy_compile(r"^(Warning|Info|Error)\s*:\s*GPU\s*(\d+)$", re.I)
_GPUS = lazy_compile(r"GPUs?\s*(?::\s*)?((?:\d+\s*(?:,\s*)?)+)")
_NOTES = ("warning", "info", "error")


def _word(result: str) -> str:
    """The result word of one result cell: ``Fail - GPU: 1`` / ``GPU0: Fail`` → ``fail``."""
    m = _RESULT.match(result)
    return m.group(1).lower() if m else (result.split() or [""])[0].lower()


@dataclass
class _Test:
    name: str
    section: str
    line: Line
    results: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    last_no: int = 0

    @property
    def verdict(self) -> str:
        words = {_word(r) for r in self.results if r}
        return "fail" if "fail" in words else "warn" if "warn" in words else "pass" if "pass" in words else "other"


class DcgmiDiagParser:
    name = "dcgmi-diag"
    #: producer versions its real samples hold (slurmonaws5's diag table)
    tested_with = {"DCGM": ("3.3.9",)}
    samples = (
        # Shape: `dcgmi diag -r 2` table (layout and wording as DCGM 3.x prints it; the failure text
        # follows the DCGM diag message quoted in catalog-driver §1.2 for Xid 63/64).
        """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.5                                          |
| Driver Version Detected   | 535.161.08                                     |
| GPU Device IDs Detected   | 20b5,20b5                                      |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| NVML Library              | Pass                                           |
| Page Retirement/Row Remap | Fail                                           |
| Warning                   | GPU 1 There are 1 uncorrectable memory errors  |
|                           | and row remappings are pending.                |
| Inforom                   | Pass                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Pass - All                                     |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - GPU: 0                                  |
|                           | Fail - GPU: 1                                  |
+---------------------------+------------------------------------------------+
""",
    )

    def detect(self, head: list[str]) -> float:
        text = "\n".join(head[:12])
        if re.search(r"\|\s*Diagnostic\s*\|\s*Result\s*\|", text):
            return 0.97
        if "Successfully ran diagnostic" in text:
            return 0.9
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        tests: list[_Test] = []
        section = ""
        current: _Test | None = None
        note_target: list[str] | None = None
        first_line: Line | None = None
        for line in doc.lines():
            text = line.text.strip()
            sm = _SECTION.match(text)
            if sm:
                section = sm.group(1).strip()
                current, note_target = None, None
                continue
            m = _ROW.match(text)
            if not m:
                continue
            name, value = m.group(1), m.group(2)
            first_line = first_line or line
            if name.lower() == "diagnostic" or (name and set(name) <= {"=", "-", "+"}):
                continue
            if section.lower() == "metadata":
                continue
            nm = _NOTE_GPU.match(name)
            if nm and current is not None:  # DCGM 4: "Warning: GPU0 | text"
                current.notes.append(f"GPU {nm.group(2)} {value}")
                note_target = current.notes
                current.last_no = line.no
            elif name.lower() in _NOTES and current is not None:
                current.notes.append(value)
                note_target = current.notes
                current.last_no = line.no
            elif name:
                current = _Test(name, section, line, [value] if value else [], last_no=line.no)
                tests.append(current)
                note_target = None
            elif current is not None:  # a wrapped cell or a second result line
                if _GPU_RESULT.match(value) and _RESULT.match(value):  # DCGM 4: one "GPUn: Result" row per GPU
                    current.results.append(value)
                    note_target = None
                elif note_target is not None:
                    note_target[-1] = f"{note_target[-1]} {value}".strip()
                elif _RESULT.match(value) or not current.results:
                    current.results.append(value)
                else:
                    current.results[-1] = f"{current.results[-1]} {value}"
                current.last_no = line.no
        failed = 0
        for t in tests:
            if t.verdict not in ("fail", "warn"):
                continue
            failed += t.verdict == "fail"
            bad = [r for r in t.results if _word(r) == t.verdict]
            per_gpu = {m.group(1) for r in bad for m in [_GPU_RESULT.match(r)] if m}
            gpus = sorted(per_gpu or ({g.strip() for r in bad + t.notes for m in _GPUS.finditer(r)
                                       for g in m.group(1).split(",") if g.strip()} |
                                      {m.group(1) for n in t.notes for m in re.finditer(r"GPU (\d+)", n)}))
            msg = f"dcgmi diag {t.name}: {'; '.join(bad) or t.verdict}"
            if t.notes:
                msg += " — " + " ".join(t.notes)
            yield smi_event(ctx, ctx.origin(t.line, t.last_no - t.line.no + 1), "nvidia-smi", msg,
                            severity=Severity.ERROR if t.verdict == "fail" else Severity.WARNING,
                            gpu=gpus[0] if len(gpus) == 1 else None,
                            attrs={"tool": "dcgmi", "test": t.name, "section": t.section, "result": t.verdict,
                                   "gpus": gpus, "notes": t.notes})
        if tests and first_line is not None:
            yield smi_event(ctx, ctx.origin(first_line), "nvidia-smi",
                            f"dcgmi diag: {len(tests)} tests, {failed} failed",
                            attrs={"tool": "dcgmi", "tests": len(tests), "failed": failed})


PARSER = DcgmiDiagParser()
