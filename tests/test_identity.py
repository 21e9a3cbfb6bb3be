"""forensics/timeline/identity.py: joining host × rank × GPU × pid from what each layer reveals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forensics.analysis import analyze
from forensics.events import Event, MetricSample, Origin, TsSource
from forensics.pci import find_pci, normalize_pci, pci_from_aer_id
from forensics.timeline.identity import Identity, IdentityTable, build_identity
from forensics.timeline.merge import build_timeline

T0 = 1_750_000_000_000_000_000


def ev(kind: str, *, host: str | None = "node1", gpu: str | None = None, rank: int | None = None,
       pid: int | None = None, message: str = "m", **attrs: Any) -> Event:
    return Event(ts=T0, ts_source=TsSource.EXACT, source="file:x", kind=kind, message=message,
                 origin=Origin("x", 1), host=host, gpu=gpu, rank=rank, pid=pid, attrs=attrs)


def nccl_init(rank: int, bus: str, pid: int, nranks: int = 8, host: str = "node1") -> Event:
    # the attrs parsers/producers/nccl_debug.py gives an "Init COMPLETE" line
    return ev("nccl", host=host, rank=rank, pid=pid, message=f"comm 0x1 rank {rank} nranks {nranks} - Init COMPLETE",
              nranks=nranks, cuda_dev=rank % 8, bus_id=bus, pid_attr=pid)


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [("PCI:0000:3b:00", "0000:3b:00.0"), ("0000:3b:00.0", "0000:3b:00.0"), ("00000000:3B:00.0", "0000:3b:00.0"),
     ("GPU0000:03:00.0", "0000:03:00.0"), ("3b:00.0", "0000:3b:00.0"), ("[06:00.0]", "0000:06:00.0"),
     ("busId b2000", "0000:b2:00.0"), ("b2000", "0000:b2:00.0"), ("0000:b2:00.0", "0000:b2:00.0"),
     ("PCI:0001:6c:00", "0001:6c:00.0"), ("PCI:0018:01:00", "0018:01:00.0"), (0xB2000, "0000:b2:00.0"),
     ("0000:3b:20.0", None), ("nonsense", None), ("", None), (None, None), (-1, None)],
)
def test_normalize_pci_spellings(spelling: str | int | None, expected: str | None) -> None:
    assert normalize_pci(spelling) == expected


def test_find_pci_in_text() -> None:
    assert find_pci("NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375") == "0000:00:05.0"
    assert find_pci("NVRM: The NVIDIA GPU 0000:b3:00.0 (PCI ID: 10de:26b5)") == "0000:b3:00.0"
    assert find_pci("Request device [06:00.0] fault") == "0000:06:00.0"
    assert find_pci("at 12:02:03,470068 10de:26b5 00:1b:21:3a:4f:5e") is None
    assert pci_from_aer_id("00e8") == "0000:00:1d.0" and pci_from_aer_id("zz") is None


def test_xid_on_a_pci_address_gets_the_rank_that_nccl_put_there() -> None:
    events = [nccl_init(6, "b2000", 4406), nccl_init(7, "b3000", 4407),
              ev("xid", gpu="0000:b2:00.0", pid=4406, xid=79, pci="0000:b2:00.0")]
    table = build_identity(events)
    row = table.find("node1", pci="PCI:0000:b2:00")
    assert row is not None and (row.rank, row.pci, 4406 in row.pids) == (6, "0000:b2:00.0", True)
    filled = table.fill(events[2])
    assert (filled.rank, filled.gpu) == (6, "0000:b2:00.0")


def test_oom_killed_pid_gets_rank_and_gpu() -> None:
    events = [nccl_init(3, "3b000", 5003), ev("oom-killer", pid=5003, process="python")]
    table = build_identity(events)
    filled = table.fill(events[1])
    assert (filled.rank, filled.gpu) == (3, "0000:3b:00.0")


def test_torchrun_local_rank_and_pid_join_nvidia_smi_process_rows() -> None:
    events = [
        ev("torchrun", pid=900, local_rank=2, rank=10),
        ev("nvidia-smi", gpu="00000000:3D:00.0", pid=900, process="python"),
        ev("gpu-info", gpu="00000000:3D:00.0", index=2, uuid="GPU-4a28de72-2645-de9a-eb35-a394cef3f4da"),
    ]
    table = build_identity(events)
    assert len(table) == 1
    row = next(iter(table))
    assert row == Identity("node1", rank=10, local_rank=2, gpu_index=2,
                           uuid="GPU-4a28de72-2645-de9a-eb35-a394cef3f4da", pci="0000:3d:00.0", pids=frozenset({900}))
    assert table.find(uuid="GPU-4a28de72-2645-de9a-eb35-a394cef3f4da") is row
    assert table.find("node1", gpu_index=2) is row and table.find(rank=10) is row


def test_sub_communicator_ranks_are_not_global_ranks() -> None:
    events = [nccl_init(5, "b2000", 4405, nranks=16), nccl_init(1, "b2000", 4405, nranks=4),
              ev("xid", gpu="0000:b2:00.0", xid=13, pci="0000:b2:00.0")]
    table = build_identity(events)
    assert table.fill(events[2]).rank == 5
    assert table.find(rank=1) is None


def test_conflicting_facts_stay_apart() -> None:
    # pid 77 is reused by a later job on another GPU: it must not merge two GPUs into one row
    events = [ev("nvidia-smi", gpu="0000:01:00.0", pid=77), ev("nvidia-smi", gpu="0000:02:00.0", pid=77),
              nccl_init(0, "1000", 77)]
    table = build_identity(events)
    pcis = sorted(r.pci for r in table if r.pci)
    assert pcis == ["0000:01:00.0", "0000:02:00.0"]
    assert all(r.pci is not None for r in table)


def test_hostless_events_join_the_only_named_host() -> None:
    events = [nccl_init(2, "1b000", 300), ev("xid", host=None, gpu="0000:1b:00.0", pid=300, pci="0000:1b:00.0")]
    table = build_identity(events)
    assert len(table) == 1 and table.fill(events[1]).rank == 2


def test_same_pci_on_two_hosts_are_two_gpus() -> None:
    events = [nccl_init(0, "1b000", 10, nranks=16, host="a"), nccl_init(8, "1b000", 10, nranks=16, host="b"),
              ev("xid", host="b", gpu="0000:1b:00.0", pci="0000:1b:00.0")]
    table = build_identity(events)
    assert table.fill(events[2]).rank == 8
    assert table.find("a", pci="0000:1b:00.0").rank == 0  # type: ignore[union-attr]


def test_nvml_samples_name_gpus_by_index_or_bus_id() -> None:
    samples = [MetricSample(ts=T0, ts_source=TsSource.EXACT, gpu="0000:3b:00.0", values={}, origin=Origin("n", 1),
                            host="node1")]
    table = build_identity([ev("gpu-info", gpu="0000:3b:00.0", index=0)], samples)
    assert table.find("node1", gpu_index=0).pci == "0000:3b:00.0"  # type: ignore[union-attr]


def test_events_with_nothing_to_join_are_left_alone() -> None:
    table = build_identity([ev("kernel"), ev("xid", gpu="0000:01:00.0", pci="0000:01:00.0")])
    e = ev("oom-killer", pid=1)
    assert table.fill(e) is e
    assert IdentityTable().find(pci="0000:01:00.0") is None


def test_timeline_fills_rank_on_kernel_events() -> None:
    xid = ev("xid", host=None, gpu="0000:b2:00.0", pid=4406, xid=79, pci="0000:b2:00.0")
    tl = build_timeline([([nccl_init(6, "b2000", 4406)], []), ([xid], [])])
    placed = next(e for e in tl.events if e.kind == "xid")
    assert placed.rank == 6
    assert tl.identity.find(rank=6) is not None


def test_a_root_port_is_not_a_gpu() -> None:
    # Shape of the kernel's AER report from a root port (corpus popos3363): the port's address is no GPU.
    aer = ev("aer", message="pcieport 0000:b7:01.0: AER: Corrected error received: 0000:b7:01.0",
             pci="0000:b7:01.0", driver="pcieport", source_pci="0000:b7:01.0", severity="corrected")
    sxid = ev("nvrm", message="nvidia-nvswitch2: SXid (PCI:0000:07:00.0): 12028", sxid=12028, pci="0000:07:00.0")
    iommu = ev("iommu", message="DMAR: [DMA Read] Request device [5e:00.0] fault", pci="0000:5e:00.0")
    table = build_identity([aer, sxid, iommu])
    assert len(table) == 0
    assert table.fill(aer).gpu is None
    tl = build_timeline([([aer, sxid, iommu], [])])
    assert [e.gpu for e in tl.events] == [None, None, None]


def test_aer_names_the_gpu_behind_the_port_when_the_logs_know_it() -> None:
    xid = ev("xid", gpu="0000:b8:00.0", xid=79, pci="0000:b8:00.0")
    behind = ev("aer", message="pcieport 0000:b7:01.0: AER: Uncorrected (Fatal) error received: 0000:b8:00.0",
                pci="0000:b7:01.0", driver="pcieport", source_pci="0000:b8:00.0", severity="fatal")
    port_only = ev("aer", message="pcieport 0000:b7:01.0: AER: Corrected error received: 0000:b7:01.0",
                   pci="0000:b7:01.0", driver="pcieport", source_pci="0000:b7:01.0", severity="corrected")
    other_port = ev("aer", message="pcieport 0000:17:01.0: AER: Corrected error received: 0000:18:00.0",
                    pci="0000:17:01.0", driver="pcieport", source_pci="0000:18:00.0", severity="corrected")
    table = build_identity([xid, behind, port_only, other_port])
    assert [r.pci for r in table] == ["0000:b8:00.0"]
    assert [table.fill(e).gpu for e in (behind, port_only, other_port)] == ["0000:b8:00.0", None, None]


def test_kernel_log_aer_and_xid_end_to_end(tmp_path: Path) -> None:
    log = tmp_path / "dmesg.txt"
    log.write_text(
        "[ 9000.100000] pcieport 0000:b7:01.0: AER: Corrected error received: 0000:b7:01.0\n"
        "[ 9000.100010] pcieport 0000:b7:01.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, "
        "(Receiver ID)\n"
        "[ 9001.200000] pcieport 0000:b7:01.0: AER: Uncorrected (Fatal) error received: 0000:b8:00.0\n"
        "[ 9001.300000] NVRM: Xid (PCI:0000:b8:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    )
    analysis = analyze([str(log)])
    got = [(e.kind, e.gpu) for e in analysis.timeline.events if e.kind in ("aer", "xid")]
    assert got == [("aer", None), ("aer", None), ("aer", "0000:b8:00.0"), ("xid", "0000:b8:00.0")]
    assert [r.pci for r in analysis.timeline.identity] == ["0000:b8:00.0"]


# -- the join: the same rows as the sequential reference, in bounded work -------------------------

def _reference_rows(events: list[Event], metrics: list[MetricSample] = ()) -> list[Identity]:  # type: ignore[assignment]
    """The join as it was written first (every fact against every row so far, in row order): the
    oracle the indexed join must agree with."""
    import forensics.timeline.identity as identity
    from forensics.timeline.identity_join import Group, Joiner

    class Probe(Joiner):
        def add(self, fact: Group) -> None:
            merged, rest = fact, []
            for g in self.groups:
                if set(merged.keys()) & set(g.keys()) and merged.compatible(g):
                    merged.absorb(g)
                else:
                    rest.append(g)
            self.groups = [*rest, merged]

        def rows(self) -> list[Group]:
            return self.groups

    probe = Probe()
    probe.groups = []  # type: ignore[attr-defined]
    identity.Joiner = lambda: probe  # type: ignore[assignment,misc]
    try:
        return list(build_identity(events, metrics))
    finally:
        identity.Joiner = Joiner  # type: ignore[misc]


def _count_checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from forensics.timeline.identity_join import Group

    calls = [0]
    compatible = Group.compatible

    def counted(self: Group, other: Group) -> bool:
        calls[0] += 1
        return compatible(self, other)

    monkeypatch.setattr(Group, "compatible", counted)
    return calls


@pytest.mark.slow
def test_a_new_uuid_on_every_line_costs_no_pass_over_the_earlier_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel shape that once took minutes: ~20k distinct (PCI address, UUID) facts on 4 GPUs, and
    ~20k distinct pids on one GPU. Each fact is checked against a bounded number of rows."""
    buses = ["0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:5d:00.0"]
    uuid_events = [ev("nvrm", gpu=buses[i % 4], uuid=f"GPU-{i:08x}-2b7a-9c44-0d51-{i:012x}") for i in range(20_000)]
    pid_events = [ev("xid", gpu=buses[0], pid=10_000 + i, xid=13, pci=buses[0]) for i in range(20_000)]
    calls = _count_checks(monkeypatch)
    table = build_identity(uuid_events + pid_events)
    assert calls[0] <= 3 * 40_000  # (the sequential join: ~10^8 checks)
    assert len(table) == 20_000  # one row per UUID; each pid joined one row of bus 0, in row order
    assert {r.pci for r in table} == set(buses)
    pids = [p for r in table for p in r.pids]
    assert len(pids) == 20_000 and set(pids) == set(range(10_000, 30_000))
    assert all(r.pci == buses[0] for r in table if r.pids)
    calls[0] = 0
    one_gpu = build_identity(pid_events)  # every pid joins the one row of bus 0
    assert len(one_gpu) == 1 and len(next(iter(one_gpu)).pids) == 20_000 and calls[0] <= 20_000


