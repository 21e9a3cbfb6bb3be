"""Extract Megatron-LM's failure messages from a snapshot of https://github.com/NVIDIA/Megatron-LM
(docs/catalogs.md), with the Python-source reader of tools/catalogs/deepspeed.py (``python_messages``, loaded
by path; see its docstring for what it takes from a file and how it sets the level).

Read: ``megatron/training`` (training loop, checkpointing, initialisation, fault tolerance, signal
handling; not the argument parsing and config files), the parts of ``megatron/core`` a failed run reports
from (``rerun_state_machine.py``: the NaN / Inf / spiky-loss checks and their re-run verdicts;
``distributed``: the gradient-norm checks before the data-parallel all-reduce; ``optimizer``;
``dist_checkpointing``: checkpoint save / load; ``parallel_state.py``; ``pipeline_parallel``; ``timers.py``;
``utils.py``; ``num_microbatches_calculator.py``; ``nccl_allocator.py``), and the top-level
``pretrain_*.py`` scripts (the loss NaN / Inf checks). Megatron calls
``rerun_state_machine.validate_result(…, message="found NaN in local grad norm …")``: those messages are
read too (level ``validate_result``); the state machine raises them wrapped as ``Unexpected result nan
(message='…')``. Older wordings of the NaN check and the re-run log line are in ``_OLDER``.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("catalog_pysource", Path(__file__).with_name("deepspeed.py"))
assert _spec is not None and _spec.loader is not None
_pysource = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pysource)

#: (directory or file under the root, files or sub-directories left out)
_DIRS: list[tuple[str, tuple[str, ...]]] = [
    ("megatron/training", ("arguments.py", "argument_utils.py", "config/", "yaml_arguments.py",
                           "theoretical_memory_usage.py", "datasets/", "models/", "distillation/")),
    ("megatron/core/rerun_state_machine.py", ()),
    ("megatron/core/distributed", ("distributed_data_parallel_config.py", "fsdp/src/megatron_fsdp/uneven_dtensor.py")),
    ("megatron/core/optimizer", ("optimizer_config.py",)),
    ("megatron/core/dist_checkpointing", ()),
    ("megatron/core/parallel_state.py", ()),
    ("megatron/core/pipeline_parallel", ()),
    ("megatron/core/timers.py", ()),
    ("megatron/core/utils.py", ()),
    ("megatron/core/num_microbatches_calculator.py", ()),
    ("megatron/core/nccl_allocator.py", ()),
    ("pretrain_gpt.py", ()),
    ("pretrain_mamba.py", ()),
    ("pretrain_hybrid.py", ()),
]


#: Older wordings, read with ``git show core_vX:<path>``: id -> [(format, level, first, last release)]. The
#: gradient-norm NaN check was an assert with the rank, device and node in it until core 0.9; the re-run
#: state machine's log line named the caller's file and line until 0.13 and spelled "invokation" until 0.15.
_OLDER: dict[str, list[tuple[str, str, str, str]]] = {
    "megatron.distributed.found-nan-in-local-grad-norm-for": [
        ("Rank {global_rank}: found NaN in local grad norm in backward pass before data-parallel communication "
         "collective. Device: {torch.cuda.current_device()}, node: {os.uname()[1]}", "AssertionError", "0.6", "0.9")],
    "megatron.rerun-state-machine.unexpected-result-on-rank-at-iteration-invocation": [
        ("Unexpected result {result} at {validation_call.caller.filename} line {validation_call.caller.lineno}, "
         "invokation #{validation_call.sequence} at iteration #{self.current_iteration} (message='{message}')",
         "error", "0.10", "0.13"),
        ("Unexpected result {result} on rank {_safe_get_rank()} at iteration #{self.current_iteration} "
         "invokation #{validation_call.sequence} (message='{message}')", "error", "0.14", "0.15")],
}


def _text(fmt: str) -> str:
    return re.sub(r"\{[^{}]*\}", "{}", fmt)


def _area(rel: str) -> str:
    parts = rel.removesuffix(".py").split("/")
    if parts[0] != "megatron":
        return parts[0].replace("_", "-")  # pretrain_gpt
    if parts[1] == "training":
        return "training" if len(parts) == 3 else f"training-{parts[2]}".replace("_", "-")
    return parts[2].replace("_", "-")  # core/<package or module>


def extract(root: Path, stats: Counter[str] | None = None) -> list[dict[str, Any]]:
    files = [p for p in _pysource._files(root, [(d, s) for d, s in _DIRS if (root / d).exists()])]
    out: list[dict[str, Any]] = []
    for entry in _pysource.python_messages(root, files, "megatron", _area, keyword_calls=("validate_result",),
                                           stats=stats):
        out.append(entry)
        for fmt, level, first, last in _OLDER.get(entry["id"], []):
            out.append({**entry, "id": f"{entry['id']}@{last}", "format": fmt, "text": _text(fmt), "level": level,
                        "versions": [first, last]})
    return out


if __name__ == "__main__":
    import json
    counts: Counter[str] = Counter()
    entries = extract(Path(sys.argv[1]), counts)
    if len(sys.argv) > 2 and sys.argv[2] == "--stats":
        print(json.dumps(counts, indent=1))
    else:
        json.dump(entries, sys.stdout, indent=1, ensure_ascii=False)
