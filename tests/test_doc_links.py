"""The documentation stands alone: every relative link in a Markdown file resolves inside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")  # [text](target "title")
UP_PATH = re.compile(r"`(\.\./[^`\s]+)`")  # a path written in backticks that leaves its folder


def _markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md", "**/*.md"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout.split()
    files = {ROOT / p for p in listed} | set(ROOT.glob("*.md")) | set((ROOT / "docs").rglob("*.md"))
    return sorted(p for p in files if p.is_file())


def _targets(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks are not links
    return [m.group(1) for m in LINK.finditer(text)] + [m.group(1) for m in UP_PATH.finditer(text)]


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) and not target.startswith("#")


FILES = _markdown_files()


def test_the_documentation_is_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in FILES}
    assert {"README.md", "ARCHITECTURE.md", "docs/design.md", "docs/signatures.md"} <= names


@pytest.mark.parametrize("path", FILES, ids=[p.relative_to(ROOT).as_posix() for p in FILES])
def test_relative_links_resolve_inside_the_repository(path: Path) -> None:
    for target in filter(_relative, _targets(path)):
        resolved = (path.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(ROOT), f"{path.relative_to(ROOT)}: {target} leaves the repository"
        assert resolved.exists(), f"{path.relative_to(ROOT)}: {target} does not exist"


def test_the_checker_catches_a_link_out(tmp_path: Path) -> None:
    page = ROOT / "docs" / "design.md"
    assert "../shared/" not in page.read_text()
    fake = tmp_path / "x.md"
    fake.write_text("see [the card](../shared/DESIGN.md) and `../shared/knowledge/`\n")
    assert _targets(fake) == ["../shared/DESIGN.md", "../shared/knowledge/"]