@pytest.mark.slow
def test_real_samples_join_as_the_reference_does() -> None:
    """The rows of the samples' events (recorded bundles, a kernel log, multi-rank NCCL) equal the
    sequential join's, row for row."""
    root = Path(__file__).resolve().parents[1]
    cases = [root / "samples" / "recorded" / name for name in ("silent-stall-2gpu", "collective-desync-2gpu",
                                                                 "oom-first-backward")]
    cases += sorted((root / "tests" / "corpus" / "cases").glob("*xid*"))[:6]
    compared = 0
    for case in cases:
        timeline = analyze([str(case)]).timeline
        assert list(build_identity(timeline.events, timeline.metrics)) == _reference_rows(timeline.events,
                                                                                          timeline.metrics)
        compared += len(timeline.identity)
    assert compared >= 5


HOSTS = st.sampled_from([None, "a", "b"])
SMALL = st.one_of(st.none(), st.integers(0, 3))


@st.composite
def id_events(draw: st.DrawFn) -> Event:
    kind = draw(st.sampled_from(["nccl", "xid", "nvidia-smi", "oom", "torchrun", "nvrm"]))
    attrs: dict[str, Any] = {}
    for name, values in (("uuid", st.sampled_from(["GPU-a", "GPU-b", "GPU-c"])), ("local_rank", st.integers(0, 2)),
                         ("index", st.integers(0, 2)), ("nranks", st.sampled_from([2, 4])),
                         ("pci", st.sampled_from(["0000:3b:00.0", "0000:5d:00.0"]))):
        if draw(st.booleans()):
            attrs[name] = draw(values)
    return ev(kind, host=draw(HOSTS), gpu=draw(st.one_of(st.none(), st.sampled_from(["0", "1", "0000:3b:00.0"]))),
              rank=draw(SMALL), pid=draw(st.one_of(st.none(), st.integers(100, 103))), **attrs)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(id_events(), max_size=100))
@pytest.mark.slow
def test_indexed_join_equals_the_sequential_one(events: list[Event]) -> None:
    assert list(build_identity(events)) == _reference_rows(events)
