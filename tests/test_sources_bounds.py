"""Archives and special files under bounds (issue 14): one decompression budget per analysis,
members read one at a time, a nesting limit, compression bombs and devices refused with a line,
and every skipped member (links, devices) named."""

from __future__ import annotations

import io
import os
import resource
import tarfile
import threading
import time
import zipfile
from pathlib import Path

import pytest
from bombs import gzip_of_zeros, stored_zip, zip_bomb

from forensics.analysis import Options, analyze
from forensics.ingest.sources import Limits, expand_inputs

XID = b"[  102.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"


def _warnings(paths: list[str], limits: Limits | None = None) -> list[str]:
    return [w for f in expand_inputs(paths, limits) for w in f.warnings]


@pytest.fixture
def memory_cap() -> object:
    """The process may not grow past 3 GiB of address space more than it holds now (a bomb that
    gets decompressed raises MemoryError instead of taking the machine)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as fh:
        vsize = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (vsize + (3 << 30), hard))
    yield
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def test_an_8_mb_zip_bomb_is_refused_by_its_ratio(tmp_path: Path, memory_cap: object) -> None:
    """8 members declaring 1000 MiB of zeros each in 8 MB (9.2 GiB RSS before)."""
    path = tmp_path / "logs.zip"
    path.write_bytes(zip_bomb(8, 1000) + b"")
    assert 7 << 20 < path.stat().st_size < 9 << 20
    start = time.perf_counter()
    a = analyze([str(path)])
    assert time.perf_counter() - start < 60
    bombs = [w for w in a.warnings if "compression bomb" in w]
    assert len(bombs) == 8 and "would expand" in bombs[0] and "skipped" in bombs[0]


@pytest.mark.slow
def test_a_gzip_of_gibibytes_of_zeros_answers_with_the_ratio_line(tmp_path: Path, memory_cap: object) -> None:
    path = tmp_path / "dmesg.log.gz"
    path.write_bytes(gzip_of_zeros(4096))  # 4 GiB of zeros in 4 MB
    start = time.perf_counter()
    a = analyze([str(path)])
    elapsed = time.perf_counter() - start
    assert elapsed < 60, elapsed
    assert any("expands more than 200:1" in w for w in a.warnings), a.warnings


def test_one_budget_for_the_whole_analysis(tmp_path: Path) -> None:
    """Two archives of 3 MiB each under a 5 MiB budget: the second one's member is over it."""
    text = XID * (3 * (1 << 20) // len(XID))
    for name in ("a.zip", "b.zip"):
        with zipfile.ZipFile(tmp_path / name, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr("dmesg.txt", text)
    warnings = _warnings([str(tmp_path / "a.zip"), str(tmp_path / "b.zip")], Limits(max_total_bytes=5 << 20))
    assert [w for w in warnings if "decompression budget" in w] == [
        f"{tmp_path / 'b.zip'}!dmesg.txt: over the analysis's decompression budget (5 MiB in all), skipped"]


def _nest(levels: int) -> bytes:
    data = stored_zip([("dmesg.txt", XID)])
    for level in range(levels - 1):
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for i in range(10):
                zf.writestr(f"l{level}-{i}.zip", data)
        data = buf.getvalue()
    return data


def test_zips_of_zips_of_zips_stop_at_the_nesting_limit(tmp_path: Path) -> None:
    (tmp_path / "three.zip").write_bytes(_nest(3))
    files = list(expand_inputs([str(tmp_path / "three.zip")]))
    assert len([f for f in files if f.raw == XID]) == 100
    (tmp_path / "five.zip").write_bytes(_nest(5))
    files = list(expand_inputs([str(tmp_path / "five.zip")]))
    assert not [f for f in files if f.raw]
    deep = [w for f in files for w in f.warnings if "nested more than 3 deep" in w]
    assert len(deep) == 1000  # each zip at the fourth level is named once


def test_members_are_read_one_at_a_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "two.zip"
    path.write_bytes(stored_zip([("a.log", XID), ("b.log", XID)]))
    reads: list[str] = []
    real = zipfile.ZipFile.read

    def read(self: zipfile.ZipFile, name: object, pwd: bytes | None = None) -> bytes:
        reads.append(getattr(name, "filename", str(name)))
        return real(self, name, pwd)

    monkeypatch.setattr(zipfile.ZipFile, "read", read)
    it = expand_inputs([str(path)])
    first = next(it)
    assert first.display.endswith("!a.log") and reads == ["a.log"]
    assert next(it).display.endswith("!b.log") and reads == ["a.log", "b.log"]


def test_links_and_devices_in_a_tar_are_named_as_skipped(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("logs/dmesg.txt")
        info.size = len(XID)
        tar.addfile(info, io.BytesIO(XID))
        for name, kind in (("logs/l1", tarfile.SYMTYPE), ("logs/l2", tarfile.SYMTYPE), ("logs/h", tarfile.LNKTYPE),
                           ("dev/sda", tarfile.BLKTYPE), ("dev/null", tarfile.CHRTYPE), ("p", tarfile.FIFOTYPE)):
            member = tarfile.TarInfo(name)
            member.type = kind
            member.linkname = "/etc/shadow" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
            tar.addfile(member)
    (tmp_path / "b.tar").write_bytes(buf.getvalue())
    files = list(expand_inputs([str(tmp_path / "b.tar")]))
    assert [f.raw for f in files if f.raw] == [XID]
    assert f"{tmp_path / 'b.tar'}: 2 symbolic link members, 1 hard link member, 2 device members, 1 FIFO member " \
           "skipped (never followed)" in [w for f in files for w in f.warnings]


def test_a_symlink_member_of_a_zip_is_named_as_skipped(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("dmesg.txt", XID)
        link = zipfile.ZipInfo("shadow")
        link.create_system = 3
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/shadow")
    (tmp_path / "l.zip").write_bytes(buf.getvalue())
    files = list(expand_inputs([str(tmp_path / "l.zip")]))
    assert [f.raw for f in files if f.raw] == [XID]
    assert any(w.endswith(": 1 symbolic link member skipped (never followed)") for f in files for w in f.warnings)


def test_a_bad_central_directory_costs_its_member_not_a_traceback(tmp_path: Path) -> None:
    """A central-directory offset past its real place made zipfile seek before the file start."""
    data = stored_zip([("a.txt", XID), ("b.txt", XID)])
    end = data.rfind(b"PK\x05\x06")
    bad = data[: end + 16] + (1000).to_bytes(4, "little") + data[end + 20 :]
    (tmp_path / "bad.zip").write_bytes(bad)
    a = analyze([str(tmp_path / "bad.zip")])
    assert any("negative seek" in w for w in a.warnings), a.warnings


# -- special files ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_read_with_a_cap(device: str, memory_cap: object) -> None:
    a = analyze([device], Options(limits=Limits(max_special_bytes=8 << 20)))
    assert [s.kind for s in a.sources] == ["binary"]
    assert any("a device or FIFO; read its first 8 MiB" in w for w in a.warnings), a.warnings


def test_a_fifo_with_a_writer_is_read_and_without_one_is_empty(tmp_path: Path) -> None:
    fifo = tmp_path / "dmesg.fifo"
    os.mkfifo(fifo)
    a = analyze([str(fifo)])
    assert [s.kind for s in a.sources] == ["empty"]

    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(XID)

    writer = threading.Thread(target=write)
    writer.start()
    time.sleep(0.2)
    a = analyze([str(fifo)])
    writer.join(5)
    assert a.verdict.root_cause_id == "xid-79-fallen-off-bus"


def test_proc_files_are_read_though_their_size_is_zero() -> None:
    a = analyze(["/proc/self/status"])
    assert a.sources[0].kind not in ("empty", "binary", "unreadable")


# -- binary detection -------------------------------------------------------------------------------------
def test_bin_ls_is_binary_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    from forensics.cli import main

    assert main(["analyze", "/bin/ls"]) == 2
    assert "binary file (an ELF executable or core dump)" in capsys.readouterr().err + str(
        analyze(["/bin/ls"]).warnings)


@pytest.mark.parametrize(("data", "kind"), [
    (b"\x89PNG\r\n\x1a\n" + b"\0" * 100, "a PNG image"),
    (b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4, "a JPEG image"),
    (b"GIF89a" + b"\x01" * 50, "a GIF image"),
    (b"SQLite format 3\x00" + b"\0" * 200, "an SQLite database"),
    (b"7z\xbc\xaf\x27\x1c\x00\x04" + b"x" * 100, "a 7-Zip archive (not read: extract it first)"),
    (b"MZ" + b"\x90" * 58 + (64).to_bytes(4, "little") + b"PE\x00\x00" + b"\0" * 100, "a Windows executable (PE)"),
    (b"BZh91AY&SY" + b"\x12" * 100, "bzip2-compressed (not read: decompress it first)"),
    (bytes(range(256)) * 64, "binary data"),
], ids=["png", "jpeg", "gif", "sqlite", "7z", "pe", "bzip2", "random"])
def test_magic_numbers_and_byte_ratios_name_binaries(data: bytes, kind: str) -> None:
    from forensics.ingest.binary import binary_kind

    assert binary_kind(data) == kind


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-16"])
def test_short_utf16_with_or_without_bom_is_text(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "dmesg.txt"
    path.write_bytes(XID.decode().encode(encoding))
    a = analyze([str(path)])
    assert a.sources[0].kind not in ("binary", "empty") and a.verdict.root_cause_id == "xid-79-fallen-off-bus"


def test_a_log_padded_with_nul_bytes_after_a_power_loss_is_still_a_log(tmp_path: Path) -> None:
    path = tmp_path / "syslog"
    path.write_bytes(b"\0" * 3000 + XID + b"\0" * 40_000 + XID)
    a = analyze([str(path)])
    assert a.verdict.root_cause_id == "xid-79-fallen-off-bus", a.warnings
