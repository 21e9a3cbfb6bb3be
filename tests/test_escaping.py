"""Escaping by construction (issue 24): what an input puts in a field is shown, never obeyed.

- Markdown through GitHub's own engine (cmark-gfm, with its table, autolink, strikethrough and
  tag-filter extensions) and a sanitizer with GitHub's allow-list (nh3): for any text, an escaped cell,
  heading, quote or list item renders as exactly that text, a code span cannot be closed from inside
  and a fence holds everything; a whole report and a ``diff --format md`` of a bundle from a
  "compromised node" hold no tag, link or image that the bundle put there.
- Terminal text: no ESC/OSC/BEL/C1 or bidi override reaches ``diff``, ``analyze`` or the fleet summary.
- JSON: strict, and the same characters written as escapes.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hostile import bundle, cli, edit_manifest, fine
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forensics.escape import WORD_JOINER, json_dumps, md_code, md_prose, md_text, terminal
from forensics.postmortem.markdown import fence

cmarkgfm = pytest.importorskip("cmarkgfm")
nh3 = pytest.importorskip("nh3")

from cmarkgfm.cmark import Options  # noqa: E402

# GitHub's sanitization allow-list (html-pipeline's SanitizationFilter), the part Markdown can produce.
GITHUB_TAGS = {"h1", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "br", "b", "i", "strong", "em", "a", "pre", "code",
               "img", "tt", "div", "ins", "del", "sup", "sub", "p", "ol", "ul", "table", "thead", "tbody", "tfoot",
               "blockquote", "dl", "dt", "dd", "kbd", "q", "samp", "var", "hr", "ruby", "rt", "rp", "li", "tr",
               "td", "th", "s", "strike", "summary", "details", "caption", "figure", "figcaption", "abbr", "bdo",
               "cite", "dfn", "mark", "small", "span", "time", "wbr", "input"}
GITHUB_ATTRS = {"a": {"href"}, "img": {"src", "longdesc", "alt", "width", "height"}, "td": {"align"},
                "th": {"align"}, "input": {"type", "checked", "disabled"}, "div": {"itemscope", "itemtype"},
                "blockquote": {"cite"}, "del": {"cite"}, "ins": {"cite"}, "q": {"cite"}, "details": {"open"}}
#: Tags the bundle must never be able to cause around its text (``<details>`` is counted instead: the
#: report's own blocks hold input, in a fence).
FORBIDDEN = {"img", "strong", "em", "del", "s", "strike", "h1", "h3", "h4", "h5", "h6", "input",
             "sup", "sub", "kbd", "ins", "mark", "b", "i", "ruby", "q", "hr"}
EVIL = "EVIL"


def github(md: str) -> str:
    """Markdown as GitHub shows it: cmark-gfm with GitHub's extensions, then a GitHub-like sanitizer."""
    raw = cmarkgfm.github_flavored_markdown_to_html(md, options=Options.CMARK_OPT_UNSAFE)
    return nh3.clean(raw, tags=GITHUB_TAGS, attributes=GITHUB_ATTRS, url_schemes={"http", "https", "mailto"},
                     link_rel=None)


