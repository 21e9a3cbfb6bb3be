"""Stream helpers: cleaning, bar segments, prefixes, stamps, record starts."""

from __future__ import annotations

from datetime import UTC, datetime

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.stream_text import (
    Stamp,
    clean,
    parse_glog_stamp,
    record_starts,
    segments,
    split_body,
    srun_labelled,
    stamp_ns,
    timestamp,
)
from forensics.parsers.k8s_device_plugin import PARSER as K8S_PARSER
from forensics.parsers.process_output import scan

from forensics.clock import NS, YEAR_INFERRED
from forensics.events import Event, TsSource
from forensics.ingest.textdoc import TextDocument


def test_clean_strips_ansi_orphans_and_padding() -> None:
    assert clean("\x1b[36m(RayWorkerWrapper pid=4009)\x1b[0m hello   ") == "(RayWorkerWrapper pid=4009) hello"
    assert clean("[36m(RayWorkerWrapper pid=4009) x") == "(RayWorkerWrapper pid=4009) x"


def test_segments_on_cr_literal_caret_m_and_cursor_up() -> None:
    assert segments(" 1/4 [00:01<00:03]\r 2/4 [00:02<00:02]") == [" 1/4 [00:01<00:03]", " 2/4 [00:02<00:02]"]
    assert segments("7.54it/s]^MLoading checkpoint shards: 100%") == ["7.54it/s]", "Loading checkpoint shards: 100%"]
    assert segments("a\x1b[Ab") == ["a", "b"]
    assert segments("plain") == ["plain"]


def test_prefixes_peeled_in_order() -> None:
    b = split_body("0: [rank3]: Traceback (most recent call last):", srun_labels=True)
    assert (b.rank, b.key, b.text) == (3, "n0/r3", "Traceback (most recent call last):")
    b = split_body("(VllmWorker rank=2 pid=777) ERROR 04-15 00:31:11 [worker.py:574] boom")
    assert (b.rank, b.pid, b.level, b.text) == (2, 777, "ERROR", "boom")
    assert b.stamp == Stamp(None, 4, 15, 0, 31, 11)
    b = split_body("[2024-09-11 17:52:18,030] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW!")
    assert b.text == "[deepspeed] OVERFLOW!" and b.stamp == Stamp(2024, 9, 11, 17, 52, 18, 30_000_000)
    b = split_body("E0325 20:57:27.620000 2606 site-packages/torch/api.py:869] failed (exitcode: -9)")
    assert b.level == "ERROR" and b.text == "failed (exitcode: -9)"
    assert b.stamp == Stamp(None, 3, 25, 20, 57, 27, 620000000)
    b = split_body("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9)")
    assert b.level == "ERROR" and b.text == "failed (exitcode: -9)"
    b = split_body("[INFO|trainer.py:1156] 2021-06-05 16:46:31,375 >> ***** Running training *****")
    assert b.text == "***** Running training *****" and b.stamp is not None and b.stamp.year == 2021
    b = split_body("Oct 04 15:02:41 llm sd-webui-forge-start[394]: RuntimeError: CUDA error: x")
    assert (b.host, b.pid, b.text) == ("llm", 394, "RuntimeError: CUDA error: x")
    b = split_body("2021-09-30 17:34:05,265 WARNING [train.py:546] (0/7) Epoch 1")
    assert (b.level, b.rank, b.text) == ("WARNING", 0, "Epoch 1")
    assert split_body("no prefix at all").text == "no prefix at all"


def test_glog_stamp_month_not_zero_padded() -> None:
    assert parse_glog_stamp("321", "02:07:08.414640780") == Stamp(None, 3, 21, 2, 7, 8, 414640780)
    assert parse_glog_stamp("1206", "10:00:00.5") == Stamp(None, 12, 6, 10, 0, 0, 500000000)
    assert parse_glog_stamp("12", "10:00:00") is None


def test_stamp_placement_year_zone_and_receipt() -> None:
    ctx = ParseContext(path="x", source="x", year=2025)
    ts, src = stamp_ns(Stamp(None, 3, 21, 2, 7, 8), ctx)
    assert src == TsSource.LOCAL and ts == 1742522828 * 10**9
    ctx.tz = UTC
    assert stamp_ns(Stamp(None, 3, 21, 2, 7, 8), ctx) == (1742522828 * 10**9, TsSource.EXACT)
    assert stamp_ns(Stamp(None, 13, 1, 0, 0, 0), ctx) == (None, TsSource.NONE)
    no_year = ParseContext(path="x", source="x", receipt_ts=lambda off: 42 + off)
    assert timestamp(Stamp(None, 3, 21, 2, 7, 8), no_year, 8) == (50, TsSource.RECEIPT)
    assert timestamp(None, ParseContext(path="x", source="x"), 0) == (None, TsSource.NONE)


def test_record_starts_anywhere_in_a_line() -> None:
    bar = "Epoch 0:   6%|██  | 32040/500150 [6:28:43<94:39:17,  1.37it/s, loss=2.6]"
    assert record_starts(bar + "[E ProcessGroupNCCL.cpp:458] [Rank 0] Watchdog") == [len(bar)]
    line = ("terminate called after throwing an instance of '[rank5]:[E802 22:07:03.847786934 "
            "ProcessGroupNCCL.cpp:2119] x")
    assert record_starts(line) == [line.index("[rank5]")]
    assert record_starts("4/8 [02:10<02:22, 35.73s/it]Killed") == [len("4/8 [02:10<02:22, 35.73s/it]")]
    assert record_starts("the process was Killed") == []
    assert record_starts("nothing special") == []


