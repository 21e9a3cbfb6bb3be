"""``pack --anonymize``: every kind of name gets one pseudonym, the same everywhere; public hosts and
loopback stay."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from forensics.postmortem.anonymize import Anonymizer, known_names


def test_each_kind_gets_a_consistent_pseudonym() -> None:
    anon = Anonymizer({"gpu-node-07"}, {"alice"})
    counts: Counter[str] = Counter()
    text = ("alice@corp.example.org ssh alice@gpu-node-07 from 10.1.2.3 and fe80::1ff:fe23:4567:890a%eth0; "
            "link 3c:ec:ef:12:34:56 up; git clone https://git.corp.internal/team/r.git; "
            "docs https://pytorch.org/docs; owner alice; keep 127.0.0.1 ::1 12:34:56 0000:3b:00.0\n")
    out = anon.apply(text, counts)
    for gone in ("alice", "gpu-node-07", "10.1.2.3", "fe80::1ff", "3c:ec:ef", "git.corp.internal", "corp.example"):
        assert gone not in out, gone
    assert "https://pytorch.org/docs" in out and "127.0.0.1" in out and " ::1 " in out
    assert "12:34:56" in out and "0000:3b:00.0" in out  # a time and a PCI address are no MAC or IPv6
    assert "owner user1;" in out and "host-01" in out and "192.0.2.1" in out and "2001:db8::1" in out
    assert "02:00:00:00:00:01" in out and "https://host-01.example/team/r.git" in out
    again = anon.apply("10.1.2.3 alice gpu-node-07", Counter())
    assert again == "192.0.2.1 user1 host-01"
    assert counts["e-mail"] >= 1 and counts["mac-address"] == 1 and counts["user-name"] >= 1


def test_names_are_learned_from_the_kernel_log_and_home_paths(tmp_path: Path) -> None:
    kmsg = tmp_path / "journal.jsonl"
    kmsg.write_text('{"_HOSTNAME": "dgx-b200-03", "MESSAGE": "NVRM: Xid 79"}\n')
    syslog = tmp_path / "syslog"
    syslog.write_text("Dec  4 10:00:01 worker-9 kernel: NVRM: Xid 48\n")
    log = tmp_path / "train.log"
    log.write_text("loading /home/bob/ckpt/model.pt\n")
    hosts, users = known_names([("b/journal.jsonl", kmsg.read_bytes()), ("logs/syslog", syslog.read_bytes()),
                                 ("logs/train.log", log.read_bytes())])
    assert {"dgx-b200-03", "worker-9"} <= hosts and users == {"bob"}
