#!/usr/bin/env bash
# Record scenario 12 (drafter_freeze.py: drafters that freeze at their memory cap mid-run) on one GPU, in one call.
# Usage (from the repository root, on a GPU machine with torch and no network):
#   samples/scenarios/record_drafter_freeze.sh OUTDIR
# Installs this working tree into a venv that sees the system's torch (no download), records the program under
# `forensics record` (NVML per-process memory and utilization), and writes beside the bundle the analysis in
# text and JSON, the NVML per-process readings' support, and the console output.
set -u
out=$(realpath -m "${1:?usage: record_drafter_freeze.sh OUTDIR}")
repo=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
# Pure-Python dependencies the machine may lack (nvidia-ml-py's pynvml, python-dateutil, argcomplete), when the
# caller carried them: build/devdeps (samples/scenarios/README or the report says how it is made).
[ -d "$repo/build/devdeps" ] && export PYTHONPATH="$repo/build/devdeps${PYTHONPATH:+:$PYTHONPATH}"
env=/tmp/gf-freeze-venv
if [ ! -x "$env/bin/forensics" ]; then
  python3 -m venv --system-site-packages "$env" >"$out/install.log" 2>&1
  "$env/bin/pip" install -q --no-deps --no-build-isolation --no-index -e "$repo" >>"$out/install.log" 2>&1 \
    || "$env/bin/pip" install -q --no-deps --no-build-isolation --no-index "$repo" >>"$out/install.log" 2>&1 \
    || { echo "install failed: see $out/install.log"; tail -5 "$out/install.log"; exit 2; }
fi
"$env/bin/python" -c "import forensics.record.session" 2>>"$out/install.log" \
  || { echo "the recorder does not import: see $out/install.log"; tail -5 "$out/install.log"; exit 2; }
"$env/bin/python" - >"$out/nvml-support.txt" 2>&1 <<'EOF'
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
timeout 420 "$env/bin/forensics" record --out "$out/drafter-freeze" -- "$env/bin/python" drafter_freeze.py \
  >"$out/console.log" 2>&1
echo "record: exit $? after $(( $(date +%s) - start )) s"
bundle=$(dirname "$(find "$out/drafter-freeze" -name manifest.json | head -1)")
[ -d "$bundle" ] || { echo "no bundle written"; tail -20 "$out/console.log"; exit 1; }
"$env/bin/forensics" analyze "$bundle" >"$out/analysis.txt" 2>&1
"$env/bin/forensics" analyze --format json "$bundle" >"$out/analysis.json" 2>/dev/null
head -8 "$out/analysis.txt"
grep -c '"pu"' "$bundle/nvml.jsonl" | sed 's/^/nvml lines with per-process utilization: /'
echo "bundle: $bundle"
