"""The reading side of a bundle: file tagging, the receipt index, the manifest, NVML samples and events."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from forensics.parsers.bundle_manifest import PARSER as MANIFEST
from forensics.parsers.common.base import ParseContext
from forensics.parsers.nvml_events import PARSER as EVENTS
from forensics.parsers.nvml_samples import PARSER as SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis import analyze
from forensics.events import MetricSample, TsSource
from forensics.ingest.bundle import IDX_MAGIC, pack_receipt, read_bundle_files, receipt_lookup, source_of
from forensics.ingest.sources import Limits
from forensics.ingest.textdoc import TextDocument
from forensics.record.nvml_log import NvmlLog

START = 1_740_909_600_000_000_000


def _manifest(**over: object) -> dict[str, object]:
    return {"format": "gpu-forensics-bundle", "version": 1, "status": "finished", "host": "node-1",
            "command": ["python", "train.py"], "start": "2025-03-02T10:00:00Z", "start_ns": START,
            "end": "2025-03-02T10:00:10Z", "end_ns": START + 10 * 10**9, "exit_code": 0, "signal": None,
            "boot_time_ns": START - 3600 * 10**9, "tz_name": "Europe/Berlin",
            "sources": {"nvml": {"status": "ok"}}, "heartbeat_ns": START + 10 * 10**9, **over}


def _bundle(tmp_path: Path, **over: object) -> Path:
    b = tmp_path / "node-1-20250302T100000Z-42"
    (b / "host").mkdir(parents=True)
    (b / "torch").mkdir()
    (b / "manifest.json").write_text(json.dumps(_manifest(**over), indent=2))
    (b / "stdout.log").write_bytes(b"epoch 1 step 1 loss 2.0\nTraceback (most recent call last):\nRuntimeError: boom\n")
    (b / "stdout.idx").write_bytes(IDX_MAGIC + pack_receipt(24, START + 10**9) + pack_receipt(80, START + 2 * 10**9))
    (b / "stderr.log").write_bytes(b"")
    (b / "heartbeat").write_text("2025-03-02T10:00:10.000000Z 0\n")
    (b / "host" / "env.json").write_text('{"PATH": "/usr/bin", "X": "ERROR: words in values"}')
    (b / "host" / "nvidia-smi-topo.txt").write_text("\tGPU0\tGPU1\nGPU0\t X \tNV18\n")
    (b / "torch" / "flight-recorder-rank-0").write_bytes(b"\x80\x04\x95pickle")
    (b / "torch" / "elastic-error.json").write_text('{"message": {"message": "RuntimeError: boom"}}')
    return b


def test_files_are_tagged_and_internal_files_skipped(tmp_path: Path) -> None:
    b = _bundle(tmp_path)
    files = {Path(f.display).relative_to(b).as_posix(): f for f in read_bundle_files(b, Limits())}
    assert set(files) == {"manifest.json", "stdout.log", "host/nvidia-smi-topo.txt", "torch/elastic-error.json",
                          "torch/flight-recorder-rank-0"}  # read as plain data, never unpickled
    out = files["stdout.log"]
    assert (out.source, out.host, out.tz_name, out.boot_time_ns) == ("stdout", "node-1", "Europe/Berlin",
                                                                     START - 3600 * 10**9)
    assert out.receipt_index is not None and out.receipt_index.startswith(IDX_MAGIC)
    assert files["host/nvidia-smi-topo.txt"].source == "host"
    assert source_of("nvml.0003.jsonl.gz") == source_of("nvml.jsonl") == "nvml"
    assert source_of("kmsg.log") == "kmsg" and source_of("stdout.idx") is None


def test_receipt_index_maps_offsets_to_receipt_times() -> None:
    raw = IDX_MAGIC + pack_receipt(10, 100) + pack_receipt(25, 200) + pack_receipt(40, 300) + b"\x01\x02"
    at = receipt_lookup(raw)
    assert at is not None
    assert [at(0), at(9), at(10), at(24), at(39), at(40)] == [100, 100, 200, 200, 300, None]
    assert receipt_lookup(b"not an index") is None and receipt_lookup(IDX_MAGIC) is None


def test_stream_lines_get_receipt_times_and_the_recording_is_reported(tmp_path: Path) -> None:
    analysis = analyze([str(_bundle(tmp_path))])
    [rec] = analysis.recordings
    assert rec["status"] == "finished" and rec["exit_code"] == 0 and rec["path"].endswith("-42")
    stream = [e for e in analysis.timeline.events if e.source == "stdout"]
    assert stream and all(e.ts_source == TsSource.RECEIPT for e in stream)
    assert {e.ts for e in stream} <= {START + 10**9, START + 2 * 10**9}
    assert not any(s.path.endswith("env.json") for s in analysis.sources)


def _parse(parser: object, text: str, source: str = "nvml") -> tuple[list, list[str]]:
    ctx = ParseContext(path="b/manifest.json", source=source)
    return list(parser.parse(TextDocument.from_bytes(text.encode(), ctx.path), ctx)), ctx.warnings  # type: ignore[attr-defined]


def test_manifest_of_a_recorder_that_died_reads_as_interrupted_at_its_heartbeat() -> None:
    text = json.dumps(_manifest(status="running", end=None, end_ns=None, exit_code=None,
                                heartbeat="2025-03-02T10:05:00Z", heartbeat_ns=START + 300 * 10**9), indent=2)
    records, warnings = _parse(MANIFEST, text, "recorder")
    assert not warnings
    kinds = {e.kind: e for e in records}
    assert kinds["recording"].attrs["status"] == "interrupted"
    assert "exit" not in kinds
    died = kinds["recorder"]
    assert died.attrs["reason"] == "recorder-died" and died.ts == START + 300 * 10**9
    assert died.origin.line > 1  # points at the heartbeat line


def test_manifest_exit_signal_and_unavailable_sources() -> None:
    text = json.dumps(_manifest(exit_code=None, signal=9, signal_name="SIGKILL",
                                sources={"nvml": {"status": "unavailable", "reason": "NVML sees no GPU"},
                                         "kernel_log": {"status": "ok"}}), indent=2)
    records, _ = _parse(MANIFEST, text, "recorder")
    [exit_event] = [e for e in records if e.kind == "exit"]
    assert exit_event.attrs["signal"] == 9 and "SIGKILL" in exit_event.message
    assert exit_event.ts == START + 10 * 10**9
    [note] = [e for e in records if e.kind == "recorder"]
    assert note.attrs["recorder_source"] == "nvml" and "NVML sees no GPU" in note.message


def test_manifest_that_is_not_json_is_a_warning_not_a_crash() -> None:
    records, warnings = _parse(MANIFEST, '{"format": "gpu-forensics-bundle", "status": ')
    assert records == [] and warnings


def _write_ticks(bundle: Path, rotate_bytes: int, ticks: int) -> NvmlLog:
    log = NvmlLog(bundle, {"interval_s": 0.1, "host": "n1", "gpus": [{"i": 0, "pci": "0000:3b:00.0"}]},
                  rotate_bytes=rotate_bytes)
    for i in range(ticks):
        log.write_tick(START + i * 100_000_000,
                       {0: {"mu": 1000 + (i // 50) * 10, "mt": 80000, "pw": 300.0 + i % 7,
                            "cr": 4 if 30 <= i < 40 else 0, "ug": None if i == 5 else 90}},
                       {0: [[123, 1000]]} if i % 10 == 0 else {})
    log.close()
    return log


def test_nvml_log_deltas_keyframes_and_rotation_read_back(tmp_path: Path) -> None:
    _write_ticks(tmp_path, rotate_bytes=4000, ticks=600)
    segments = sorted(tmp_path.glob("nvml.*.jsonl.gz"))
    assert segments and (tmp_path / "nvml.jsonl").exists()
    assert not list(tmp_path.glob("nvml.*.jsonl"))  # every rotated plain segment was compressed
    samples = []
    for path in [*segments, tmp_path / "nvml.jsonl"]:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        first = json.loads(raw.splitlines()[0])
        assert first["format"] == "gpu-forensics-nvml"
        assert json.loads(raw.splitlines()[1])["k"] == 1  # each segment starts with a keyframe
        records, warnings = _parse(SAMPLES, raw.decode())
        assert not warnings
        samples += [r for r in records if isinstance(r, MetricSample)]  # not the per-process summaries
    ts = [s.ts for s in samples]
    assert ts == sorted(ts) and ts[-1] == START + 599 * 100_000_000
    by_ts = {s.ts: s for s in samples}
    # throttle reasons switching on and off are emitted at once, not at the next 1 s mark
    assert by_ts[START + 30 * 100_000_000].values["clock_reasons"] == 4
    assert by_ts[START + 40 * 100_000_000].values["clock_reasons"] == 0
    assert all(s.values["mem_total_mib"] == 80000 for s in samples)
    assert len(samples) < 600 / 2  # downsampled to about once a second, plus changes
    gaps = [b - a for a, b in zip(ts, ts[1:], strict=False)]
    assert max(gaps) <= 1_000_000_000


def test_torn_last_line_after_a_crash_is_not_a_warning(tmp_path: Path) -> None:
    _write_ticks(tmp_path, rotate_bytes=1 << 30, ticks=30)
    raw = (tmp_path / "nvml.jsonl").read_text() + '{"t":17409096030'
    records, warnings = _parse(SAMPLES, raw)
    samples = [r for r in records if isinstance(r, MetricSample)]
    assert samples and not warnings
    assert samples[-1].ts == START + 29 * 100_000_000  # the last complete tick is kept


def test_a_continued_file_restates_its_header(tmp_path: Path) -> None:
    _write_ticks(tmp_path, rotate_bytes=1 << 30, ticks=5)
    with (tmp_path / "nvml.jsonl").open("a") as f:
        f.write('{"t":1740909600')  # the old sampler died mid-line
    _write_ticks(tmp_path, rotate_bytes=1 << 30, ticks=5)
    records, warnings = _parse(SAMPLES, (tmp_path / "nvml.jsonl").read_text())
    assert len(warnings) <= 1 and records


def test_nvml_events_become_xid_ecc_and_recorder_events() -> None:
    records, warnings = _parse(EVENTS, EVENTS.samples[0])
    assert not warnings
    xid, ecc, hung, back = records
    assert (xid.kind, xid.attrs["xid"], xid.gpu, xid.source) == ("xid", 43, "0000:3b:00.0", "nvml")
    assert (ecc.kind, ecc.attrs["ecc"]) == ("ecc", "double-bit")
    assert hung.kind == "recorder" and hung.attrs["reason"] == "nvml-unresponsive"
    assert hung.ts == 1740910030000000000 and "nvmlDeviceGetPowerUsage" in hung.message
    assert back.attrs["reason"] == "nvml-recovered"


RECORDED = Path(__file__).resolve().parent.parent / "samples" / "recorded"


def test_recorded_device_assert_holds_every_source_of_evidence() -> None:
    """The real H200 bundle: kernel line, NVML event, NVML samples and the traceback, all placed in time."""
    b = RECORDED / "device-assert-h200" / "bundle"
    analysis = analyze([str(b)])
    xids = [e for e in analysis.timeline.events if e.kind == "xid"]
    assert {e.source for e in xids} == {"kmsg", "nvml"}
    assert all(e.attrs.get("xid") == 43 and e.ts is not None for e in xids)
    kernel, nvml = sorted(xids, key=lambda e: e.source)
    assert abs(kernel.ts - nvml.ts) < 2 * 10**9  # boot-relative kernel stamp vs NVML's wall clock
    assert any(e.kind == "traceback" and "device-side assert" in e.text for e in analysis.timeline.events)
    assert len({m.gpu for m in analysis.timeline.metrics if m.source == "nvml"}) == 2
    [rec] = analysis.recordings
    assert rec["status"] == "finished" and rec["exit_code"] == 1


_LINES = st.lists(st.one_of(
    st.text(max_size=60),
    st.sampled_from(['{"format":"gpu-forensics-nvml","columns":{"mu":"mem_used_mib"},"gpus":[{"i":0}]}',
                     '{"format": "gpu-forensics-nvml-events"}', '{"t":1,"g":{"0":{"mu":"x"}}}',
                     '{"t":2,"g":{"0":{"mu":null,"zz":1}},"k":1}', '{"type":"xid","xid":"?","gpu":"a"}',
                     '{"type":"unresponsive","since":"x"}', '[1,2]', '{"t":null}', '{"g":[]}']),
), max_size=12)


@settings(max_examples=150, deadline=None)
@given(_LINES)
@pytest.mark.slow
def test_bundle_parsers_never_raise(lines: list[str]) -> None:
    text = "\n".join(lines)
    for parser in (SAMPLES, EVENTS, MANIFEST):
        _parse(parser, text)
    _parse(MANIFEST, '{"format": "gpu-forensics-bundle", ' + text.replace('"', "'")[:200] + "}")


def test_a_packed_bundle_is_tagged_like_a_directory(tmp_path: Path) -> None:
    import tarfile

    from forensics.ingest.bundle import tag_members
    from forensics.ingest.sources import expand_inputs

    packed = tmp_path / "run.tgz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(_bundle(tmp_path), arcname="node-1-20250302T100000Z-42")
    members = list(expand_inputs([str(packed)]))  # sources.py tags an archive's bundle members
    names = {m.display.rsplit("!", 1)[1].split("/", 1)[1]: m for m in members}
    assert set(names) == {"manifest.json", "stdout.log", "host/nvidia-smi-topo.txt", "torch/elastic-error.json",
                          "torch/flight-recorder-rank-0"}
    out = names["stdout.log"]
    assert out.source == "stdout" and out.boot_time_ns == START - 3600 * 10**9 and out.tz_name == "Europe/Berlin"
    assert out.receipt_index is not None and receipt_lookup(out.receipt_index) is not None
    plain = tmp_path / "plain.log"
    plain.write_text("x\n")
    assert tag_members(list(expand_inputs([str(plain)])))[0].source is None


def test_a_newer_bundle_version_is_read_with_a_warning(tmp_path: Path) -> None:
    files = list(read_bundle_files(_bundle(tmp_path, version=2), Limits()))
    [manifest] = [f for f in files if f.display.endswith("manifest.json")]
    assert manifest.raw and any("version 2 is newer" in w for w in manifest.warnings)
