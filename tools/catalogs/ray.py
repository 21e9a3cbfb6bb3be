"""Extract Ray's failure messages (https://github.com/ray-project/ray) from a snapshot of a Ray release as
its wheel ships it (docs/catalogs.md): the ``ray`` package directory of an unpacked wheel. The wheel is the
build of one commit (``ray/_version.py`` names it), and it holds both the Python sources and the compiled
raylet and GCS server whose C++ messages a user sees; the full repository is too large to bring here.

What it reads:

* ``ray/exceptions.py``, Python's ast, nothing imported: for each exception class, the string literals and
  f-strings its ``__str__`` / ``__init__`` return or assign as the message (``"The actor died unexpectedly
  before finishing this task."``, ``f"Failed to retrieve object {self.object_ref_hex}. "``), not its
  docstring, nor pieces that are no message (a log path, "RayTaskError(…)", "(pid=…, ip=…)": fewer than
  three words). Level: the class name. A message with line breaks is listed by its first line with 12
  fixed characters.
* The C++ messages of ``_BINARY`` (raylet, GCS server), each a literal the extractor finds in the compiled
  binary of the snapshot (``strings``-style search; the build fails if it is gone), so the list cannot
  drift silently. Level: the binary's name; ``where`` names the binary, there is no source line to give.
* Older wordings (``_OLDER``) of messages mapped to a signature, found the same way in an older wheel
  (ray 2.44.1, commit daca7b2b1a950dc7f731e34e74c76ae383794ffe): the memory monitor's "Task was killed due
  to the node running low on memory." that 2.60 words "N worker(s) were killed due to the node running low
  on memory.".
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("catalog_pysource", Path(__file__).with_name("deepspeed.py"))
assert _spec is not None and _spec.loader is not None
_pysource = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_pysource)

#: (id, binary under the package root, format as in the binary (printf), the literal to find in it)
_BINARY: list[tuple[str, str, str, str]] = [
    ("ray.raylet.workers-killed-low-memory", "ray/core/src/ray/raylet/raylet",
     "%d worker(s) were killed due to the node running low on memory. %s",
     "%d worker(s) were killed due to the node running low on memory. %s"),
    ("ray.raylet.memory-on-the-node-used-limit", "ray/core/src/ray/raylet/raylet",
     "Memory on the node (IP: %s, ID: %s) was %sGB used / %sGB limit (%f)",
     "Memory on the node (IP: %s, ID: %s) was %sGB used / %sGB limit (%f)"),
    ("ray.raylet.oom-kill-reason", "ray/core/src/ray/raylet/raylet", "OOM kill reason: %s", "OOM kill reason: %s"),
    ("ray.raylet.worker-died-unexpected-system-error", "ray/core/src/ray/raylet/raylet",
     "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
     "problem, check the logs for the dead worker.",
     "A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
     "problem, check the logs for the dead worker."),
    ("ray.raylet.worker-unexpectedly-exits-connection-error", "ray/core/src/ray/raylet/raylet",
     "Worker unexpectedly exits with a connection error code %s",
     "Worker unexpectedly exits with a connection error code "),
    ("ray.gcs.actor-dead-worker-process-died", "ray/core/src/ray/gcs/gcs_server",
     "The actor is dead because its worker process has died. Worker exit type: %s",
     "The actor is dead because its worker process has died. Worker exit type: "),
    ("ray.gcs.node-missed-too-many-heartbeats", "ray/core/src/ray/gcs/gcs_server",
     "%s has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, etc.) ",
     " has missed too many heartbeats from it. This can happen when a \t(1) raylet crashes unexpectedly (OOM, etc.) "),
]
#: id -> [(format, first, last release)] of older wordings, found in the older wheel named in the docstring.
_OLDER: dict[str, list[tuple[str, str, str]]] = {
    "ray.raylet.workers-killed-low-memory": [
        ("Task was killed due to the node running low on memory.", "2.44", "2.44")],
}


def _exception_messages(root: Path) -> list[dict[str, Any]]:
    rel = "ray/exceptions.py"
    tree = ast.parse((root / rel).read_text())
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for cls in [n for n in tree.body if isinstance(n, ast.ClassDef)]:
        doc = ast.get_docstring(cls, clean=False)
        for node in ast.walk(cls):
            value = node.value if isinstance(node, (ast.Return, ast.Assign, ast.AnnAssign)) else None
            msg = _pysource._Msg.of(value) if value is not None else None
            if msg is None or msg[0] == doc:
                continue
            if "\n" in msg[1].strip():
                msg = _pysource._first_line(msg)
                if msg is None:
                    continue
            fixed = len(msg[1].replace("{}", "").strip())
            words = re.findall(r"[A-Za-z']{2,}", " ".join(w for w in msg[1].split() if "/" not in w))
            # not a message: a path, a class name, "(pid=…)"
            if fixed < 12 or len(words) < 3 or msg[1].startswith("`") or msg[1] in seen:
                continue
            seen.add(msg[1])
            base = f"ray.exceptions.{_pysource._kebab(msg[1])}"
            ident, n = base, 2
            while any(e["id"] == ident for e in out):
                ident, n = f"{base}-{n}", n + 1
            out.append({"id": ident, "format": msg[0], "text": msg[1], "where": f"{rel}:{node.lineno}",
                        "level": cls.name})
    return out


def _binary_entries(root: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for ident, binary, fmt, literal in _BINARY:
        data = (root / binary).read_bytes()
        offset = data.find(literal.encode())
        if offset < 0:
            raise SystemExit(f"ray: {literal!r} is not in {binary}")
        entry = {"id": ident, "format": fmt, "text": _pysource._printf_text(fmt),
                 "where": f"{binary} (compiled; literal at byte {offset})", "level": Path(binary).name}
        out.append(entry)
        for old, first, last in _OLDER.get(ident, []):
            out.append({**entry, "id": f"{ident}@{last}", "format": old, "text": _pysource._printf_text(old),
                        "where": f"{binary} of ray {last} (compiled)", "versions": [first, last]})
    return out


def extract(root: Path) -> list[dict[str, Any]]:
    return _exception_messages(root) + _binary_entries(root)


if __name__ == "__main__":
    import json
    json.dump(extract(Path(sys.argv[1])), sys.stdout, indent=1, ensure_ascii=False)
