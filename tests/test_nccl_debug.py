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


def test_the_gpu_a_worker_runs_on_by_its_nvml_number() -> None:
    """``Setting affinity for GPU 3`` (NCCL 2.8, realcases2 nccl606: CUDA_VISIBLE_DEVICES=2,3, so cudaDev is 1)
    and ``nvmlDev 1`` in an Init COMPLETE line (NCCL 2.25, nccl#1706) name the GPU as nvidia-smi numbers it."""
    rec = parse_nccl_line("nccl-tests:225:240 [1] NCCL INFO Setting affinity for GPU 3 to ffffffff,ffffffff")
    assert rec is not None and rec.notable and rec.attrs["nvml_dev"] == 3 and rec.cuda_dev == 1
    rec = parse_nccl_line("deepseek:2081594:2081601 [1] NCCL INFO ncclCommInitAll comm 0x55f68495f4f0 rank 1 nranks 2 "
                          "cudaDev 1 nvmlDev 1 busId 34000 commId 0x76b3b6be637caf1c - Init COMPLETE")
    assert rec is not None and rec.attrs["nvml_dev"] == 1 and rec.attrs["pci"] == "0000:34:00.0"