def test_srun_label_detection() -> None:
    assert srun_labelled(["0: a", "1: b", "0: c"])
    assert not srun_labelled(["0: a", "plain", "other", "more"])


# -- year-less stamps: the kernel logs' year logic (forensics.clock.YearlessClock) -----------------

_GLOG_NEW_YEAR = (
    # c10d glog stamps print month and day only ("E1231" = 31 December, "E101" = 1 January).
    "[rank1]:[E1231 23:59:58.100000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600060 "
    "milliseconds before timing out.\n"
    "E0101 00:00:03.500000 139876 torch/distributed/elastic/multiprocessing/api.py:833] failed (exitcode: -6) "
    "local_rank: 1 (pid: 4242) of binary: /usr/bin/python3\n"
    "[rank1]:[E101 00:00:05.000000000 ProcessGroupNCCL.cpp:1168] [Rank 1] To avoid data inconsistency, we are "
    "taking the entire process down.\n"
)


def _scan(text: str, ctx: ParseContext) -> list[Event]:
    doc = TextDocument.from_bytes(text.encode(), ctx.path)
    return [r for r in scan(doc, ctx) if isinstance(r, Event) and r.ts is not None]


def _mtime(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> int:
    return int(datetime(year, month, day, hour, minute, second, tzinfo=UTC).timestamp()) * NS


def test_glog_stamps_roll_over_at_new_year() -> None:
    ctx = ParseContext(path="train.log", source="file:train.log", year=2025, mtime_ns=_mtime(2025, 1, 1, 0, 5))
    events = _scan(_GLOG_NEW_YEAR, ctx)
    assert [e.kind for e in events] == ["c10d", "torchrun", "c10d"]
    assert [e.ts for e in events] == [_mtime(2024, 12, 31, 23, 59, 58) + 100_000_000,
                                      _mtime(2025, 1, 1, 0, 0, 3) + 500_000_000, _mtime(2025, 1, 1, 0, 0, 5)]
    assert all(e.attrs[YEAR_INFERRED] is True and e.ts_source is TsSource.LOCAL for e in events)


def test_december_lines_in_a_file_written_in_early_january_belong_to_the_year_before() -> None:
    text = _GLOG_NEW_YEAR.split("E0101")[0]  # the December line only
    ctx = ParseContext(path="train.log", source="file:train.log", year=2025, mtime_ns=_mtime(2025, 1, 2, 8, 0))
    events = _scan(text, ctx)
    assert [e.ts for e in events] == [_mtime(2024, 12, 31, 23, 59, 58) + 100_000_000]
    # Without the rollover/mtime logic the line would lie in December 2025, after the file was written.
    vllm = "ERROR 12-30 18:38:55 multiproc_worker_utils.py:226] Worker VllmWorkerProcess pid 77 died, exit code: -9\n"
    events = _scan(vllm, ctx)
    assert [(e.ts, e.attrs[YEAR_INFERRED]) for e in events] == [(_mtime(2024, 12, 30, 18, 38, 55), True)]


def test_dated_stamps_are_left_alone_beside_yearless_ones() -> None:
    text = ("[2025-12-31 23:59:59,000] [ERROR] [engine.py:100:step] CUDA error: an illegal memory access was "
            "encountered\n" + _GLOG_NEW_YEAR)
    ctx = ParseContext(path="mixed.log", source="file:mixed.log", year=2025, mtime_ns=_mtime(2025, 1, 1, 0, 5))
    events = _scan(text, ctx)
    assert events[0].ts == _mtime(2025, 12, 31, 23, 59, 59) and YEAR_INFERRED not in events[0].attrs
    assert events[1].ts == _mtime(2024, 12, 31, 23, 59, 58) + 100_000_000


def test_klog_stamps_of_the_device_plugin_are_year_inferred_and_roll_over() -> None:
    text = ("I1231 23:50:00.000000       1 main.go:317] Starting FS watcher.\n"
            "E1231 23:59:30.250000       1 health.go:159] XidCriticalError: Xid=79 on "
            "Device=GPU-1c9d7c35-0f9e-4c1e-8f5e-3a2b1c0d9e8f; marking device as unhealthy.\n"
            "E0101 00:00:10.000000       1 health.go:159] 'nvidia.com/gpu' device marked unhealthy: "
            "GPU-1c9d7c35-0f9e-4c1e-8f5e-3a2b1c0d9e8f\n"
            "2020/08/10 19:09:42 'nvidia.com/gpu' device marked unhealthy: GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8\n")
    ctx = ParseContext(path="plugin.log", source="file:plugin.log", year=2025, mtime_ns=_mtime(2025, 1, 1, 1, 0))
    doc = TextDocument.from_bytes(text.encode(), ctx.path)
    events = [r for r in K8S_PARSER.parse(doc, ctx) if isinstance(r, Event)]
    assert [(e.kind, e.ts, e.attrs.get(YEAR_INFERRED)) for e in events] == [
        ("xid", _mtime(2024, 12, 31, 23, 59, 30) + 250_000_000, True),
        ("log", _mtime(2025, 1, 1, 0, 0, 10), True),
        ("log", _mtime(2020, 8, 10, 19, 9, 42), None),  # Go log stamps carry their year
    ]
