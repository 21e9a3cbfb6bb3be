"""Presentation normalisation (parsers/common/presentation.py) on the real corpus texts.

The logs are real (tests/corpus, tests/heldout: each case.toml names its source); the prefixes put
around them are launcher and viewer shapes the learner has no code for (pm2's ``0|name  | ``, a
bracketed host, a ``worker_7 | ``), besides the ones of forensics/evaluation/transforms.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from forensics.parsers.common.presentation import label_fields, learn
from forensics.parsers.registry import PARSERS, detect

from forensics.analysis import Analysis, Options, analyze, parse_input
from forensics.evaluation import transforms
from forensics.events import TsSource
from forensics.ingest.sources import InputFile
from forensics.ingest.textdoc import TextDocument

HERE = Path(__file__).parent
CASES = [HERE / "corpus" / "cases", HERE / "heldout" / "cases"]


def _case(name: str) -> Path:
    for root in CASES:
        if (root / name).is_dir():
            return root / name
    raise FileNotFoundError(name)


def _log(name: str) -> Path:
    return next(p for p in sorted(_case(name).iterdir()) if p.name != "case.toml")


def _prefixed(text: str, label: str) -> str:
    return "".join(label + line + "\n" for line in text.splitlines())


def _analyze(tmp: Path, name: str, text: str) -> Analysis:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return analyze([str(path)], Options())


# A launcher nobody wrote code for: each shape around each kind of real log.
UNSEEN = ["0|trainer  | ", "[gpu-host-3] ", "worker_7 | ", "job42/task-1: "]
KINDS = ["oom-first-backward-a100-80g", "ogkm789-rminit-gsp-gfwboot", "stall-nvidia-smi-one-gpu-idle",
         "nccl-timeout-collective-mismatch", "gpuburn1-aer-surprise-down-xid79", "slurm-cgroup-oom-step-cancelled"]


@pytest.mark.parametrize("case", KINDS)
@pytest.mark.parametrize("label", UNSEEN)
def test_an_unseen_launcher_prefix_keeps_format_verdict_and_lines(tmp_path: Path, case: str, label: str) -> None:
    raw = _log(case).read_text(encoding="utf-8")
    plain = _analyze(tmp_path, "plain.log", raw)
    wrapped = _analyze(tmp_path, "wrapped.log", _prefixed(raw, label))
    assert wrapped.sources[0].kind == plain.sources[0].kind
    assert wrapped.verdict.root_cause_id == plain.verdict.root_cause_id is not None
    assert wrapped.sources[0].presentation and "label prefix" in wrapped.sources[0].presentation[0]
    # The evidence points at the same lines, and the document shown for them is the raw one.
    root_plain, root_wrapped = plain.verdict.root_cause, wrapped.verdict.root_cause
    assert root_plain is not None and root_wrapped is not None
    assert [e.origin.line for e in root_wrapped.evidence] == [e.origin.line for e in root_plain.evidence]
    doc = wrapped.document(str(tmp_path / "wrapped.log"))
    assert doc is not None
    first = root_wrapped.evidence[0].origin
    assert doc.context(first.line, 0, 0)[0].text.startswith(label.rstrip())
    assert doc.line_at(first.offset).no == first.line


def test_a_native_format_is_left_alone() -> None:
    """Every parser's own samples: nothing is peeled, or the peeled lines still read as that format."""
    for parser in PARSERS:
        for sample in parser.samples:
            shown = learn(TextDocument(sample.encode("utf-8"), "s"))
            if shown is None:
                continue
            assert detect(shown.doc.head())[0].name == parser.name, (parser.name, shown.steps)


@pytest.mark.parametrize("root", CASES)
@pytest.mark.slow
def test_the_real_logs_as_they_are_are_not_peeled_wrongly(root: Path) -> None:
    """Untransformed corpus files: whatever is learned, the file is detected as before."""
    for case in sorted(root.iterdir()):
        for path in sorted(case.iterdir()):
            if path.name == "case.toml":
                continue
            doc = TextDocument.from_bytes(path.read_bytes(), path.name)
            shown = learn(doc)
            if shown is not None:
                assert detect(shown.doc.head())[1] >= detect(doc.head())[1], (path, shown.steps)


