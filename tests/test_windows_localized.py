"""Windows Event Viewer exports from non-English systems: localized field labels and level names,
localized dates, an Event Xml part cut before its end (its System fields and named EventData are
language-neutral), Kernel-Power 41's decimal BugcheckCode."""

from __future__ import annotations

from pathlib import Path

from forensics.parsers.common.windows_events import level_from_name, parse_local_datetime

from forensics.analysis import Options, analyze, parse_input
from forensics.events import Event, TsSource
from forensics.ingest.sources import InputFile

DATA = Path(__file__).parent / "data" / "health"
ZH = DATA / "nvitop136-zh-kernel-power-41.txt"


def _events(text: str) -> tuple[str, list[Event]]:
    report, events, _m = parse_input(InputFile("export.txt", text.encode("utf-8"), mtime=1.7e9), Options())
    return report.kind, events


def test_chinese_details_export_with_cut_xml() -> None:
    kind, events = _events(ZH.read_text(encoding="utf-8"))
    assert kind == "windows-event-text"
    (ev,) = events
    assert ev.attrs["provider"] == "Microsoft-Windows-Kernel-Power" and ev.attrs["event_id"] == 41
    assert ev.attrs["level"] == 1 and ev.host == "WIN-3I9RKHAQAH5"
    assert ev.attrs["named_data"]["BugcheckCode"] == "80" and ev.attrs["bugcheck_code"] == "0x50"
    assert ev.attrs["task"] == "(63)" and ev.attrs["xml_cut"] is True
    # the cut XML's SystemTime (UTC) wins over the local "日期:" line
    assert ev.ts_source is TsSource.EXACT and ev.ts == 1729667928004079000
    assert "[BugcheckCode 80 = 0x50]" in ev.message
    report, _events2, _m = parse_input(InputFile("export.txt", ZH.read_bytes(), mtime=1.7e9), Options())
    assert report.warnings == []  # the cut XML is salvaged, not reported as skipped


def test_chinese_kernel_power_41_verdict_follows_the_bugcheck_code(tmp_path: Path) -> None:
    # bugcheck 0x50 is not a GPU-driver stop code: a blue screen, said with low confidence and its code
    v = analyze([str(ZH)], Options()).verdict
    assert v.root_cause is not None and v.root_cause_id == "windows-bugcheck" and v.confidence == "low"
    assert "does not name the GPU driver" in v.root_cause.title and "Stop code 0x50" in v.summary
    # Shape: the same export with BugcheckCode 278 (0x116 VIDEO_TDR_FAILURE)
    p = tmp_path / "zh-116.txt"
    p.write_text(ZH.read_text(encoding="utf-8").replace('"BugcheckCode">80<', '"BugcheckCode">278<'),
                 encoding="utf-8")
    v = analyze([str(p)], Options()).verdict
    assert v.root_cause is not None and v.root_cause_id == "windows-bugcheck" and v.confidence != "low"
    assert "GPU driver fault" in v.root_cause.title and "Stop code 0x116" in v.summary


def test_localized_level_names() -> None:
    for name, level in (("错误", 2), ("錯誤", 2), ("エラー", 2), ("Ошибка", 2), ("Fehler", 2), ("Erreur", 2),
                        ("关键", 1), ("Критический", 1), ("警告", 3), ("Предупреждение", 3), ("信息", 4),
                        ("情報", 4), ("Сведения", 4)):
        assert level_from_name(name) == level, name


def test_localized_dates() -> None:
    assert str(parse_local_datetime("2024/10/23 下午 3:18:48", "ymd")) == "2024-10-23 15:18:48"
    assert str(parse_local_datetime("2024/10/23 午前 9:05:00", "ymd")) == "2024-10-23 09:05:00"
    assert str(parse_local_datetime("23.10.2024 15:18:48", "dmy")) == "2024-10-23 15:18:48"


def test_localized_csv_headers() -> None:
    # Shape: Event Viewer "Save All Events As… CSV" on a Chinese and a Russian system (header cells
    # as those UI languages label the columns); texts from the nvlddmkm 153 corpus case.
    zh = ("\ufeff级别,日期和时间,来源,事件 ID,任务类别\n"
          "错误,2024/11/14 10:11:12,nvlddmkm,153,无,\"\\Device\\Video3\nError occurred on GPUID: 100\"\n")
    kind, events = _events(zh)
    assert kind == "windows-event-csv"
    (ev,) = events
    assert ev.attrs["provider"] == "nvlddmkm" and ev.attrs["event_id"] == 153 and ev.attrs["level"] == 2
    ru = ("Уровень,Дата и время,Источник,Код события,Категория задачи\n"
          "Ошибка,14.11.2024 10:11:12,nvlddmkm,153,Отсутствует,Error occurred on GPUID: 100\n")
    kind, events = _events(ru)
    assert kind == "windows-event-csv"
    assert events[0].attrs["level"] == 2 and events[0].attrs["event_id"] == 153


def test_localized_details_labels() -> None:
    # Shape: "Copy details as text" with Japanese and Russian labels (no Event Xml part).
    ja = ("ログの名前:     System\nソース:        nvlddmkm\n日付:          2024/11/14 10:11:12\n"
          "イベント ID:    153\nタスクのカテゴリ: なし\nレベル:        エラー\nコンピューター: WS01\n説明:\n"
          "\\Device\\Video3\nError occurred on GPUID: 100\n")
    kind, events = _events(ja)
    assert kind == "windows-event-text"
    assert (events[0].attrs["provider"], events[0].attrs["event_id"], events[0].attrs["level"]) == ("nvlddmkm", 153, 2)
    ru = ("Имя журнала:   System\nИсточник:      nvlddmkm\nДата:          14.11.2024 10:11:12\n"
          "Код события:   153\nУровень:       Ошибка\nКомпьютер:     WS01\nОписание:\nError occurred on GPUID: 100\n")
    kind, events = _events(ru)
    assert kind == "windows-event-text"
    assert (events[0].attrs["provider"], events[0].attrs["event_id"], events[0].attrs["level"]) == ("nvlddmkm", 153, 2)
    assert events[0].host == "WS01"


def test_an_html_escaped_event_xml_cut_before_its_end_is_read() -> None:
    # Posted HTML-escaped and cut inside EventData: unescaped in place, salvaged from its System fields.
    path = Path(__file__).parent / "data" / "health" / "wdd1499-kernel-power-41-escaped.xml"
    report, events, _ = parse_input(InputFile(path.name, path.read_bytes(), mtime=1.7e9), Options())
    assert report.kind == "windows-event-xml" and not report.warnings
    (ev,) = events
    assert (ev.attrs["provider"], ev.attrs["event_id"], ev.attrs["bugcheck_code"]) == (
        "Microsoft-Windows-Kernel-Power", 41, "0x1a")
    assert ev.attrs["xml_cut"] is True and ev.origin.line == 1 and ev.host == "ZenMachine"
    verdict = analyze([str(path)], Options()).verdict
    # 0x1A is a memory-management stop, not the GPU stack's: a blue screen, not a GPU driver fault
    assert verdict.root_cause is not None and verdict.root_cause.signature == "windows-bugcheck"
    assert verdict.confidence == "low" and "Stop code 0x1A" in verdict.summary
