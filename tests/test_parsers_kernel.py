"""Kernel-log parsers on the real corpus files and on the shapes the corpus lacks.

Every corpus file that is a kernel / journal / syslog log must be detected as the right kind,
parse without warnings, join multi-line records and yield the key events with the right
kind, attrs and time.
"""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from forensics.parsers.common import kernlog
from forensics.parsers.common.base import ParseContext
from forensics.parsers.producers.kernel_messages import classify
from forensics.parsers.registry import detect, parser_by_name
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.clock import NS
from forensics.events import Event, Severity, TsSource
from forensics.ingest.textdoc import TextDocument

CASES = Path(__file__).parent / "corpus" / "cases"

#: corpus file -> the kind it must be detected as
EXPECTED_KIND = {
    "akash244-xid43-31-94-dmesgT/dmesg.txt": "dmesg-ctime",
    "deepseekvl2-90-host-oom-killer/dmesg.txt": "dmesg",
    "ert7797-oom-dmesg-iso/dmesg.txt": "dmesg-iso",
    "gpud-f2e7792-xid48-dbe-xid63-remap-xid94/dmesg.txt": "dmesg-iso",
    "gpud-pr117-xid45-hung-task/dmesg.txt": "dmesg-ctime",
    "llamacpp27102-xid8-rc-watchdog/journal.txt": "journalctl",
    "neg-gpud-kvm-a-boot-nvidia-taint-pcspkr/dmesg.txt": "dmesg-ctime",
    "neg-gsconnect1052-aer-rxerr-spam-ru-locale/journal.txt": "journalctl",
    "neg-k8sdp480-normal-driver-load/dmesg.txt": "dmesg",
    "neg-wsl11293-dxg-boot-ioctl-benign/dmesg.txt": "dmesg",
    "nvdocker182-api-mismatch-journal-continuation/journal.txt": "journalctl",
    "nvsentinel155-fallen-off-multiline/dmesg.txt": "dmesg",
    "ogkm1045-reset-required-journal-truncated/journal.txt": "journalctl",
    "ogkm1045-xid62-pmu-halted/journal.txt": "journalctl",
    "ogkm1080-gsp-rpc-fail-journal/journal.txt": "journalctl",
    "ogkm1150-xid45-after-xid145-149/journal.txt": "journalctl",
    "ogkm789-rminit-gsp-gfwboot/dmesg.txt": "dmesg",
    "ogkm829-xid120-gsp-task-exception/dmesg.txt": "dmesg",
    "popos3363-aer-correctable-journal/syslog.txt": "syslog",
    "proton4450-xid13-tex-layout/dmesg.txt": "dmesg",
    "pytorch51382-xid43-xid31-suspect-gpu/dmesg.txt": "dmesg-ctime",
    "sm120-no-kernel-image-journald/journal.log": "journalctl",
    "stackhpc287-api-mismatch-rsyslog-012/syslog.txt": "syslog",
    "stas00-xid63-row-remap-pending/syslog.txt": "dmesg",
    "talos1118-gsp-rpc-history/dmesg.txt": "talosctl-dmesg",
    "trtllm15610-xid13-warp-mmu-b200/dmesg.txt": "dmesg-ctime",
    "vllm40652-xid119-gsp-banner/dmesg.txt": "dmesg-ctime",
    "wsl41062-dxg-eoverflow-nvml-blocked/dmesg.txt": "dmesg",
    "wsl9099-dxg-ioctl-nvsmi-no-gpu/dmesg.txt": "dmesg",
    "wsl9099-dxg-ioctl-nvsmi-no-gpu/dmesg.part2.txt": "dmesg",
    "wslg424-dxgk-err-handle-oops/dmesg.txt": "dmesg",
}

KERNEL_PARSERS = ("dmesg", "dmesg-ctime", "dmesg-iso", "dmesg-delta", "kmsg", "journalctl", "journalctl-json",
                  "syslog", "talosctl-dmesg")


def run(text: str | bytes, *, name: str | None = None, **ctx_args: object) -> tuple[str, list[Event], list[str]]:
    raw = text.encode() if isinstance(text, str) else text
    doc = TextDocument.from_bytes(raw, "log")
    parser = parser_by_name(name) if name else detect(doc.head())[0]
    ctx = ParseContext(path="log", source="file:log", **ctx_args)  # type: ignore[arg-type]
    events = [r for r in parser.parse(doc, ctx) if isinstance(r, Event)]
    return parser.name, events, ctx.warnings


def corpus(rel: str, **ctx_args: object) -> tuple[str, list[Event], list[str]]:
    return run((CASES / rel).read_bytes(), year=ctx_args.pop("year", 2025), **ctx_args)


def utc(*args: int, nanos: int = 0) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp()) * NS + nanos  # type: ignore[misc]


