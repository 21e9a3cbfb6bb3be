#!/usr/bin/env bash
# Record scenario 12 (drafter_freeze.py: drafters that freeze at their memory cap mid-run) on one GPU, in one call.
# Usage (from the repository root, on a GPU machine with torch and no network):
#   samples/scenarios/record_drafter_freeze.sh OUTDIR
# Lays this working tree out as an installed package (no build, no download), records the program under
# `forensics record` (NVML per-process memory and utilization), and writes beside the bundle the analysis in
# text and JSON, the NVML per-process readings' support, and the console output.
set -u
out=$(realpath -m "${1:?usage: record_drafter_freeze.sh OUTDIR}")
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
# The package laid out as pyproject's package-dir installs it (forensics/, its parsers and signatures), copied:
# nothing is built or downloaded. Pure-Python dependencies the machine may lack (nvidia-ml-py's pynvml,
# python-dateutil, argcomplete) come from build/devdeps when the caller carried it.
site=/tmp/gf-freeze-site
rm -rf "$site" && mkdir -p "$site"
cp -r "$repo/forensics" "$site/forensics" && cp -r "$repo/parsers" "$site/forensics/parsers" \
  && cp -r "$repo/signatures" "$site/forensics/signatures" || { echo "cannot lay out the package"; exit 2; }
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
[ -d "$repo/build/devdeps" ] && export PYTHONPATH="$PYTHONPATH:$repo/build/devdeps"
py=$(command -v python3)
"$py" -c "import forensics.record.session" 2>"$out/install.log" \
  || { echo "the recorder does not import: see $out/install.log"; tail -5 "$out/install.log"; exit 2; }
"$py" - >"$out/nvml-support.txt" 2>&1 <<'EOF'
try:
    import pynvml
except ImportError as exc:
    print(f"pynvml missing ({exc}): the bundle will have no NVML samples")
    raise SystemExit(0)
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
print("GPU:", pynvml.nvmlDeviceGetName(h), "driver", pynvml.nvmlSystemGetDriverVersion())
try:
    print("per-process utilization:", len(pynvml.nvmlDeviceGetProcessUtilization(h, 0)), "samples")
except pynvml.NVMLError as exc:
    print("per-process utilization:", exc)
EOF
cat "$out/nvml-support.txt"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
cd "$repo/samples/scenarios"
start=$(date +%s)
timeout 420 "$py" -m forensics record --out "$out/drafter-freeze" -- "$py" drafter_freeze.py \
  >"$out/console.log" 2>&1
echo "record: exit $? after $(( $(date +%s) - start )) s"
bundle=$(dirname "$(find "$out/drafter-freeze" -name manifest.json | head -1)")
[ -d "$bundle" ] || { echo "no bundle written"; tail -20 "$out/console.log"; exit 1; }
"$py" -m forensics analyze "$bundle" >"$out/analysis.txt" 2>&1  # (needs regex, pandas …: may fail there)
"$py" -m forensics analyze --format json "$bundle" >"$out/analysis.json" 2>/dev/null
head -8 "$out/analysis.txt"
grep -c '"pu"' "$bundle/nvml.jsonl" | sed 's/^/nvml lines with per-process utilization: /'
echo "bundle: $bundle"
