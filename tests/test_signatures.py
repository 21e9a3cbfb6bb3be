"""Every shipped signature: loads the way the program loads it, has an id from
SIGNATURES.md (and every id there has a file), and its ``[[examples]]`` fire or stay
silent as declared when run through the whole pipeline (detect → parse → match)."""

import re
from pathlib import Path

import pytest

from forensics.evaluation.examples import analyze_text
from forensics.match import load_signatures
from forensics.match.loader import check_file, shipped_paths
from forensics.match.schema import Signature

ROOT = Path(__file__).parent.parent
SHIPPED = load_signatures()
BY_ID = {s.id: s for s in SHIPPED}


def _vocabulary() -> set[str]:
    """Ids listed in SIGNATURES.md (everything above the benign look-alikes)."""
    text = (ROOT / "SIGNATURES.md").read_text(encoding="utf-8").split("## Benign look-alikes")[0]
    return set(re.findall(r"^- `([a-z0-9][a-z0-9-]*)`", text, re.M)) - {"none", "unrecognized-failure"}


@pytest.mark.parametrize("path", shipped_paths(), ids=lambda p: p.stem)
def test_shipped_file_is_valid(path: Path) -> None:
    sig, problems = check_file(path)
    assert sig is not None, "\n".join(map(str, problems))
    assert not [p for p in problems if not p.warning], "\n".join(map(str, problems))


def test_ids_match_the_vocabulary() -> None:
    vocabulary = _vocabulary()
    assert len(vocabulary) > 40
    missing = sorted(vocabulary - set(BY_ID))
    unknown = sorted(set(BY_ID) - vocabulary)
    assert not missing, f"ids in SIGNATURES.md without a signature file: {missing}"
    assert not unknown, f"signature files whose id is not in SIGNATURES.md: {unknown}"


def test_every_signature_has_positive_and_negative_examples() -> None:
    lacking = [s.id for s in SHIPPED if not any(e.match for e in s.examples)
               or not any(not e.match for e in s.examples)]
    assert not lacking


def _examples() -> list[tuple[Signature, int]]:
    return [(s, i) for s in SHIPPED for i in range(len(s.examples))]


@pytest.mark.parametrize("sig, i", _examples(),
                         ids=[f"{s.id}-{i}-{'fires' if s.examples[i].match else 'silent'}" for s, i in _examples()])
def test_example(sig: Signature, i: int) -> None:
    example = sig.examples[i]
    findings = analyze_text(example.text, SHIPPED)
    fired = [f.signature for f in findings]
    if example.match:
        assert sig.id in fired, f"{sig.path}:{example.line}: should fire; got {fired}"
    else:
        assert sig.id not in fired, f"{sig.path}:{example.line}: should stay silent; got {fired}"