# -- every corpus kernel file ----------------------------------------------------------------------
@pytest.mark.parametrize("rel", sorted(EXPECTED_KIND))
def test_corpus_file_detected_and_parsed_cleanly(rel: str) -> None:
    kind, events, warnings = corpus(rel)
    assert kind == EXPECTED_KIND[rel]
    assert not warnings
    assert events
    for e in events:
        assert e.origin.path == "log" and e.origin.line >= 1
        assert e.message and "\n" not in e.message
        assert (e.ts is None) == (e.ts_source is TsSource.NONE)


def test_all_kernel_shaped_corpus_files_are_listed() -> None:
    """A new corpus case with a kernel log must get an expected kind here."""
    kernel_kinds = {"dmesg", "dmesg-T", "dmesg-iso", "journalctl", "journald", "journalctl-fragment",
                    "syslog-with-dmesg-ts", "syslog-rsyslog", "syslog-xid-line", "talosctl-dmesg"}
    import tomllib

    for case in sorted(CASES.iterdir()):
        meta = tomllib.loads((case / "case.toml").read_text())
        if set(meta.get("log_kinds", [])) & kernel_kinds:
            listed = [rel for rel in EXPECTED_KIND if rel.startswith(case.name + "/")]
            assert listed, f"{case.name} has kernel-log files but none is in EXPECTED_KIND"


def test_nvsentinel155_fallen_off_bus_is_one_event_of_three_lines() -> None:
    _, events, _ = corpus("nvsentinel155-fallen-off-multiline/dmesg.txt")
    first = events[0]
    assert len(events) == 3
    assert (first.kind, first.gpu, first.attrs["topic"]) == ("nvrm", "0000:b3:00.0", "fallen-off-bus")
    assert first.origin.line == 1 and first.origin.nlines == 3
    assert "fallen off the bus" in first.message and first.message.count("NVRM:") == 1
    assert first.detail.count("\n") == 2 and first.detail.splitlines()[2].startswith("NVRM: fallen off the bus")
    assert first.uptime_ns == 1843 * NS + 308_145_000 and first.ts is None
    assert first.severity is Severity.CRITICAL
    assert events[1].attrs["topic"] == "probe-failed" and events[1].origin.line == 4


def test_nvsentinel155_placed_when_boot_time_known() -> None:
    boot = utc(2025, 6, 1)
    _, events, _ = corpus("nvsentinel155-fallen-off-multiline/dmesg.txt", boot_time_ns=boot)
    assert events[0].ts == boot + 1843 * NS + 308_145_000
    assert events[0].ts_source is TsSource.BOOT_RELATIVE


def test_akash244_xids_pci_pids_and_local_time() -> None:
    _, events, _ = corpus("akash244-xid43-31-94-dmesgT/dmesg.txt")
    xids = [e for e in events if e.kind == "xid"]
    assert [e.attrs["xid"] for e in xids] == [43, 43, 31, 94]
    assert [e.gpu for e in xids] == ["0000:00:05.0", "0000:00:05.0", "0000:00:07.0", "0000:00:08.0"]
    assert (xids[0].pid, xids[0].attrs["process"]) == (1045242, "pt_main_thread")
    assert xids[2].attrs["process"] == "python3.10" and "MMU Fault" in xids[2].attrs["text"]
    assert xids[3].pid is None and "process" not in xids[3].attrs  # pid='<unknown>', name=<unknown>
    assert xids[0].ts == utc(2024, 7, 31, 23, 14, 18) and xids[0].ts_source is TsSource.LOCAL
    uuid = next(e for e in events if e.attrs.get("uuid"))
    assert uuid.attrs["uuid"] == "GPU-efbdfde9-5798-a6e7-4c46-12518fa15375" and uuid.gpu == "0000:00:05.0"
    assert events[0].origin.line == 2  # the shell prompt on line 1 is skipped silently


def test_akash244_with_known_zone_is_exact() -> None:
    _, events, _ = corpus("akash244-xid43-31-94-dmesgT/dmesg.txt", tz=ZoneInfo("Europe/Berlin"))
    assert events[0].ts == utc(2024, 7, 28, 7, 15, 27) and events[0].ts_source is TsSource.EXACT


def test_ert7797_iso_comma_decimals_and_oom_sequence() -> None:
    _, events, _ = corpus("ert7797-oom-dmesg-iso/dmesg.txt")
    assert events[0].origin.line == 2
    assert events[0].ts == utc(2024, 4, 29, 12, 55, 41, nanos=678_628_000)
    assert events[0].ts_source is TsSource.EXACT
    assert events[0].kind == "oom-killer" and events[0].attrs["invoker"] == "pool"
    killed = next(e for e in events if "Killed process" in e.message)
    assert (killed.kind, killed.pid, killed.attrs["process"], killed.attrs["rss_kb"]) == (
        "oom-killer", 1440763, "perl", 60356340)
    constraint = next(e for e in events if e.message.startswith("oom-kill:"))
    assert constraint.attrs["constraint"] == "CONSTRAINT_NONE" and constraint.pid == 1440763


