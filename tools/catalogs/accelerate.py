"""Extract Hugging Face Accelerate's failure messages from a snapshot of https://github.com/huggingface/accelerate
(docs/catalogs.md), with the Python-source reader of tools/catalogs/deepspeed.py (``python_messages``, loaded
by path; see its docstring for what it takes from a file and how it sets the level).

Read (under ``src/accelerate``): the Accelerator and its state (``accelerator.py``, ``state.py``), data
loading, checkpointing, big-model dispatch and hooks (``big_modeling.py``, ``hooks.py``), the notebook /
debug launchers (``launchers.py``), optimizer, scheduler, local SGD, memory helpers, the ``accelerate launch``
command (``commands/launch.py``) and the run-time utilities (``utils/operations.py`` with its debug-mode
collective checks, ``utils/launch.py``, ``memory.py``, ``modeling.py``, ``offload.py``, ``other.py``,
``random.py``, ``environment.py``, ``fsdp_utils.py``, ``deepspeed.py``). The meta-device ``ValueError`` of
``utils/modeling.py`` is kept although ``ValueError`` is otherwise argument validation: meta-tensor-dispatch
reads it.
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

_BASE = "src/accelerate"
_FILES = ["accelerator.py", "state.py", "data_loader.py", "checkpointing.py", "big_modeling.py", "hooks.py",
          "launchers.py", "optimizer.py", "scheduler.py", "local_sgd.py", "memory_utils.py", "commands/launch.py",
          "utils/operations.py", "utils/launch.py", "utils/memory.py", "utils/modeling.py", "utils/offload.py",
          "utils/other.py", "utils/random.py", "utils/environment.py", "utils/fsdp_utils.py", "utils/deepspeed.py"]
#: argument-validation raises kept: the ones a signature reads
_KEEP = re.compile(r"on the meta device")


def _area(rel: str) -> str:
    parts = rel.removeprefix(_BASE + "/").removesuffix(".py").split("/")
    return "-".join(parts).replace("_", "-")  # utils/operations -> utils-operations, accelerator


def extract(root: Path, stats: Counter[str] | None = None) -> list[dict[str, Any]]:
    files = [root / _BASE / f for f in _FILES if (root / _BASE / f).is_file()]
    return _pysource.python_messages(root, files, "accelerate", _area, stats=stats, keep=_KEEP)


if __name__ == "__main__":
    import json
    counts: Counter[str] = Counter()
    entries = extract(Path(sys.argv[1]), counts)
    if len(sys.argv) > 2 and sys.argv[2] == "--stats":
        print(json.dumps(counts, indent=1))
    else:
        json.dump(entries, sys.stdout, indent=1, ensure_ascii=False)
