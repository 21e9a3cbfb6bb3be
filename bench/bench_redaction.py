"""The hand-written secret shapes (``forensics/secrets.py``) against ``detect-secrets`` (Yelp, a maintained
detector: plugins per token kind plus high-entropy strings), on the same two sets:

    pip install detect-secrets==1.5.0      # for this benchmark only; not a dependency
    python bench/bench_redaction.py [--examples 8]

1. **Planted set** (recall): every secret of ``tests/test_planted_secrets.py`` in four forms — ``NAME=value``,
   bare in a sentence, inside a Python repr, and wrapped onto two lines — plus a PEM block. A secret counts
   as caught in a form when no copy of it is left after redaction. Three engines: detect-secrets (each
   reported value removed from its line; it scans line by line), the hand-written shapes alone, and the
   shapes with the values the recorder classed as secret (``forensics.secret_values``: what ``pack``,
   ``analyze`` and ``report`` use on a bundle).
2. **Real logs** (false redactions): every text file under ``tests/realcases*``, ``tests/corpus``,
   ``tests/data`` and the recorded samples' logs — real output of training runs, kernels and tools — and
   the lines each detector would change. Some test inputs plant secrets on purpose; the examples show which.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import test_planted_secrets as planted  # noqa: E402

from forensics.secret_values import KNOWN  # noqa: E402
from forensics.secrets import find_secrets, redact_text  # noqa: E402

REAL = ["tests/realcases", "tests/realcases2", "tests/corpus", "tests/data", "samples/recorded"]
NAMED = {name: value for name, value in vars(planted).items() if name.isupper() and isinstance(value, str)
         and value in planted.SECRETS}


def forms(name: str, value: str) -> dict[str, str]:
    cut = len(value) // 2
    return {
        "NAME=value": f"{name}={value}",
        "bare": f"connecting with {value} now",
        "repr": f"Namespace(lr=0.1, {name.lower()}='{value}', epochs=3)",
        "two lines": f"value:\n{value[:cut]}\n{value[cut:]}",
    }


def ds_redact(text: str) -> str:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
        fh.write(text)
    with default_settings():
        found = SecretsCollection()
        found.scan_file(fh.name)
    lines = text.split("\n")
    for secrets in found.data.values():
        for s in secrets:
            if s.secret_value:
                lines[s.line_number - 1] = lines[s.line_number - 1].replace(s.secret_value, "[REDACTED]")
    Path(fh.name).unlink()
    return "\n".join(lines)


def recall(examples: int) -> dict[str, Any]:
    engines = {"detect-secrets": ds_redact, "shapes": lambda t: redact_text(t)[0]}
    KNOWN.clear()
    rows: dict[str, dict[str, int]] = {e: {} for e in [*engines, "shapes+values"]}
    missed: dict[str, list[str]] = {e: [] for e in rows}
    total = 0
    cases = [(n, f, t) for n, v in NAMED.items() for f, t in forms(n, v).items()]
    pem = ("-----BEGIN RSA PRIVATE KEY-----\n" + planted.PEM_BODY + "\nAbCdEf0123456789\n-----END RSA PRIVATE KEY-----")
    cases.append(("PEM_BODY", "PEM block", pem))
    def gone(name: str, form: str, out: str) -> bool:
        value = NAMED[name]
        if form == "two lines":  # each half is still the secret
            cut = len(value) // 2
            return value[:cut] not in out and value[cut:] not in out
        return value not in out

    for engine, fn in engines.items():
        for name, form, text in cases:
            out = fn(text)
            ok = gone(name, form, out)
            rows[engine][form] = rows[engine].get(form, 0) + ok
            if not ok and len(missed[engine]) < examples:
                missed[engine].append(f"{name} ({form})")
    KNOWN.add_values(NAMED.values())  # what a recorder that saw them in env/argv would have classed
    for name, form, text in cases:
        ok = gone(name, form, redact_text(text)[0])
        rows["shapes+values"][form] = rows["shapes+values"].get(form, 0) + ok
        if not ok and len(missed["shapes+values"]) < examples:
            missed["shapes+values"].append(f"{name} ({form})")
    KNOWN.clear()
    total = len(cases)
    caught = {e: {**r, "all": sum(r.values())} for e, r in rows.items()}
    return {"cases": total, "secrets": len(NAMED), "caught": caught, "missed_examples": missed}


def real_files() -> list[Path]:
    out = []
    for base in REAL:
        for p in sorted((ROOT / base).rglob("*")):
            if p.is_file() and p.stat().st_size < (8 << 20):
                head = p.read_bytes()[:8192]
                if b"\x00" not in head and head[:2] != b"\x1f\x8b" and head[:4] != b"PK\x03\x04":
                    out.append(p)
    return out


def false_redactions(examples: int) -> dict[str, Any]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    files = real_files()
    lines = 0
    ours: list[str] = []
    t0 = time.perf_counter()
    for p in files:
        text = p.read_text(errors="replace")
        lines += text.count("\n") + 1
        for s, e, kind in find_secrets(text, values=False):
            ours.append(f"{p.relative_to(ROOT)}: {kind}: {text[max(0, s - 30):e + 10]!r}")
    ours_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    theirs: list[str] = []
    with default_settings():
        found = SecretsCollection()
        for p in files:
            found.scan_file(str(p))
    for fname, secrets in found.data.items():
        for s in secrets:
            theirs.append(f"{Path(fname).relative_to(ROOT)}:{s.line_number}: {s.type}: {str(s.secret_value)[:60]!r}")
    ds_s = time.perf_counter() - t0
    return {"files": len(files), "lines": lines,
            "shapes": {"flagged": len(ours), "seconds": round(ours_s, 2), "examples": ours[:examples]},
            "detect-secrets": {"flagged": len(theirs), "seconds": round(ds_s, 2), "examples": theirs[:examples]}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", type=int, default=8)
    ap.add_argument("--planted-only", action="store_true")
    args = ap.parse_args()
    out: dict[str, Any] = {"planted": recall(args.examples)}
    if not args.planted_only:
        out["real_logs"] = false_redactions(args.examples)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
