"""mypy and import-linter over the package as pip installs it.

``pyproject.toml`` maps ``forensics.parsers`` to the top-level ``parsers/`` and ``forensics.signatures`` to
``signatures/`` (setuptools ``package-dir``). Installs follow that map; mypy and import-linter do not: they
find ``forensics`` in the working directory and look for its subpackages beside it. So both are run inside
``build/installed-tree/``, a tree of links laid out as the install is, and what they print is turned back
into the repository's paths.

    python tools/static_checks.py            # both
    python tools/static_checks.py mypy [ARGS]
    python tools/static_checks.py imports
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "installed-tree"
SUFFIXES = {".py", ".pyi", ".toml", ".tcss", ".typed"}


def package_dirs() -> dict[str, Path]:
    """Package name -> the repository directory that holds it, from pyproject's ``package-dir``."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return {pkg: ROOT / where for pkg, where in config["package-dir"].items()}


def build_tree() -> dict[str, str]:
    """Lay the links out; return tree-relative path -> repository-relative path."""
    shutil.rmtree(TREE, ignore_errors=True)
    dirs = package_dirs()
    mapped_dirs = set(dirs.values())
    paths: dict[str, str] = {}
    for pkg, source in dirs.items():
        target_root = TREE.joinpath(*pkg.split("."))
        for path in sorted(source.rglob("*")):
            if not path.is_file() or path.suffix not in SUFFIXES or "__pycache__" in path.parts:
                continue
            # a folder inside this one that is itself mapped elsewhere is laid out by its own entry
            if any(parent in mapped_dirs and parent != source for parent in path.parents):
                continue
            rel = path.relative_to(source)
            link = target_root / rel
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(path)
            paths[str(link.relative_to(TREE))] = str(path.relative_to(ROOT))
    return paths


def _run(cmd: Sequence[str], paths: dict[str, str]) -> int:
    proc = subprocess.run(cmd, cwd=TREE, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(TREE)})
    pattern = re.compile("|".join(re.escape(k) for k in sorted(paths, key=len, reverse=True)))
    for stream, out in ((sys.stdout, proc.stdout), (sys.stderr, proc.stderr)):
        stream.write(pattern.sub(lambda m: paths[m.group(0)], out))
    return proc.returncode


def mypy(args: Sequence[str], paths: dict[str, str]) -> int:
    return _run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                 "--cache-dir", str(ROOT / ".mypy_cache"), "-p", "forensics", *args], paths)


def imports(paths: dict[str, str]) -> int:
    linter = Path(sys.executable).with_name("lint-imports")
    return _run([str(linter), "--no-cache", str(ROOT / "pyproject.toml")], paths)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    what = args.pop(0) if args else "all"
    if what not in ("all", "mypy", "imports"):
        print(__doc__, file=sys.stderr)
        return 2
    paths = build_tree()
    status = 0
    if what in ("all", "mypy"):
        status |= mypy(args, paths)
    if what in ("all", "imports"):
        status |= imports(paths)
    return status


if __name__ == "__main__":
    sys.exit(main())