class Elements(HTMLParser):
    """(tag, attrs, text inside) of every element, and the text of every cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.done: list[tuple[str, dict[str, str | None], str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "hr", "img", "input", "wbr"):
            self.done.append((tag, dict(attrs), ""))
            return
        self.open.append((tag, dict(attrs), []))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.open) - 1, -1, -1):
            if self.open[i][0] == tag:
                name, attrs, text = self.open.pop(i)
                joined = "".join(text)
                self.done.append((name, attrs, joined))
                if self.open:
                    self.open[-1][2].append(joined)
                return

    def handle_data(self, data: str) -> None:
        if self.open:
            self.open[-1][2].append(data)


def elements(page: str) -> list[tuple[str, dict[str, str | None], str]]:
    p = Elements()
    p.feed(page)
    p.close()
    return p.done


def _shown(text: str) -> str:
    """What a reader sees of ``text`` once rendered: the word joiners are invisible."""
    return text.replace(WORD_JOINER, "")


_PIECES = [*"`*_[]()<>!|\\~#@:/.&;$-+=1aZ w\"'{}", "www.", "http://", "https://", "x@y.com", "<img src=x>",
           "![a](http://e/a.png)", "<details>", "&amp;", "&#60;", "\u202e", "\x1b]52;c;", "\n", "```", "@someone",
           "#12", "1. ", "- ", "> ", "===", "---"]
HOSTILE_TEXT = st.lists(st.sampled_from(_PIECES), max_size=24).map("".join)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _clean(text: str) -> str:
    return " ".join(terminal(text, one_line=True).split())


@PROPERTY
@given(HOSTILE_TEXT)
def test_an_escaped_cell_renders_as_its_text_and_nothing_else(text: str) -> None:
    md = f"| h | i |\n|---|---|\n| {md_text(text, line_start=False) or '–'} | z |\n"
    tags = elements(github(md))
    cells = [t for t in tags if t[0] == "td"]
    assert len(cells) == 2, (text, md)
    assert _shown(cells[0][2]) == (_clean(text) or "–"), (text, md)
    assert cells[1][2] == "z"
    assert {t[0] for t in tags} <= {"table", "thead", "tbody", "tr", "th", "td"}, (text, md)


@PROPERTY
@given(HOSTILE_TEXT)
def test_escaped_text_in_a_heading_quote_or_list_is_its_text(text: str) -> None:
    body = md_text(text)
    if not body.strip():
        return
    for md, tag in ((f"## {body}\n", "h2"), (f"> {body}\n", "p"), (f"- {body}\n", "li"), (f"{body}\n", "p")):
        tags = elements(github(md))
        inner = [t for t in tags if t[0] == tag]
        assert inner and _shown(inner[0][2]).strip() == _clean(text), (text, md, tags)
        assert {t[0] for t in tags} <= {"h2", "blockquote", "ul", "li", "p"}, (text, md, tags)


@PROPERTY
@given(HOSTILE_TEXT)
def test_a_code_span_cannot_be_closed_from_inside(text: str) -> None:
    expect = _clean(text)
    if not expect:
        return
    for md, in_table in ((f"| h |\n|---|\n| {md_code(text)} |\n", True), (f"x {md_code(text, False)} y\n", False)):
        tags = elements(github(md))
        codes = [t for t in tags if t[0] == "code"]
        assert len(codes) == 1, (text, md, tags)
        assert codes[0][2].strip(" ") == expect.strip(" ") or codes[0][2] == expect, (text, md, codes)
        assert {t[0] for t in tags} <= {"table", "thead", "tbody", "tr", "th", "td", "code", "p"}, (text, md)
        assert not in_table or len([t for t in tags if t[0] == "td"]) == 1


@PROPERTY
@given(st.lists(HOSTILE_TEXT, max_size=6))
def test_a_fence_holds_every_line(lines: list[str]) -> None:
    text = "\n".join(lines)
    md = "\n".join(["before", "", *fence(text), "", "after"]) + "\n"
    tags = elements(github(md))
    assert [t[0] for t in tags if t[0] not in ("p",)] == ["code", "pre"], (text, md, tags)
    assert [t[2] for t in tags if t[0] == "p"] == ["before", "after"]


def test_prose_keeps_its_own_code_spans_and_nothing_else() -> None:
    md = md_prose("run `nvidia-smi -r` then <img src=x> **now** [x](http://e.example) `a`` b`")
    tags = elements(github(md + "\n"))
    assert [t[2] for t in tags if t[0] == "code"] == ["nvidia-smi -r", "a`` b"]
    assert {t[0] for t in tags} == {"p", "code"}


def test_terminal_text_has_no_controls_and_no_bidi() -> None:
    text = "a\x1b[2Jb\x1b]0;title\x07c\x1b]52;c;ZXZpbA==\x07\x9b31m\u202egnp.exe\u2066x\u2069\r\nline2\tend"
    got = terminal(text)
    assert got == "a[2Jb]0;titlec]52;c;ZXZpbA==31mgnp.exex\nline2\tend"
    assert terminal(text, one_line=True) == "a[2Jb]0;titlec]52;c;ZXZpbA==31mgnp.exex line2 end"


def test_json_is_strict_and_escapes_what_drives_a_terminal() -> None:
    text = json_dumps({"a": float("inf"), "b": [float("nan"), 1.5], "c": "x\u202ey\x9b\x7f"})
    assert json.loads(text, parse_constant=lambda c: pytest.fail(c)) == {"a": None, "b": [None, 1.5],
                                                                          "c": "x\u202ey\x9b\x7f"}
    assert "\u202e" not in text and "\x9b" not in text and "\\u202e" in text


# -- whole outputs of a bundle from a compromised node -----------------------------------------------
PAYLOADS = (f"{EVIL}![t](https://evil.example/t.png)", f"{EVIL}<img src=https://evil.example/i.png>",
            f"{EVIL}<details><summary>open me</summary>", f"{EVIL} www.evil.example", f"{EVIL} mail@evil.example",
            f"{EVIL}[link](https://evil.example/l)", f"{EVIL} **bold** ~~gone~~ _em_ @maintainer #1",
            f"{EVIL}`` `x` ``</code><img src=x>", f"{EVIL}| cell | split |", f"{EVIL}\u202etxt.exe",
            f"{EVIL}\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b]0;pwned\x07")


def _compromised(tmp: Path, name: str, sample: str = "oom-first-backward") -> Path:
    b = bundle(tmp, name, sample)
    p = iter(PAYLOADS * 3)
    edit_manifest(b, host=next(p), command=["python3", next(p), "paths=[/data/a]", next(p)], cwd=next(p))
    env = json.loads((b / "host/env.json").read_text())
    env.update({"NCCL_" + EVIL: next(p), "PYTORCH_CUDA_ALLOC_CONF": next(p), "TORCH_X": next(p)})
    (b / "host/env.json").write_text(json.dumps(env))
    versions = json.loads((b / "host/versions.json").read_text())
    versions.update({"torch": next(p), "nccl": next(p), "python": next(p)})
    (b / "host/versions.json").write_text(json.dumps(versions))
    gpus = json.loads((b / "host/gpus.json").read_text())
    for g in gpus.get("gpus", []):
        g["name"], g["vbios"] = next(p), next(p)
    gpus["driver_version"] = next(p)
    (b / "host/gpus.json").write_text(json.dumps(gpus))
    with (b / "host/pip-freeze.txt").open("a") as fh:
        fh.write(f"torch=={next(p)}\ntransformers @ {next(p)}\n")
    with (b / "stderr.log").open("a") as fh:
        for payload in PAYLOADS:
            fh.write(f"RuntimeError: CUDA out of memory. {payload}\n")
    return b


def _user_signature(tmp: Path) -> Path:
    d = tmp / "sigs"
    d.mkdir()
    (d / "evil-user-signature.toml").write_text(f'''id = "evil-user-signature"
title = "{EVIL} <img src=https://evil.example/t.png> **title**"
category = "framework"
platforms = ["any"]
priority = 99
explain = "{EVIL} <details><summary>x</summary> ![i](https://evil.example/e.png) [l](https://evil.example)"
remedy = ["{EVIL} <img src=x> run `nvidia-smi` [here](https://evil.example)", "{EVIL} www.evil.example"]
references = ["javascript:alert(1)", "https://evil.example/ref <img src=x>"]

[[evidence]]
name = "evil"
role = "anchor"
literals = ["{EVIL}"]
regex = "{EVIL}"
weight = 1.0
''')
    return d


def _assert_nothing_live(md: str, where: str) -> None:
    page = github(md)
    allowed_links = set(re.findall(r"^- <(https?://[^>]+)>$", md, re.M))  # the signatures' own references
    for tag, attrs, text in elements(page):
        assert tag != "img", (where, attrs)
        if tag == "a":
            assert attrs.get("href") in allowed_links and EVIL not in text, (where, attrs, text)
        assert not any(EVIL in (v or "") or "evil.example" in (v or "") for v in attrs.values()), (where, tag, attrs)
        if tag in FORBIDDEN:
            assert EVIL not in text and "evil" not in text.lower(), (where, tag, text)
    details_lines = sum(1 for line in md.splitlines() if line == "<details>")
    assert page.count("<details") == details_lines, where  # only the report's own blocks
    for bad in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert bad not in md, (where, repr(bad))


@pytest.mark.slow
def test_a_report_of_a_compromised_bundle_has_nothing_live(tmp_path: Path) -> None:
    b = _compromised(tmp_path, "bad")
    sigs = _user_signature(tmp_path)
    ran = cli("report", "--signatures", str(sigs), str(b))
    assert fine(ran, (0,)), ran.err
    assert EVIL in ran.out and "evil-user-signature" in ran.out
    _assert_nothing_live(ran.out, "report")


@pytest.mark.slow
def test_diff_outputs_of_a_compromised_bundle_have_nothing_live(tmp_path: Path) -> None:
    good = bundle(tmp_path, "good", "oom-first-backward")
    bad = _compromised(tmp_path, "bad")
    md = cli("diff", "--format", "md", str(good), str(bad))
    assert fine(md, (0,)), md.err
    assert EVIL in md.out
    _assert_nothing_live(md.out, "diff md")
    text = cli("diff", str(good), str(bad))
    assert fine(text, (0,)) and EVIL in text.out
    for bad_char in ("\x1b", "\x07", "\u202e", "\x9b"):
        assert bad_char not in text.out + text.err
    js = cli("diff", "--format", "json", str(good), str(bad))
    assert "\u202e" not in js.out and "\x1b" not in js.out
    assert EVIL in json.dumps(json.loads(js.out))


@pytest.mark.slow
def test_analyze_text_and_html_report_have_no_controls(tmp_path: Path) -> None:
    b = _compromised(tmp_path, "bad")
    for args in (["analyze", str(b)], ["analyze", "--all", str(b)], ["report", "--format", "html", str(b)]):
        ran = cli(*args)
        assert fine(ran, (0, 1)), ran.err
        for bad_char in ("\x1b", "\x07", "\u202e", "\x9b"):
            assert bad_char not in ran.out, (args, repr(bad_char))
    page = cli("report", "--format", "html", str(b)).out
    assert "<img" not in page.lower().replace('<img src="data:', "")
    assert html.escape("<img src=x>") in page or "&lt;img" in page


def test_markdown_golden_reports_still_render(tmp_path: Path) -> None:
    assert shutil.which  # the goldens of tests/test_postmortem_report.py render through cmark-gfm above too
    root = Path(__file__).resolve().parent / "golden" / "reports"
    for path in sorted(root.glob("*.md")):
        page = github(path.read_text(encoding="utf-8"))
        assert "<table>" in page and "<img" not in page, path
