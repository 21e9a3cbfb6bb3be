"""Layering rules: the core never needs the TUI, the recorder never needs pandas."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _modules_after(import_line: str) -> set[str]:
    code = f"import sys\n{import_line}\nprint('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", ["forensics.analysis", "forensics.parsers", "forensics.timeline.merge",
                                    "forensics.match", "forensics.cli"])
@pytest.mark.slow
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


def _pyproject() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_directory_is_listed_in_pyproject() -> None:
    """A subpackage missing from pyproject's explicit list works in the editable checkout but is absent
    from a real install (``pip install .``): keep the list and the tree in step."""
    config = _pyproject()
    found = set()
    for package, where in config["package-dir"].items():
        base = ROOT / where
        found |= {".".join([package, *p.parent.relative_to(base).parts]) for p in base.glob("**/__init__.py")}
    assert found == set(config["packages"])


def test_no_path_in_the_tree_is_a_link() -> None:
    """One file, one path: grep, find, coverage and Windows checkouts see every module once."""
    links = [str(p.relative_to(ROOT)) for top in ("forensics", "parsers", "signatures", "tests", "tools")
             for p in (ROOT / top).rglob("*") if p.is_symlink()]
    assert links == []


@pytest.mark.slow
def test_the_editable_install_finds_parsers_and_signatures_from_anywhere(tmp_path: Path) -> None:
    """Run outside the checkout: what imports is the install's mapping (package-dir), not the working directory."""
    code = ("import forensics.parsers.registry as r, forensics.match as m; "
            "print(r.__file__); print(len(r.PARSERS), len(m.load_signatures()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    where, counts = out.stdout.split("\n")[:2]
    assert Path(where) == ROOT / "parsers" / "registry.py"
    parsers, signatures = map(int, counts.split())
    assert parsers > 30 and signatures == len(list((ROOT / "signatures").glob("*.toml")))


@pytest.mark.slow
def test_a_built_wheel_holds_parsers_signatures_and_data(tmp_path: Path) -> None:
    """``pip install .`` installs what package-dir maps: the wheel has forensics/parsers and forensics/signatures,
    and imported from the wheel alone they work."""
    import zipfile

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next(tmp_path.glob("gpu_forensics-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "forensics/parsers/registry.py" in names and "forensics/parsers/common/base.py" in names
    assert {f"forensics/signatures/{p.name}" for p in (ROOT / "signatures").glob("*.toml")} <= names
    assert "forensics/py.typed" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import forensics.parsers.registry as r; "
            "import forensics.match as m; print(r.__file__); print(len(m.load_signatures()))")
    out = subprocess.run([sys.executable, "-I", "-c", code, str(site)], cwd=tmp_path, capture_output=True,
                         text=True, check=True)
    assert out.stdout.split("\n")[0].startswith(str(site))
