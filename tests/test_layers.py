"""Layering rules: the core never needs the TUI, the recorder never needs pandas."""

import subprocess
import sys

import pytest


def _modules_after(import_line: str) -> set[str]:
    code = f"import sys\n{import_line}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", ["forensics.analysis", "forensics.parsers", "forensics.timeline",
                                    "forensics.match", "forensics.cli"])
def test_core_imports_without_textual(module: str) -> None:
    mods = _modules_after(f"import {module}")
    assert "textual" not in mods


def test_recorder_imports_without_pandas_or_textual() -> None:
    mods = _modules_after("import forensics.record")
    assert "pandas" not in mods
    assert "textual" not in mods
    assert "torch" not in mods


def test_parsers_are_installed_under_forensics_namespace() -> None:
    mods = _modules_after("import forensics.parsers")
    assert "forensics.parsers" in mods
    assert "parsers" not in mods


def test_every_package_directory_is_listed_in_pyproject() -> None:
    """A subpackage missing from pyproject's explicit list works in the editable checkout but is absent
    from a real install (``pip install .``): keep the list and the tree in step."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    listed = set(tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(p.parent.relative_to(root).parts)
        for p in (root / "forensics").glob("**/__init__.py")
        if not {"parsers", "signatures"} & set(p.parent.relative_to(root / "forensics").parts)
    } | {"forensics.parsers", "forensics.signatures"}
    assert found == listed
