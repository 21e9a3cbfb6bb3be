"""Inputs: archives are read safely and bad files become warnings, never tracebacks."""

import gzip
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from forensics.errors import UsageError
from forensics.ingest.sources import Limits, expand_inputs

XID = b"[ 1843.308145] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"


def test_plain_file_and_missing_path(tmp_path: Path) -> None:
    p = tmp_path / "dmesg.txt"
    p.write_bytes(XID)
    files = list(expand_inputs([str(p)]))
    assert [f.raw for f in files] == [XID]
    with pytest.raises(UsageError):
        list(expand_inputs([str(tmp_path / "nope")]))


def test_gzip_detected_by_content_not_name(tmp_path: Path) -> None:
    p = tmp_path / "log.txt"  # no .gz suffix on purpose
    p.write_bytes(gzip.compress(XID))
    [f] = expand_inputs([str(p)])
    assert f.raw == XID and not f.warnings


def test_truncated_gzip_keeps_readable_part(tmp_path: Path) -> None:
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(XID * 1000)[:-200])
    [f] = expand_inputs([str(p)])
    assert f.raw.startswith(XID)
    assert any("truncated" in w for w in f.warnings)


def test_tar_gz_members_and_unsafe_paths(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("logs/dmesg.txt", "../evil.txt", "/etc/passwd"):
            info = tarfile.TarInfo(name)
            info.size = len(XID)
            tar.addfile(info, io.BytesIO(XID))
        link = tarfile.TarInfo("logs/link")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/shadow"
        tar.addfile(link)
    p = tmp_path / "bundle.tgz"
    p.write_bytes(buf.getvalue())
    files = list(expand_inputs([str(p)]))
    good = [f for f in files if f.raw]
    assert [f.display for f in good] == [f"{p}!logs/dmesg.txt"]
    unsafe = [w for f in files for w in f.warnings if "unsafe member" in w]
    assert len(unsafe) == 2
    assert not any("shadow" in f.display for f in files)
    assert any(w.endswith(": 1 symbolic link member skipped (never followed)") for f in files for w in f.warnings)


def test_zip_member_count_cap(tmp_path: Path) -> None:
    p = tmp_path / "many.zip"
    with zipfile.ZipFile(p, "w") as zf:
        for i in range(20):
            zf.writestr(f"f{i}.txt", XID)
    files = list(expand_inputs([str(p)], Limits(max_members=5)))
    assert any("over 5 members" in w for f in files for w in f.warnings)
    assert not any(f.raw for f in files)


def test_corrupt_zip_is_a_warning(tmp_path: Path) -> None:
    p = tmp_path / "bad.zip"
    p.write_bytes(b"PK\x03\x04" + b"garbage" * 10)
    [f] = expand_inputs([str(p)])
    assert f.warnings and "unreadable zip" in f.warnings[0]


def test_packed_bundle_is_read_like_a_bundle_directory(tmp_path: Path) -> None:
    """A recorded bundle sent as .tar.gz gets the same verdict as the directory it came from."""
    from forensics.analysis import analyze

    bundle = Path(__file__).resolve().parent.parent / "samples" / "recorded" / "oom-first-backward" / "bundle"
    packed = tmp_path / "run.tgz"
    with tarfile.open(packed, "w:gz") as tar:
        tar.add(bundle, arcname="vm-run")
    from_dir, from_archive = analyze([str(bundle)]), analyze([str(packed)])
    assert from_archive.verdict.root_cause_id == from_dir.verdict.root_cause_id == "torch-cuda-oom"
    assert not [s for s in from_archive.sources if s.kind in ("binary", "unreadable")]
    assert {s.kind for s in from_archive.sources} == {s.kind for s in from_dir.sources}
    assert from_archive.recordings