def test_gpud_xid48_63_94_sequence() -> None:
    _, events, _ = corpus("gpud-f2e7792-xid48-dbe-xid63-remap-xid94/dmesg.txt")
    xids = [e for e in events if e.kind == "xid"]
    assert [e.attrs["xid"] for e in xids[:4]] == [48, 63, 94, 94]
    assert {e.gpu for e in xids} == {"0000:19:00.0"}
    assert xids[3].pid == 1248209 and xids[3].attrs["process"] == "python3.10"
    assert xids[0].severity is Severity.CRITICAL
    peermem = [e for e in events if e.attrs.get("topic") == "peermem-invalid-context"]
    assert len(peermem) == len(events) - len(xids)


def test_gpud_pr117_hung_task() -> None:
    _, events, _ = corpus("gpud-pr117-xid45-hung-task/dmesg.txt")
    hung = [e for e in events if e.kind == "hung-task"]
    assert len(hung) == 1
    assert (hung[0].pid, hung[0].attrs["process"], hung[0].attrs["seconds"]) == (620917, "cache_mgr_event", 120)
    assert sum(e.kind == "xid" and e.attrs["xid"] == 45 for e in events) == 6


def test_deepseek_oom_killer() -> None:
    _, events, _ = corpus("deepseekvl2-90-host-oom-killer/dmesg.txt")
    assert [e.kind for e in events] == ["oom-killer", "oom-killer"]
    assert events[0].attrs["memcg"].startswith("/user.slice/") and events[1].attrs["rss_kb"] == 54398260 + 2628
    assert events[1].uptime_ns == 26002 * NS + 109_061_000


def test_llamacpp_lowercase_month_no_hostname_year_from_context() -> None:
    _, events, _ = corpus("llamacpp27102-xid8-rc-watchdog/journal.txt", year=2025)
    xid = events[-1]
    assert (xid.kind, xid.attrs["xid"], xid.pid, xid.attrs["process"]) == ("xid", 8, 709378, "llama-server")
    assert xid.host is None
    assert xid.ts == utc(2025, 8, 16, 23, 1, 35) and xid.ts_source is TsSource.LOCAL
    assert events[0].attrs["topic"] == "rc-watchdog"


def test_gsconnect_russian_month_names() -> None:
    _, events, _ = corpus("neg-gsconnect1052-aer-rxerr-spam-ru-locale/journal.txt", year=2025)
    assert len(events) == 13 and all(e.kind == "aer" for e in events)
    assert events[0].ts == utc(2025, 2, 12, 0, 48, 2)
    assert events[-1].ts == utc(2025, 2, 12, 0, 48, 3)
    assert events[0].attrs["severity"] == "corrected" and events[0].attrs["pci"] == "0000:00:1c.5"
    assert events[3].attrs["error_bit"] == "RxErr"
    assert all(e.host is None for e in events)


def test_gsconnect_year_goes_back_when_the_stamps_would_be_in_the_future() -> None:
    # the file's year is 2026 but "фев 12" of 2026 lies after the reference (now capped at end of 2026
    # in production); with the year of a January mtime the February lines belong to the year before
    from forensics.clock import YearlessClock

    clock = YearlessClock(2026, reference_ns=utc(2026, 1, 5))
    i = clock.add(2, 12, 0, 48, 2)
    assert clock.resolve()[i][0] == utc(2025, 2, 12, 0, 48, 2)  # type: ignore[index]


def test_nvdocker_api_mismatch_continuation_joined() -> None:
    _, events, _ = corpus("nvdocker182-api-mismatch-journal-continuation/journal.txt")
    assert len(events) == 1
    e = events[0]
    assert (e.kind, e.host, e.origin.nlines) == ("nvrm", "nyasara-linux", 4)
    assert (e.attrs["client_version"], e.attrs["kernel_version"]) == ("367.44", "367.35")
    assert e.message.startswith("NVRM: API mismatch") and "components have the same version" in e.message
    assert len(e.detail.splitlines()) == 4


def test_stackhpc_rsyslog_012_is_one_multiline_record() -> None:
    kind, events, _ = corpus("stackhpc287-api-mismatch-rsyslog-012/syslog.txt")
    assert kind == "syslog" and len(events) == 1
    e = events[0]
    assert e.origin.nlines == 1 and len(e.detail.splitlines()) == 4
    assert "#012" not in e.text
    assert e.attrs["kernel_version"] == "530.30.02" and e.host == "gpu-0"


def test_ogkm1045_pager_truncation() -> None:
    _, events, _ = corpus("ogkm1045-reset-required-journal-truncated/journal.txt")
    cut = events[1]
    assert cut.attrs.get("truncated") is True
    assert cut.message.endswith("polle") and not cut.message.endswith(">")
    assert not any(e.attrs.get("truncated") for e in events[2:])
    assert cut.attrs["topic"] == "reset-required"


