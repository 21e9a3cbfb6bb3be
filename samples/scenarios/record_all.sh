#!/usr/bin/env bash
# Record scenario programs under `forensics record`, one bundle each.
# Usage: record_all.sh OUTDIR SCENARIO...   (SCENARIO = a program name here without .py)
# Run on a GPU machine with torch (and peft/transformers for meta_offload_lora).
set -u
out=$(realpath -m "$1"); shift
# NVLink multicast stays off (shared machines): NCCL, PyTorch symmetric memory and NVSHMEM.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
cd "$(dirname "$0")"
for s in "$@"; do
  case $s in
    worker_killed|silent_stall|collective_desync) cmd=(torchrun --standalone --nproc-per-node 2 "$s.py") ;;
    *) cmd=(python3 "$s.py") ;;
  esac
  mkdir -p "$out/$s"
  start=$(date +%s)
  timeout 300 forensics record --out "$out/$s" -- "${cmd[@]}" >"$out/$s.console" 2>&1
  echo "$s: exit $? after $(( $(date +%s) - start )) s"
done