def test_rank_and_host_of_the_label_become_the_events(tmp_path: Path) -> None:
    raw = _log("oom-first-backward-a100-80g").read_text(encoding="utf-8")
    srun = _analyze(tmp_path, "a.log", _prefixed(raw, "3: "))
    assert {e.rank for e in srun.timeline.events if e.kind == "traceback"} == {3}
    pdsh = _analyze(tmp_path, "b.log", _prefixed(raw, "dgx-a100-07: "))
    assert {e.host for e in pdsh.timeline.events if e.kind == "traceback"} == {"dgx-a100-07"}
    assert label_fields("(RayTrainWorker pid=4048, ip=10.0.130.188) ") == (None, "10.0.130.188")
    # pdsh with a hostfile of addresses (aws-samples/aws-hpc-tutorials): the address is the host
    assert label_fields("10.0.143.177: ") == (None, "10.0.143.177")
    assert label_fields("999.1.2.3: ")[1] is None and label_fields("1234: ") == (1234, None)
    assert label_fields("trainer/1 [5]:") == (5, "trainer") or label_fields("trainer/1 [5]:")[0] == 5


def test_viewer_line_numbers_and_quoting_are_peeled(tmp_path: Path) -> None:
    raw = _log("ogkm789-rminit-gsp-gfwboot").read_text(encoding="utf-8")
    numbered = "".join(f"[{1825 + i}] {line}\n" for i, line in enumerate(raw.splitlines()))
    a = _analyze(tmp_path, "n.log", numbered)
    assert a.sources[0].kind == "dmesg" and a.verdict.root_cause_id == "driver-init-failed"
    assert a.sources[0].presentation[0].startswith("lineno prefix")
    quoted = _analyze(tmp_path, "q.log", _prefixed(numbered, "> "))
    assert quoted.verdict.root_cause_id == "driver-init-failed" and len(quoted.sources[0].presentation) == 2


def test_a_column_of_numbers_or_a_record_flood_is_content() -> None:
    table = "# gpu    pwr\n# Idx      W\n    0    512\n    1    231\n    0    118\n    1    240\n"
    assert learn(TextDocument(table.encode(), "dmon")) is None
    flood = _log("device-assert-flood-embedding").read_bytes()
    assert learn(TextDocument.from_bytes(flood, "t")) is None


#: Real CheckpointError per-tensor lines pasted without their header, from
#: https://github.com/mihirp1998/VADER/issues/9 (the excerpt starts in the list).
_METADATA_LINES = """\
saved metadata: {'shape': torch.Size([64, 2, 1]), 'dtype': torch.float32, 'device': device(type='cuda', index=0)}
recomputed metadata: {'shape': torch.Size([320, 2, 2]), 'dtype': torch.float16, 'device': device(type='cuda', index=0)}
tensor at position 29:
saved metadata: {'shape': torch.Size([64, 2, 320]), 'dtype': torch.bool, 'device': device(type='cuda', index=0)}
recomputed metadata: {'shape': torch.Size([320]), 'dtype': torch.float32, 'device': device(type='cuda', index=0)}
tensor at position 30:
saved metadata: {'shape': torch.Size([320, 4]), 'dtype': torch.float16, 'device': device(type='cuda', index=0)}
recomputed metadata: {'shape': torch.Size([64, 2, 320]), 'dtype': torch.float32, 'device': device(type='cuda', index=0)}
"""


def test_a_records_own_field_names_are_not_a_label(tmp_path: Path) -> None:
    # Two alternating 'word word:' starts look like two pdsh hosts; they are the record's field names.
    for text in (_METADATA_LINES, _prefixed(_METADATA_LINES, "[rank0]:")):
        a = _analyze(tmp_path, "ckpt.log", text)
        assert not any("metadata" in p for p in a.sources[0].presentation)
        assert a.verdict.root_cause_id == "checkpoint-recompute-mismatch"


#: CUDA assert lines of two kernels as they interleave on one stderr: the Indexing.cu lines are from
#: https://github.com/AkariAsai/self-rag/issues/91, the ScatterGatherKernel.cu ones from
#: https://github.com/OpenBMB/MiniCPM-V/pull/224 (alternated line by line, the 'interleave' transform).
_TWO_KERNELS = [
    "../aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: block: [654,0,0], thread: [{t},0,0]"
    " Assertion `srcIndex < srcSelectDimSize` failed.",
    "../aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [142,0,0], thread: [{t},0,0]"
    " Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.",
]