def test_ogkm1150_stampless_kernel_lines() -> None:
    _, events, _ = corpus("ogkm1150-xid45-after-xid145-149/journal.txt")
    assert len(events) == 7 and all(e.kind == "xid" and e.attrs["xid"] == 45 for e in events)
    assert all(e.ts is None for e in events)
    assert "caused by previous Xid 149" in events[0].attrs["text"]
    assert {e.gpu for e in events} == {"0000:dc:00.0", "0000:ed:00.0", "0000:ba:00.0", "0000:97:00.0"}


def test_popos_syslog_keeps_the_kernel_uptime_stamp() -> None:
    _, events, _ = corpus("popos3363-aer-correctable-journal/syslog.txt", year=2025)
    e = events[0]
    assert e.uptime_ns == 68183 * NS + 615_790_000 and e.ts == utc(2025, 9, 19, 16, 18, 2)
    assert e.host == "bubz" and e.kind == "aer" and e.attrs["source_pci"] == "0000:00:00.0"
    assert events[3].attrs["error_bit"] == "Timeout" and events[3].message.endswith("Timeout")


def test_talos_nanosecond_stamps_and_node_host() -> None:
    _, events, _ = corpus("talos1118-gsp-rpc-history/dmesg.txt")
    assert events[0].ts == utc(2026, 4, 22, 21, 27, 51, nanos=288_830_314) and events[0].ts_source is TsSource.EXACT
    assert events[4].ts == utc(2026, 4, 22, 21, 27, 51, nanos=288_856_310)  # ".28885631Z"
    assert all(e.host == "192.168.11.119" and e.attrs["level"] == "warning" for e in events)
    assert events[0].attrs["topic"] == "gsp-rpc-history"


@pytest.mark.parametrize(
    ("rel", "xid", "gpu"),
    [("vllm40652-xid119-gsp-banner/dmesg.txt", 119, "0001:6c:00.0"),
     ("ogkm829-xid120-gsp-task-exception/dmesg.txt", 120, "0000:06:00.0"),
     ("ogkm1045-xid62-pmu-halted/journal.txt", 62, "0000:01:00.0"),
     ("proton4450-xid13-tex-layout/dmesg.txt", 13, "0000:01:00.0"),
     ("trtllm15610-xid13-warp-mmu-b200/dmesg.txt", 13, "0000:70:00.0"),
     ("pytorch51382-xid43-xid31-suspect-gpu/dmesg.txt", 43, "0000:3d:00.0"),
     ("stas00-xid63-row-remap-pending/syslog.txt", 63, "0000:10:1c.0")],
)
def test_first_xid_number_and_gpu(rel: str, xid: int, gpu: str) -> None:
    _, events, _ = corpus(rel)
    first = next(e for e in events if e.kind == "xid")
    assert (first.attrs["xid"], first.gpu, first.attrs["pci"]) == (xid, gpu, gpu)


def test_ogkm789_rm_init_failure_names_the_gpu() -> None:
    _, events, _ = corpus("ogkm789-rminit-gsp-gfwboot/dmesg.txt")
    assert [e.attrs.get("topic") for e in events] == ["rm-init-failed"] * 5
    assert events[1].gpu == "0000:98:00.0"


def test_wsl_dxg_lines() -> None:
    _, events, _ = corpus("neg-wsl11293-dxg-boot-ioctl-benign/dmesg.txt")
    assert all(e.kind == "dxg" for e in events)
    assert events[1].attrs == {"function": "dxgkio_is_feature_enabled", "errno": -22}
    _, events, _ = corpus("wslg424-dxgk-err-handle-oops/dmesg.txt")
    assert events[0].kind == "dxg"
    assert any(e.attrs.get("crash") for e in events)


def test_k8sdp480_command_line_is_skipped() -> None:
    _, events, _ = corpus("neg-k8sdp480-normal-driver-load/dmesg.txt")
    assert len(events) == 13 and events[0].origin.line == 2
    assert events[0].attrs["topic"] == "driver-load"


# -- shapes the corpus lacks -----------------------------------------------------------------------
def test_dmesg_raw_priority_prefix_decode_prefix_and_caller() -> None:
    text = ("<4>[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
            "kern  :err   : [ 1234.600000] pcieport 0000:3a:00.0: AER: Uncorrected (Fatal) error received: "
            "0000:3a:00.0\n"
            "[    5.000000] [  T123] systemd[1]: started\n")
    kind, events, warnings = run(text)
    assert kind == "dmesg" and not warnings
    assert events[0].attrs["level"] == "warning" and events[0].attrs["facility"] == "kern"
    assert events[0].kind == "xid" and events[0].attrs["xid"] == 79
    assert events[1].attrs["severity"] == "fatal" and events[1].attrs["level"] == "err"
    assert events[2].attrs["caller"] == "T123" and events[2].message == "systemd[1]: started"


