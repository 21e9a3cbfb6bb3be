"""NCCL_DEBUG lines: shapes, notable INFO, return-code chains, bus ids, nccl-tests."""

from __future__ import annotations

from forensics.parsers.producers.nccl_debug import bus_id_to_pci, chain_code, parse_nccl_line, parse_nccl_tests


def test_warn_and_info_lines() -> None:
    w = parse_nccl_line("ng30903:3063028:3066152 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'")
    assert w is not None and w.level == "WARN" and w.notable and w.cuda_dev == 3 and w.source == "include/alloc.h:178"
    i = parse_nccl_line("n136:15496:15968 [0] NCCL INFO comm 0x555b51b3e2d0 rank 0 nranks 1 cudaDev 0 busId c9000 "
                        "- Init COMPLETE")
    assert i is not None and i.notable
    assert (i.attrs["rank"], i.attrs["nranks"], i.attrs["pci"]) == (0, 1, "0000:c9:00.0")
    chatter = parse_nccl_line("h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC")
    assert chatter is not None and not chatter.notable
    env = parse_nccl_line("h:1:2 [0] NCCL INFO NCCL_IB_TIMEOUT set by environment to 18.")
    assert env is not None and env.attrs["env"] == "NCCL_IB_TIMEOUT" and env.attrs["value"] == "18"
    assert parse_nccl_line("not an nccl line") is None


def test_chain_codes() -> None:
    rec = parse_nccl_line("h:1:2 [0] NCCL INFO group.cc:65 -> 3 [Async thread]")
    assert rec is not None and chain_code(rec) == 3
    other = parse_nccl_line("h:1:2 [0] NCCL INFO Connected all rings")
    assert other is not None and chain_code(other) is None


def test_bus_ids() -> None:
    assert bus_id_to_pci("c9000") == "0000:c9:00.0"
    assert bus_id_to_pci("0000:3b:00.0") == "0000:3b:00.0"
    assert bus_id_to_pci("1a000") == "0000:1a:00.0"
    assert bus_id_to_pci("zz") is None


def test_nccl_tests_lines() -> None:
    head = parse_nccl_tests("# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5")
    assert head is not None and head[1]["ngpus"] == 1 and not head[2]
    fail = parse_nccl_tests("host: Test CUDA failure common.cu:297 'an illegal memory access was encountered'")
    assert fail is not None and fail[2] and fail[1]["error"] == "an illegal memory access was encountered"
