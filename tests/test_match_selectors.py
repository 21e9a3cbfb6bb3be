"""Evidence selectors: kinds, sources, literal prefilter, flags, attrs, regex timeout."""

import json
from pathlib import Path

import pytest
import regex
from matchkit import ev

from forensics.analysis import analyze
from forensics.match.loader import check_text
from forensics.match.schema import Evidence, Signature, parse_duration, parse_window
from forensics.match.selectors import EventIndex


def _evidence(**kw: object) -> Evidence:
    base: dict[str, object] = {"name": "e", "role": "anchor", "line": 1}
    base.update(kw)
    return Evidence(**base)  # type: ignore[arg-type]


def _sig(*evidence: Evidence) -> Signature:
    return Signature(id="s", title="t", category="driver", path="s.toml", evidence=tuple(evidence))


def _select(e: Evidence, events: list) -> list[int]:
    return EventIndex(events, [_sig(e)]).select(e)


def test_literal_prefilter_comes_before_the_regex() -> None:
    e = _evidence(literals=("fallen off",), pattern=regex.compile(r"Xid .*79"))
    events = [ev("NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."),
              ev("NVRM: Xid (PCI:0000:3b:00): 79, pid=1")]  # regex would match, literal absent
    assert _select(e, events) == [0]


def test_kind_and_source_filters() -> None:
    e = _evidence(literals=("79",), kinds=("xid",), sources=("kmsg",))
    events = [ev("Xid 79", kind="xid", source="kmsg"), ev("Xid 79", kind="log", source="kmsg"),
              ev("Xid 79", kind="xid", source="file:dmesg.txt")]
    assert _select(e, events) == [0]


def test_ignore_case_applies_to_literals_and_regex() -> None:
    e = _evidence(literals=("xid",), pattern=regex.compile("xid 79", regex.I), ignore_case=True)
    assert _select(e, [ev("NVRM: XID 79"), ev("nothing")]) == [0]
    strict = _evidence(literals=("xid",), pattern=regex.compile("xid 79"))
    assert _select(strict, [ev("NVRM: XID 79")]) == []


def test_attrs_compare_ints_and_strings_and_event_fields() -> None:
    e = _evidence(literals=("Xid",), attrs=(("xid", (79, 94)),))
    events = [ev("Xid a", xid=79), ev("Xid b", xid="94"), ev("Xid c", xid=43), ev("Xid d")]
    assert _select(e, events) == [0, 1]
    by_rank = _evidence(literals=("boom",), attrs=(("rank", (3,)),))
    assert _select(by_rank, [ev("boom", rank=3), ev("boom", rank=1)]) == [0]


def test_regex_sees_continuation_lines() -> None:
    e = _evidence(literals=("fallen off the bus",),
                  pattern=regex.compile(r"GPU at PCI:\S+ has fallen off the bus", regex.S))
    multi = ev("NVRM: The NVIDIA GPU at PCI:0000:3b:00", detail="NVRM: The NVIDIA GPU at PCI:0000:3b:00\n"
               "NVRM: has fallen off the bus and is not responding to commands.")
    assert _select(e, [multi]) == []  # a newline sits between the two halves
    e2 = _evidence(literals=("fallen off the bus",), pattern=regex.compile(r"GPU at PCI:\S+\s+NVRM: has fallen"))
    assert _select(e2, [multi]) == [0]


def test_derived_event_tags_are_literals() -> None:
    e = _evidence(literals=("[spinning-collective]",), kinds=("derived",))
    events = [ev("[spinning-collective] GPU 0 at 100 %", kind="derived"),
              ev("[spinning-collective] pasted by a user", kind="log")]
    assert _select(e, events) == [0]


def test_a_runaway_regex_times_out_with_a_warning() -> None:
    e = _evidence(name="slow", literals=("a",), pattern=regex.compile(r"(a|aa)+$"))
    index = EventIndex([ev("a" * 60 + "b")], [_sig(e)])
    assert index.select(e, "s") == []
    assert len(index.warnings) == 1 and "regex of evidence 'slow'" in index.warnings[0]