@pytest.mark.parametrize(
    ("text", "noise"),
    [("root@node4:~# dmesg -T |grep NVRM", True), ("$ sudo dmesg | grep -i 'limited by'", True),
     ("➜ ~ journalctl -b -1 --no-pager | grep -iE \"gpu\" | tail -50", True), ("❯ dmesg | grep dxgk", True),
     ("[havb@be-lx139213:~]$ dmesg --time-format iso  | grep oom", True), ("sudo dmesg |grep -i nvidia", True),
     ("...", True), ("[...]", True), ("…", True), ("```", True), ("--- [snip] ---", True), ("", True),
     ("-- No entries --", True), ("[ 1843.308145] NVRM: x", False), ("NVRM: Xid (PCI:0000:10:1c): 63", False),
     ("kernel: NVRM: Xid", False), ("cat: /dev/kmsg: Operation not permitted", False)],
)
def test_pasted_noise(text: str, noise: bool) -> None:
    assert kernlog.is_noise(text) is noise


def test_terminal_colours_are_ignored() -> None:
    text = ("\x1b[32m[ 1843.308145]\x1b[0m \x1b[33mNVRM: \x1b[0mXid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has "
            "fallen off the bus.\n") * 2
    kind, events, _ = run(text)
    assert kind == "dmesg" and events[0].attrs["xid"] == 79 and "\x1b" not in events[0].message


def test_dmesg_raw_with_ctime_gives_both_clocks() -> None:
    text = "[17159596.699613] [Fri Dec 22 12:26:24 2023] device vethab20cf5 entered promiscuous mode\n"
    _, events, _ = run(text, name="dmesg")
    assert events[0].uptime_ns == 17159596 * NS + 699_613_000
    assert events[0].ts == utc(2023, 12, 22, 12, 26, 24) and events[0].message.startswith("device")


def test_dmesg_ctime_hard_wrapped_lines_join_their_record() -> None:
    # giltene/jHiccup#29: dmesg -T pasted through a mail client that wrapped long lines
    text = ("[Thu Oct 19 02:11:44 2017] CPU: 11 PID: 0 Comm: swapper/11 Tainted: G\n"
            "     OE  ------------   3.10.0-327.22.2.el7.x86_64 #1\n"
            "[Thu Oct 19 02:11:44 2017] Hardware name: Dell Inc. PowerEdge R620/0GFKVD,\n"
            "BIOS 2.0.19 08/29/2013\n")
    _, events, warnings = run(text)
    assert not warnings and len(events) == 2
    assert events[1].origin.nlines == 2 and events[1].message.endswith("BIOS 2.0.19 08/29/2013")


def test_dmesg_delta_anchor_and_deltas() -> None:
    text = ("[  +0.000100] before any anchor\n"
            "[Feb13 15:05] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n"
            "[  +0.000316] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n"
            "[  +1.500000] something later\n")
    kind, events, warnings = run(text, year=2024)
    assert kind == "dmesg-delta" and not warnings
    assert events[0].ts is None and events[0].attrs["delta_s"] == pytest.approx(0.0001)
    assert events[1].ts == utc(2024, 2, 13, 15, 5)
    assert events[2].ts == utc(2024, 2, 13, 15, 5, nanos=316_000)
    assert events[3].ts == utc(2024, 2, 13, 15, 5, 1, nanos=500_316_000)
    assert events[2].attrs["ts_resolution_s"] == 60


def test_dmesg_iso_decode_prefix() -> None:
    text = ("kern  :warn  : 2025-01-21T04:41:44,285060+00:00 nvidia-peermem nv_get_p2p_free_callback:127 ERROR "
            "detected invalid context, skipping further processing\n")
    kind, events, _ = run(text)
    assert kind == "dmesg-iso"
    assert events[0].ts == utc(2025, 1, 21, 4, 41, 44, nanos=285_060_000)
    assert events[0].attrs["level"] == "warning" and events[0].kind == "nvrm"


def test_kmsg_records_dictionary_escapes_gaps_and_fragments() -> None:
    text = ("6,100,5000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=42, name=python, GPU has fallen off the bus.\n"
            " SUBSYSTEM=pci\n"
            " DEVICE=+pci:0000:3b:00.0\n"
            "4,101,5000100,-;line one\\x0aline two\n"
            "4,105,6000000,c;start of a line\n"
            "4,106,6000001,+;and its continuation\n"
            "30,107,7000000,-,caller=T77;udevd[80]: a \\x5c backslash\n")
    kind, events, warnings = run(text, boot_time_ns=utc(2025, 1, 1))
    assert kind == "kmsg" and not warnings
    xid = events[0]
    assert xid.kind == "xid" and xid.attrs["subsystem"] == "pci" and xid.attrs["device"] == "+pci:0000:3b:00.0"
    assert xid.ts == utc(2025, 1, 1, 0, 0, 5) and xid.ts_source is TsSource.BOOT_RELATIVE
    assert xid.origin.nlines == 3
    assert events[1].detail == "line one\nline two"
    lost = events[2]
    assert (lost.kind, lost.severity, lost.attrs["lost"], lost.attrs["reason"]) == (
        "recorder", Severity.WARNING, 3, "kmsg-records-lost")
    assert events[3].message == "start of a line and its continuation" and events[3].origin.nlines == 2
    assert events[4].attrs["caller"] == "T77" and events[4].attrs["facility"] == "daemon"
    assert events[4].message == "udevd[80]: a \\ backslash"


