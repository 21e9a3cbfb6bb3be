"""Golden JSON outputs of ``forensics analyze --format json`` for a handful of corpus
cases (``tests/golden/<case>.json``). Regenerate on purpose only, after reading the
diff: ``UPDATE_GOLDEN=1 python -m pytest tests/test_match_golden.py``.

The signatures' prose (explain, remedy, references) is left out of the golden files:
it belongs to the signature authors and is checked by tests/test_signatures.py; what is
pinned here is the verdict, the findings with their roles, scores, notes and evidence
lines, and the sources.
"""

import json
import os
from pathlib import Path
from typing import Any

import pytest

from forensics.analysis import Options, analyze, to_json_dict

ROOT = Path(__file__).parent.parent
CASES = ROOT / "tests" / "corpus" / "cases"
GOLDEN = Path(__file__).parent / "golden"
PROSE = ("explain", "remedy", "references")

GOLDEN_CASES = [
    "nvsentinel155-fallen-off-multiline",
    "akash244-xid43-31-94-dmesgT",
    "oom-first-backward-a100-80g",
    "nccl-timeout-collective-mismatch",
    "stall-nvidia-smi-one-gpu-idle",
    "illegal-address-via-nccl-watchdog",
    "deepseekvl2-90-host-oom-killer",
    "neg-use-reentrant-warning",
]


def _output(case: str) -> dict[str, Any]:
    logs = sorted(str(p.relative_to(ROOT)) for p in (CASES / case).iterdir() if p.name != "case.toml")
    out = to_json_dict(analyze(logs, Options()))
    for f in out["findings"]:
        for key in PROSE:
            f.pop(key, None)
    return out


@pytest.mark.parametrize("case", GOLDEN_CASES)
def test_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    got = _output(case)
    path = GOLDEN / f"{case}.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(json.dumps(got, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    want = json.loads(path.read_text(encoding="utf-8"))
    assert got["verdict"] == want["verdict"]
    assert got == want
