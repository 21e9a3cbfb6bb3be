"""``forensics report``: Markdown that GitHub renders (checked with markdown-it-py), a one-file HTML
that opens offline (checked statically and in headless Chromium), the JSON report, golden files of
the recorded samples (``UPDATE_GOLDEN=1`` regenerates them; read the diff), the size cap."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from forensics.analysis import analyze, bundle_facts
from forensics.cli import main
from forensics.postmortem import render_report
from forensics.postmortem.markdown import LIMIT, render_markdown
from forensics.postmortem.model import build_report

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "samples" / "recorded"
GOLDEN = ROOT / "tests" / "golden" / "reports"
GOLDEN_CASES = ("meta-offload-lora", "silent-stall-2gpu", "memory-margin", "oom-optimizer-step", "healthy")


def _rel(case: str) -> str:
    return f"samples/recorded/{case}/bundle"


@pytest.fixture
def in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # paths in reports are as the user typed them: keep them relative


def _report(paths: list[str], fmt: str) -> str:
    return render_report(analyze(paths), bundle_facts(paths), fmt)


@pytest.mark.parametrize("case", GOLDEN_CASES)
@pytest.mark.parametrize("fmt", ["md", "json"])
def test_report_matches_golden(case: str, fmt: str, in_root: None) -> None:
    text = _report([_rel(case)], fmt)
    path = GOLDEN / f"{case}.{fmt}"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"no golden file {path}; run UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(encoding="utf-8")


def _md_blocks(text: str) -> tuple[list[str], int]:
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return [t.type for t in tokens], sum(1 for t in tokens if t.type == "table_open")


def _pipe_tables(text: str) -> int:
    """Tables as written: a header row followed by a |---| row, outside fenced code."""
    count, fenced, prev = 0, False, ""
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.fullmatch(r"\|(?:---\|)+", line) and prev.startswith("| "):
            count += 1
        prev = line
    return count


@pytest.mark.parametrize("case", sorted(p.name for p in RECORDED.iterdir() if (p / "bundle").is_dir()))
@pytest.mark.slow
def test_markdown_renders_tables_and_balanced_details(case: str, in_root: None) -> None:
    text = _report([_rel(case)], "md")
    types, tables = _md_blocks(text)
    assert tables == _pipe_tables(text) > 0  # every pipe table parses as a table, none as a paragraph
    assert text.count("<details>") == text.count("</details>") == text.count("<summary>")
    assert text.startswith("# GPU training post-mortem\n")
    assert "## Hardware" in text and "## Software" in text and "## The run" in text
    assert "inline" in types
    # a <details> block must be followed by a blank line so the Markdown inside it renders
    for m in re.finditer(r"<summary>.*</summary>\n(.)", text):
        assert m.group(1) == "\n"


@pytest.mark.slow
def test_markdown_of_every_recorded_bundle_at_once_stays_under_the_issue_limit(in_root: None) -> None:
    paths = [_rel(p.name) for p in sorted(RECORDED.iterdir()) if (p / "bundle").is_dir()]
    text = _report(paths, "md")
    assert len(text) < LIMIT
    assert text.count("<details>") == text.count("</details>")
    assert "## Hardware" in text and text.count("NVIDIA H200") >= len(paths)


@pytest.mark.slow
def test_markdown_shrinks_long_parts_first_and_never_passes_the_limit(in_root: None) -> None:
    paths = [_rel("silent-stall-2gpu")]
    analysis = analyze(paths)
    data = build_report(analysis, bundle_facts(paths))
    full = render_markdown(analysis, data)
    for limit in (len(full) - 1, 6000, 2500):
        text = render_markdown(analysis, data, limit=limit)
        assert len(text) <= limit
        assert text.startswith("# GPU training post-mortem\n")
        assert "ROOT CAUSE" in text[:800] and "CULPRIT: rank 1" in text[:400]  # culprit line, then the cause
    smaller = render_markdown(analysis, data, limit=len(full) - 1)
    assert "raw lines" in full and len(smaller) < len(full)


@pytest.mark.slow
def test_json_report_is_the_analyze_json_plus_machine_software_run_and_metrics(in_root: None) -> None:
    paths = [_rel("oom-optimizer-step")]
    data = json.loads(_report(paths, "json"))
    from forensics.analysis import to_json_dict

    plain = to_json_dict(analyze(paths))
    assert {k: data[k] for k in plain} == json.loads(json.dumps(plain))
    assert data["hardware"][0]["gpus"][0]["name"] == "NVIDIA H200"
    assert data["hardware"][0]["topology"][1][:3] == ["GPU0", "X", "NV18"]
    assert data["software"][0]["components"]["torch"] == "2.11.0+cu130"
    assert data["run"]["recordings"][0]["exit_code"] == 1
    gpu0 = next(r for r in data["gpu_metrics"] if r["label"] == "GPU 0")
    assert gpu0["headroom_mib"] == gpu0["total_mib"] - gpu0["peak_mem_mib"] and gpu0["headroom_mib"] < 1024


def test_report_redacts_secrets_in_evidence_and_command(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text("Traceback (most recent call last):\n  File \"t.py\", line 9, in <module>\n"
                   "    push(\"https://bob:hunter22@hub.example.com\", token=\"hf_" + "a" * 30 + "\")\n"
                   "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                   "capacity of 79.15 GiB of which 1.75 MiB is free. Authorization: Bearer abcdefgh12345678\n")
    for fmt in ("md", "html", "json"):
        text = _report([str(log)], fmt)
        assert "hunter22" not in text and "hf_aaaa" not in text
        assert "[REDACTED]" in text


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.fetching: list[tuple[str, str, str]] = []  # (tag, attr, value) that a browser would load
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for name, value in attrs:
            if name in ("src", "srcset", "data", "poster", "background", "action", "xlink:href") and value:
                self.fetching.append((tag, name, value))
            if name == "href" and value:
                (self.links if tag == "a" else self.fetching).append(
                    value if tag == "a" else (tag, name, value))  # type: ignore[arg-type]


def test_html_is_one_file_that_fetches_nothing_and_prints(in_root: None) -> None:
    text = _report([_rel("meta-offload-lora")], "html")
    refs = _Refs()
    refs.feed(text)
    assert refs.fetching == []
    assert "script" not in refs.tags and "link" not in refs.tags and "iframe" not in refs.tags
    assert "url(" not in text and "@import" not in text
    assert all(link.startswith("https://") for link in refs.links)  # references, plain links in the text
    assert refs.tags.count("svg") == 6  # memory, utilization, power for each of two GPUs
    assert "@media print" in text
    assert text.count("<table") >= 5


#: Debian's chromium and chromium-headless-shell, Playwright's chrome-headless-shell, Chrome.
BROWSERS = ("chromium", "chromium-headless-shell", "chrome-headless-shell", "chromium-browser", "google-chrome",
            "google-chrome-stable")
CHROMIUM = next((path for name in BROWSERS if (path := shutil.which(name))), None)
_CHROME_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars"]


def _chromium(*args: str) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *_CHROME_FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, timeout=120, check=False)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium (" + ", ".join(BROWSERS) + ") on PATH (Debian: "
                    "apt-get install chromium-headless-shell); the HTML report was not checked in a browser")
def test_html_report_in_headless_chromium(tmp_path: Path, in_root: None) -> None:
    out = tmp_path / "report.html"
    assert main(["report", _rel("meta-offload-lora"), "--format", "html", "-o", str(out)]) == 0
    dom = _chromium("--dump-dom", out.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    html = dom.stdout.decode()
    assert "ROOT CAUSE: Offloaded (meta) weights" in html
    assert html.count("<svg") == 6 and html.count("<polyline") >= 6
    assert "Gen5 x16" in html and "2.11.0+cu130" in html and "python3 meta_offload_lora.py" in html
    png = tmp_path / "report.png"
    shot = _chromium(f"--screenshot={png}", "--window-size=1100,1400", out.as_uri())
    assert shot.returncode == 0, shot.stderr[-2000:]
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 30_000  # a blank page compresses to a few KB


def test_hardware_table_marks_a_chipset_slot_and_a_degraded_link(tmp_path: Path) -> None:
    """The layout of report 1 (an RTX 5090 in the CPU's x16 slot, an RTX 5070 Ti in a chipset x4 slot,
    GPU-to-GPU through the host bridge), written as a bundle's host files."""
    b = tmp_path / "bundle"
    shutil.copytree(RECORDED / "healthy" / "bundle", b)
    gpus = json.loads((b / "host/gpus.json").read_text())
    gpus["gpus"][0].update(name="NVIDIA GeForce RTX 5090", mem_total_mib=32607, pcie_gen=5, pcie_width=16,
                           pcie_gen_max=5, pcie_width_max=16)
    gpus["gpus"][1].update(name="NVIDIA GeForce RTX 5070 Ti", mem_total_mib=16303, pcie_gen=1, pcie_width=4,
                           pcie_gen_max=4, pcie_width_max=4)
    (b / "host/gpus.json").write_text(json.dumps(gpus))
    (b / "host/nvidia-smi-topo.txt").write_text(
        "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPHB\t0-31\t0\t\tN/A\n"
        "GPU1\tPHB\t X \t0-31\t0\t\tN/A\n\nLegend:\n\n  X    = Self\n")
    text = _report([str(b)], "md")
    row0 = next(line for line in text.splitlines() if line.startswith("| 0 | NVIDIA GeForce RTX 5090"))
    row1 = next(line for line in text.splitlines() if line.startswith("| 1 | NVIDIA GeForce RTX 5070 Ti"))
    assert "Gen5 x16 (max Gen5 x16)" in row0 and "degraded" not in row0 and "x4 slot" not in row0
    assert "Gen1 x4 (max Gen4 x4)" in row1 and "**degraded**" in row1 and "x4 slot (usually chipset lanes" in row1
    assert "peers only through the host (PHB in topo -m)" in row0 and "peers only through the host" in row1
    assert "| GPU0 | X | PHB |" in text