def test_journalctl_iso_unix_monotonic_and_markers() -> None:
    text = ("-- Logs begin at Fri 2021-12-31 10:00:01 UTC, end at Sat 2022-01-01 12:00:00 UTC. --\n"
            "Dec 31 23:59:59 node1 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
            "-- Boot 3b1c0a14a7c24eb8a5a4a1c5d5e6f7a8 --\n"
            "Jan 01 00:00:05 node1 kernel: Linux version 6.8.0\n")
    kind, events, warnings = run(text, year=2030)
    assert kind == "journalctl" and not warnings
    assert events[0].ts == utc(2021, 12, 31, 23, 59, 59)  # year from the header, not from ctx
    assert events[1].kind == "boot" and events[1].attrs["boot_id"] == "3b1c0a14a7c24eb8a5a4a1c5d5e6f7a8"
    assert events[2].ts == utc(2022, 1, 1, 0, 0, 5) and events[2].kind == "boot"

    iso = ("2024-03-11T10:37:00+0100 node1 kernel: NVRM: GPU at PCI:0000:01:00: "
           "GPU-cccfc25d-fc66-0d40-e289-3b1a1f5d7896\n")
    kind, events, _ = run(iso)
    assert kind == "journalctl" and events[0].ts == utc(2024, 3, 11, 9, 37) and events[0].host == "node1"

    unix = "1710149820.123456 node1 kernel: Out of memory: Killed process 12 (python) total-vm:1kB, anon-rss:2kB, " \
           "file-rss:0kB, shmem-rss:0kB\n"
    kind, events, _ = run(unix)
    assert kind == "journalctl" and events[0].ts == 1710149820 * NS + 123_456_000 and events[0].pid == 12

    mono = "[ 1234.567890] node1 kernel: NVRM: Xid (PCI:0000:3b:00): 13, pid=5, name=python, Graphics Exception\n" * 2
    kind, events, _ = run(mono)
    assert kind == "journalctl" and events[0].uptime_ns == 1234 * NS + 567_890_000 and events[0].host == "node1"


def test_programs_journal_lines_go_to_the_process_output_parser() -> None:
    _, events, _ = corpus("sm120-no-kernel-image-journald/traceback.txt", year=2025)
    tb = events[0]
    assert tb.kind == "traceback" and tb.attrs["exc_type"] == "RuntimeError"
    assert "no kernel image is available" in tb.message
    assert (tb.host, tb.pid, tb.origin.line, tb.origin.nlines) == ("llm", 394, 1, 4)
    assert tb.ts == utc(2025, 10, 4, 15, 2, 41) and tb.ts_source is TsSource.LOCAL
    _, events, _ = corpus("sm120-no-kernel-image-journald/journal.log", year=2025)
    assert events[0].kind == "warning" and "sm_120" in events[0].text


def test_programs_journal_lines_without_a_record_are_dropped_unless_errors() -> None:
    entries = [{"__REALTIME_TIMESTAMP": "1700000000000000", "SYSLOG_IDENTIFIER": "app", "PRIORITY": "6",
                "MESSAGE": "just chatter"},
               {"__REALTIME_TIMESTAMP": "1700000001000000", "SYSLOG_IDENTIFIER": "app", "PRIORITY": "3",
                "MESSAGE": "could not open device"}]
    _, events, _ = run("".join(json.dumps(e) + "\n" for e in entries))
    assert [e.message for e in events] == ["could not open device"]


def test_syslog_rsyslog_iso_and_grep_prefix() -> None:
    text = ("/var/log/syslog:Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, "
            "pid='<unknown>', name=<unknown>, An uncorrectable double bit error (DBE) has been detected\n"
            "/var/log/syslog.1:Dec  1 09:00:00 worker4 kernel: [   10.000000] Linux version 6.8.0\n")
    kind, events, warnings = run(text, year=2024)
    assert kind == "syslog" and not warnings
    assert events[0].attrs["xid"] == 48 and events[0].uptime_ns == 219 * NS + 470_994_000
    assert events[0].attrs["grep_prefix"] == "/var/log/syslog"
    hp = "2024-03-03T10:11:12.123456+00:00 host kernel: NVRM: Xid (PCI:0000:07:00): 79, GPU has fallen off the bus.\n"
    kind, events, _ = run(hp * 2)
    assert kind == "syslog" and events[0].ts == utc(2024, 3, 3, 10, 11, 12, nanos=123_456_000)