def test_a_source_path_and_line_starting_the_record_is_not_a_label(tmp_path: Path) -> None:
    lines = [_TWO_KERNELS[i % 2].format(t=120 + i // 2) for i in range(8)]
    a = _analyze(tmp_path, "asserts.log", "\n".join(lines) + "\n")
    assert not a.sources[0].presentation
    assert a.verdict.root_cause_id == "cuda-device-side-assert"


def test_hard_wrapped_lines_are_joined_and_point_at_all_their_raw_lines(tmp_path: Path) -> None:
    raw = _log("nccl-timeout-collective-mismatch").read_text(encoding="utf-8")
    wrapped = transforms.apply("wrap80", raw.encode(), transforms.FileInfo("t"))
    assert wrapped is not None
    a = _analyze(tmp_path, "w.log", wrapped.decode())
    assert a.verdict.root_cause_id == "nccl-desync"
    assert any("wrapped at 80" in s for s in a.sources[0].presentation)
    root = a.verdict.root_cause
    assert root is not None and any(e.origin.nlines > 1 for e in root.evidence)
    # A table whose rows have one width is not a wrapped paragraph.
    smi = _log("stall-nvidia-smi-one-gpu-idle").read_bytes()
    assert learn(TextDocument.from_bytes(smi, "smi")) is None


def test_a_collectors_stamps_are_the_lines_receipt_times(tmp_path: Path) -> None:
    raw = _log("oom-first-backward-a100-80g").read_text(encoding="utf-8")
    lines = raw.splitlines()
    text = "".join(f"[pod/trainer-0/pytorch] 2024-05-01T10:00:{i % 60:02d}.{i:09d}Z {line}\n"
                   for i, line in enumerate(lines))
    a = _analyze(tmp_path, "k.log", text)
    assert a.verdict.root_cause_id == "torch-cuda-oom"
    tb = next(e for e in a.timeline.events if e.kind == "traceback")
    assert tb.ts_source is TsSource.RECEIPT and tb.ts is not None
    assert tb.host == "trainer-0"


def test_a_bundle_stream_keeps_its_receipt_index_under_a_prefix() -> None:
    """parse_input maps the peeled offsets back onto the raw file's receipt index."""
    bundle = HERE.parent / "samples" / "recorded" / "oom-first-backward" / "bundle"
    stdout = (bundle / "stderr.log").read_bytes()
    idx = (bundle / "stderr.idx").read_bytes()
    new = transforms.apply("srun", stdout, transforms.FileInfo("stderr.log", in_bundle=True))
    assert new is not None
    moved = transforms.remap_receipts(idx, stdout, new)
    assert moved is not None
    plain = parse_input(InputFile("a", stdout, receipt_index=idx), Options())[1]
    peeled = parse_input(InputFile("b", new, receipt_index=moved), Options())[1]
    assert [(e.kind, e.ts) for e in peeled] == [(e.kind, e.ts) for e in plain]


def test_a_formats_own_stamp_after_a_label_stays(tmp_path: Path) -> None:
    """journalctl -o short-iso through pdsh: the ISO stamp is the journal's, not a collector's."""
    import re

    raw = _log("ogkm1080-gsp-rpc-fail-journal").read_text(encoding="utf-8")
    iso = re.sub(r"(?m)^May 0?(\d+) ([\d:]+) ", lambda m: f"2024-05-{int(m.group(1)):02d}T{m.group(2)}+0000 ", raw)
    plain = _analyze(tmp_path, "iso.log", iso)
    pdsh = _analyze(tmp_path, "pdsh.log", _prefixed(iso, "gpu-node3: "))
    assert plain.sources[0].kind == pdsh.sources[0].kind == "journalctl"
    assert pdsh.sources[0].presentation == ["label prefix 'gpu-node3:'"]
    assert pdsh.verdict.root_cause_id == plain.verdict.root_cause_id is not None
    assert {e.host for e in pdsh.timeline.events} == {e.host for e in plain.timeline.events}


def test_interleaved_writers_keep_their_own_records(tmp_path: Path) -> None:
    """Two hosts' real tracebacks interleaved line by line under pdsh labels: each is read from its
    own host's lines (the label becomes the stream reader's writer key) and carries that host."""
    a = _log("oom-first-backward-a100-80g").read_text(encoding="utf-8").splitlines()
    b = _log("windows-unknown-error-optimizer-step").read_text(encoding="utf-8").splitlines()
    mixed = []
    for i in range(max(len(a), len(b))):
        if i < len(a):
            mixed.append("node01: " + a[i])
        if i < len(b):
            mixed.append("node02: " + b[i])
    alone = {name: [e for e in _analyze(tmp_path, f"{name}.log", "\n".join(lines) + "\n").timeline.events
                    if e.kind == "traceback"] for name, lines in (("a", a), ("b", b))}
    both = [e for e in _analyze(tmp_path, "mixed.log", "\n".join(mixed) + "\n").timeline.events
            if e.kind == "traceback"]
    got = {(e.host, e.attrs.get("exc_type"), tuple(e.attrs.get("frames") or ())) for e in both}
    want = {("node01", e.attrs.get("exc_type"), tuple(e.attrs.get("frames") or ())) for e in alone["a"]} | \
        {("node02", e.attrs.get("exc_type"), tuple(e.attrs.get("frames") or ())) for e in alone["b"]}
    assert got == want
