"""The pinned NVIDIA Xid catalogue (forensics/match/xid_catalog.toml) and Xid incidents."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from forensics.analysis import analyze, to_json_dict
from forensics.match.xid_catalog import catalog, catalog_version, describe, lookup
from forensics.text_report import render_text

ROOT = Path(__file__).parent.parent
TABLE = ROOT / "forensics" / "match" / "xid_catalog.toml"
#: Every Xid the project's driver notes name (the knowledge catalogue the signatures were written from,
#: kept outside the repository; its Xid numbers copied here on 2026-12-04 so the check runs everywhere).
KNOWLEDGE_XIDS = (8, 13, 31, 32, 38, 43, 44, 45, 46, 48, 54, 56, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109,
                  119, 120, 121, 136, 137, 140, 143, 144, 145, 146, 147, 148, 149, 150, 154, 171, 172)
BUCKETS = {"RESTART_APP", "RESET_GPU", "RESTART_BM", "RESTART_VM", "CONTACT_SUPPORT", "IGNORE", "CHECK_MECHANICALS",
           "CHECK_UVM", "UPDATE_SWFW", "XID_154", "WORKFLOW_XID_45", "WORKFLOW_XID_48", "WORKFLOW_NVLINK_ERR",
           "WORKFLOW_NVLINK5_ERR", ""}


def _numbers(text: str) -> set[int]:
    """Xid numbers a text names: ``Xid 48``, ``Xid 48, 94, 95``, ``Xid 74, 144-150``."""
    out: set[int] = set()
    for m in re.finditer(r"\bXids?\s*(?:=|:)?\s*((?:\d{1,3}(?:\s*[-–]\s*\d{1,3})?(?:\s*(?:,|/|and)\s*)?)+)", text):
        for part in re.finditer(r"(\d{1,3})(?:\s*[-–]\s*(\d{1,3}))?", m.group(1)):
            lo, hi = int(part.group(1)), int(part.group(2) or part.group(1))
            if 0 < lo <= hi < 400:
                out.update(range(lo, hi + 1))
    return out


def test_header_matches_table() -> None:
    data = tomllib.loads(TABLE.read_text(encoding="utf-8"))
    codes = [x["code"] for x in data["xid"]]
    assert data["count"] == len(codes) == 172
    assert data["version"] == "2025-10" and data["source"].startswith("https://docs.nvidia.com/deploy/xid-errors/")
    assert codes == sorted(set(codes)) == list(range(1, 173))
    assert {x["immediate"] for x in data["xid"]} <= BUCKETS
    assert catalog_version() == "NVIDIA Xid catalog 2025-10, 172 codes"
    assert len(catalog()) == 172


def test_known_entries() -> None:
    x79 = lookup(79)
    assert x79 is not None and x79.mnemonic == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"
    assert x79.immediate == "RESTART_BM"
    assert lookup(48) and lookup(48).immediate == "WORKFLOW_XID_48"  # type: ignore[union-attr]
    assert lookup(119) and lookup(119).immediate == "RESET_GPU"  # type: ignore[union-attr]
    assert lookup(13) and lookup(13).immediate == "RESTART_APP"  # type: ignore[union-attr]
    assert lookup(500) is None
    assert "not in NVIDIA's Xid catalog 2025-10" in describe(500)


def test_every_xid_the_signatures_name_is_in_the_table() -> None:
    named: set[int] = set()
    for path in (ROOT / "signatures").glob("*.toml"):
        sig = tomllib.loads(path.read_text(encoding="utf-8"))
        m = re.match(r"xid-(\d+)-", sig["id"])
        if m:
            named.add(int(m.group(1)))
        named |= _numbers(sig["title"])
        for ev in sig.get("evidence", []):
            skip = re.search(r"\(\?!\(\?:([\d|]+)\)", ev.get("regex", ""))  # xid-other's list of covered Xids
            if skip:
                named |= {int(n) for n in skip.group(1).split("|")}
    assert {8, 13, 43, 45, 62, 79, 92, 154} <= named
    missing = sorted(n for n in named if lookup(n) is None)
    assert missing == []


def test_every_xid_the_knowledge_catalogue_names_is_in_the_table() -> None:
    assert sorted(n for n in KNOWLEDGE_XIDS if lookup(n) is None) == []


def _dmesg(tmp_path: Path, lines: list[str]) -> Path:
    p = tmp_path / "dmesg.txt"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_xid_burst_is_one_incident(tmp_path: Path) -> None:
    """Xid 79 then 154 and two 45s within seconds on one GPU: one incident, primary 79; an Xid 13 ten
    minutes later on the same GPU is a second incident (grouped until 3 min of silence)."""
    stamp = "2024-11-15T12:{:02d}:{:02d},000000+00:00"
    p = _dmesg(tmp_path, [
        f"{stamp.format(2, 3)} NVRM: Xid (PCI:0000:19:00): 79, pid=1818990, name=python3, GPU has fallen off the bus.",
        f"{stamp.format(2, 4)} NVRM: Xid (PCI:0000:19:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 "
        "(Node Reboot Required)",
        f"{stamp.format(2, 5)} NVRM: Xid (PCI:0000:19:00): 45, pid=1818990, name=python3, Ch 00000001",
        f"{stamp.format(2, 5)} NVRM: Xid (PCI:0000:19:00): 45, pid=1818990, name=python3, Ch 00000002",
        f"{stamp.format(12, 5)} NVRM: Xid (PCI:0000:19:00): 13, pid=22, name=python3, Graphics SM Warp Exception",
    ])
    a = analyze([str(p)])
    inc = a.verdict.xid_incidents
    assert [i.primary for i in inc] == [79, 13]
    first = inc[0]
    assert first.consequences == {45: 2, 154: 1} and first.count == 4
    assert first.bucket == "RESTART_BM" and first.disrupts_job
    assert first.primary_meaning == "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: GPU has fallen off the bus"
    assert a.verdict.xid_catalog == "NVIDIA Xid catalog 2025-10, 172 codes"
    text = " ".join(render_text(a).split())
    assert "Xid incidents (NVIDIA Xid catalog 2025-10, 172 codes):" in text
    assert "primary Xid 79" in text and "then 45×2, 154" in text
    d = to_json_dict(a)["verdict"]
    assert d["xid_incidents"][0]["primary"] == 79 and d["xid_incidents"][0]["consequences"] == {"45": 2, "154": 1}
    assert "Xid 79 in NVIDIA's Xid catalog 2025-10: ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS" in d["summary"]


def test_caused_by_names_the_primary(tmp_path: Path) -> None:
    p = _dmesg(tmp_path, [
        "2024-11-15T12:02:03,000000+00:00 NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, "
        "Ch 00000001 caused by previous Xid 149",
    ])
    inc = analyze([str(p)]).verdict.xid_incidents
    assert [i.primary for i in inc] == [149] and inc[0].consequences == {45: 1}


def test_benign_xid_alone_does_not_disrupt(tmp_path: Path) -> None:
    p = _dmesg(tmp_path, ["2024-11-15T12:02:03,000000+00:00 NVRM: Xid (PCI:0000:10:1c): 63, pid='<unknown>', "
                          "name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate."])
    inc = analyze([str(p)]).verdict.xid_incidents
    assert len(inc) == 1 and inc[0].primary == 63 and not inc[0].disrupts_job


def test_xid_other_says_which_xid_and_its_bucket() -> None:
    a = analyze([str(ROOT / "tests" / "corpus" / "cases" / "k8sdp189-xid69-device-plugin")])
    assert a.verdict.root_cause_id == "xid-other"
    assert ("Xid 69 in NVIDIA's Xid catalog 2025-10: ROBUST_CHANNEL_GR_CLASS_ERROR, \"Graphics Engine class error\"; "
            "resolution bucket RESTART_APP (restart the application)") in a.verdict.summary