def test_journal_json_lines() -> None:
    entry = {
        "__REALTIME_TIMESTAMP": "1700000005000000", "__MONOTONIC_TIMESTAMP": "5000000",
        "_SOURCE_MONOTONIC_TIMESTAMP": "4000000", "_BOOT_ID": "b03ed610f21d46ab8243a495ba5a0058",
        "_HOSTNAME": "node7", "_TRANSPORT": "kernel", "PRIORITY": "4", "SYSLOG_FACILITY": "0",
        "SYSLOG_IDENTIFIER": "kernel",
        "MESSAGE": list(b"NVRM: Xid (PCI:0000:3b:00): 79, pid=7, name=py\xff, GPU has fallen off the bus."),
    }
    user = {"__REALTIME_TIMESTAMP": "1700000006000000", "_HOSTNAME": "node7", "SYSLOG_IDENTIFIER": "python3",
            "_PID": "4242", "PRIORITY": "3", "MESSAGE": "Traceback (most recent call last):\n  File x\nValueError: y"}
    text = json.dumps(entry) + "\n" + json.dumps(user) + "\n"
    kind, events, warnings = run(text)
    assert kind == "journalctl-json" and not warnings
    k = events[0]
    assert k.kind == "xid" and k.host == "node7" and k.attrs["message_bytes"] is True
    assert k.ts == 1700000004 * NS and k.uptime_ns == 4 * NS  # printk time, not journald's receipt time
    assert k.attrs["boot_time_ns"] == 1700000000 * NS and k.attrs["level"] == "warning"
    u = events[1]
    assert u.pid == 4242 and u.attrs["ident"] == "python3" and u.detail.count("\n") == 2
    assert u.ts == 1700000006 * NS and u.ts_source is TsSource.EXACT
    assert u.kind == "traceback" and u.message == "ValueError: y"


def test_journal_json_pretty_and_export() -> None:
    pretty = parser_by_name("journalctl-json").samples[1]
    kind, events, warnings = run(pretty)
    assert kind == "journalctl-json" and not warnings
    assert events[0].origin.nlines == 13 and events[0].attrs["level"] == "err"
    assert events[0].uptime_ns == 1805611354000 and events[0].ts == (1601471260802301 - 1806379233 + 1805611354) * 1000

    binary = b"line\nwith a newline"
    export = (b"__CURSOR=s=1\n__REALTIME_TIMESTAMP=1700000000000000\n_HOSTNAME=n1\n_TRANSPORT=kernel\n"
              b"MESSAGE=NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n\n"
              b"__CURSOR=s=2\n__REALTIME_TIMESTAMP=1700000001000000\n_HOSTNAME=n1\nSYSLOG_IDENTIFIER=app\nPRIORITY=3\n"
              b"MESSAGE\n"
              + struct.pack("<Q", len(binary)) + binary + b"\n\n")
    kind, events, warnings = run(export)
    assert kind == "journalctl-json" and not warnings
    assert [e.kind for e in events] == ["xid", "log"]
    assert events[1].detail == "line\nwith a newline" and events[1].origin.line == 7
    assert events[1].attrs["level"] == "err"
    # the last entry needs no closing empty line
    kind, events, warnings = run(b"__CURSOR=s=1\n__REALTIME_TIMESTAMP=1700000000000000\n_TRANSPORT=kernel\n"
                                 b"MESSAGE=NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
    assert kind == "journalctl-json" and not warnings and [e.kind for e in events] == ["xid"]


def test_journal_json_bad_lines_warn_once() -> None:
    good = json.dumps({"__REALTIME_TIMESTAMP": "1700000000000000", "MESSAGE": "hello"})
    _, events, warnings = run(good + "\n{not json\n", name="journalctl-json")
    assert len(events) == 1 and len(warnings) == 1


def test_huge_file_is_read_through_literals(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernlog, "FULL_PARSE_BYTES", 1000)
    filler = "".join(f"[{i:>6}.000000] usb 1-1: chatter line {i}\n" for i in range(2000))
    record = ("[ 9999.000000] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
              "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
              "               NVRM: fallen off the bus and is not responding to commands.\n")
    kind, events, _ = run(filler + record + filler, name="dmesg")
    assert [e.attrs.get("topic") for e in events] == ["fallen-off-bus"]
    assert events[0].origin.line == 2001 and events[0].origin.nlines == 3
    # a notable literal from the signatures widens the scan
    doc = TextDocument.from_bytes((filler + record).encode(), "log")
    ctx = ParseContext(path="log", source="file:log", notable=(b"chatter line 7\n",))
    found = list(parser_by_name("dmesg").parse(doc, ctx))
    assert len(found) == 2


def test_classifier_families() -> None:
    cases = {
        "NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120, intr 10000000": ("xid", None),
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 44 egress non-posted PRIV error": (
            "nvrm", None),
        "pcieport 0000:00:02.0: AER: Multiple Uncorrected (Non-Fatal) error received: 0000:00:02.0": ("aer", None),
        "pcieport 0000:00:02.0: DPC: containment event, status:0x1f01 source:0x0000": ("aer", None),
        "DMAR: [DMA Read] Request device [06:00.0] PASID ffffffff fault addr 1a5e12000 [fault reason 06] PTE Read "
        "access is not set": ("iommu", "0000:06:00.0"),
        "AMD-Vi: Event logged [IO_PAGE_FAULT device=41:00.0 domain=0x000e address=0x1000 flags=0x0020]": (
            "iommu", "0000:41:00.0"),
        "Memory cgroup out of memory: Killed process 25635 (python) total-vm:1kB, anon-rss:2kB, file-rss:3kB, "
        "shmem-rss:4kB": ("oom-killer", None),
        "Out of memory: Kill process 25635 (python) score 974 or sacrifice child": ("oom-killer", None),
        "watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]": ("hung-task", None),
        "rcu: INFO: rcu_sched self-detected stall on CPU": ("hung-task", None),
        "Linux version 5.15.0-97-generic (buildd@lcy02-amd64-102)": ("boot", None),
        "python3[26932]: segfault at 0 ip 00007b439139d7fd sp 00007ffe8565dda8 error 4": ("kernel", None),
        "EXT4-fs (sdh2): mounted filesystem": ("kernel", None),
    }
    for text, (kind, pci) in cases.items():
        info = classify(text)
        assert info.kind == kind, text
        if pci:
            assert info.attrs["pci"] == pci
    assert classify(cases_key := "Memory cgroup out of memory: Killed process 25635 (python) total-vm:1kB, "
                    "anon-rss:2kB, file-rss:3kB, shmem-rss:4kB").attrs["cgroup"] is True, cases_key
    assert classify("pcieport 0000:00:02.0: DPC: containment event").attrs["severity"] == "fatal"
    assert classify("nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal").attrs["sxid"] == 12028
    link = classify("pci 0000:04:00.0: 252.048 Gb/s available PCIe bandwidth, limited by 16.0 GT/s PCIe x16 link at "
                    "0000:01:00.0 (capable of 504.112 Gb/s with 32.0 GT/s PCIe x16 link)")
    assert (link.kind, link.attrs["gen"], link.attrs["gen_max"], link.attrs["width"]) == ("pcie-link", 4, 5, 16)
    assert classify("systemd-oomd[812]: Killed /user.slice/app.scope due to memory pressure").kind == "oom-killer"