def test_durations_and_windows() -> None:
    assert parse_duration("90s") == 90 * 10**9
    assert parse_duration("-10m") == -600 * 10**9
    assert parse_duration("+1.5h") == 5400 * 10**9
    assert parse_duration("500ms") == 5 * 10**8
    assert parse_duration("0") == 0
    w = parse_window("-10m..+30s")
    assert (w.before_ns, w.after_ns) == (-600 * 10**9, 30 * 10**9)
    assert parse_window("5s").before_ns == -5 * 10**9
    assert w.contains(1000 * 10**9, 999 * 10**9) and not w.contains(0, 31 * 10**9)
    assert w.contains(None, 5) and w.contains(5, None)
    for bad in ("10", "ten minutes", "5x"):
        try:
            parse_duration(bad)
        except ValueError:
            continue
        raise AssertionError(bad)


def test_literal_index_engines_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    from forensics.match import literal_index

    texts = ["NVRM: Xid 79", "nothing", "xid in lower case", "Ünïcode FALLEN off", "", "two Xid Xid"]
    lits = ["Xid", "fallen off", "ünïcode", "absent"]
    fast = literal_index.LiteralIndex(texts, lits)
    monkeypatch.setattr(literal_index, "USE_HYPERSCAN", False)
    slow = literal_index.LiteralIndex(texts, lits)
    for lit in lits:
        assert fast.positions([lit]) == slow.positions([lit])
    assert slow.positions(["XID"]) == [0, 2, 5]
    assert slow.positions(["fallen off", "Ünïcode"]) == [3]
    assert slow.positions(["absent"]) == []


# -- the recorder's own records ------------------------------------------------------------------------
COMMAND = ("recorded `python train.py --note 'RuntimeError: CUDA error: device-side assert triggered'` "
           "(finished, exit status 0)")


def test_the_recording_event_never_matches_an_anchor() -> None:
    anchor = _evidence(literals=("device-side assert triggered",))
    events = [ev(COMMAND, kind="recording", source="recorder"),
              ev("RuntimeError: CUDA error: device-side assert triggered", kind="traceback")]
    assert _select(anchor, events) == [1]
    named = _evidence(literals=("device-side assert",), kinds=("recording",))
    assert _select(named, events) == []


def test_other_evidence_sees_the_recording_only_when_it_names_the_kind() -> None:
    events = [ev(COMMAND, kind="recording", source="recorder")]
    assert _select(_evidence(role="supporting", literals=("train.py",)), events) == []
    assert _select(_evidence(role="supporting", literals=("train.py",), kinds=("recording",)), events) == [0]


def test_an_anchor_on_recording_events_is_a_signature_error() -> None:
    text = '''id = "x"
title = "t"
category = "application"
priority = 50

[[evidence]]
name = "cmd"
role = "anchor"
kinds = ["recording"]
literals = ["train.py"]
'''
    sig, problems = check_text(text, "x.toml", "x")
    assert sig is None
    assert "evidence 'cmd': 'recording' events (the recorder's own manifest) are never an anchor" in \
        [p.message for p in problems]


def test_a_command_line_that_quotes_an_error_is_not_evidence(tmp_path: Path) -> None:
    bundle = tmp_path / "node-1-20250302T100000Z-42"
    bundle.mkdir()
    manifest = {"format": "gpu-forensics-bundle", "version": 1, "status": "finished", "host": "node-1",
                "command": ["python", "train.py", "--note", "RuntimeError: CUDA error: device-side assert triggered",
                            "--also", "Xid 79 GPU has fallen off the bus; CUDA out of memory; Killed"],
                "start": "2025-03-02T10:00:00Z", "start_ns": 1740909600 * 10**9, "end": "2025-03-02T10:00:10Z",
                "end_ns": 1740909610 * 10**9, "exit_code": 0, "signal": None, "sources": {"nvml": {"status": "ok"}}}
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle / "stdout.log").write_text("step 1 loss 2.0\nstep 2 loss 1.9\ndone\n")
    analysis = analyze([str(bundle)])
    [recording] = [e for e in analysis.timeline.events if e.kind == "recording"]
    assert "device-side assert triggered" in recording.message
    assert analysis.findings == [] and analysis.verdict.root_cause is None