# -- nothing raises ----------------------------------------------------------------------------------
LINEISH = st.lists(
    st.one_of(
        st.text(max_size=60),
        st.sampled_from([
            "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0", "               NVRM: fallen off the bus",
            "[Fri Mar  3 04:27:08 2023] NVRM: Xid (PCI:0000:61:00): 119, pid=1", "[Feb13 15:05] x", "[  +0.1] y",
            "2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer:", "6,3964,206764307,-;nvidia: x\\x0", " A=B",
            "Jun 30 11:07:05 gpu-0 kernel: a#012b#01", "фев 12 00:48:02 kernel: AER: x", "-- Boot 1 --",
            "192.168.11.119: kern: warning: [2026-04-22T21:27:51.288830314Z]: NVRM: x", "kernel: NVRM: Xid (",
            '{"MESSAGE": [1, 2, 300], "__REALTIME_TIMESTAMP": "x"}', "{", "}", "__CURSOR=x", "...", "$ dmesg",
            "Feb 30 10:00:00 h kernel: bad date", "[99999999999999999999.1] x", "<999>[ 1.0] x",
        ]),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LINEISH, st.sampled_from(KERNEL_PARSERS))
@pytest.mark.slow
def test_parsers_never_raise_on_arbitrary_text(lines: list[str], name: str) -> None:
    doc = TextDocument.from_bytes("\n".join(lines).encode("utf-8", errors="surrogatepass"), "fuzz")
    ctx = ParseContext(path="fuzz", source="file:fuzz", year=2024, boot_time_ns=utc(2024, 1, 1))
    for rec in parser_by_name(name).parse(doc, ctx):
        assert isinstance(rec, Event)
    detect(doc.head())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=400), st.sampled_from(KERNEL_PARSERS))
def test_parsers_never_raise_on_arbitrary_bytes(raw: bytes, name: str) -> None:
    doc = TextDocument.from_bytes(raw, "fuzz")
    ctx = ParseContext(path="fuzz", source="file:fuzz")
    list(parser_by_name(name).parse(doc, ctx))
    parser_by_name(name).detect(doc.head())


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_classifier_never_raises(text: str) -> None:
    info = classify(text)
    assert info.kind
