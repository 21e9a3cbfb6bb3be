"""Build a producer's message catalogue from its raw entries and its mapping rules (docs/catalogs.md).

    python tools/catalogs/build.py PRODUCER --raw raw.json            # write forensics/catalogs/PRODUCER.jsonl
    python tools/catalogs/build.py PRODUCER --snapshot DIR [--check]  # run the extractor on a snapshot first
    python tools/catalogs/build.py PRODUCER --check                   # rebuild from the shipped raw fields

Raw entries are what an extractor (``tools/catalogs/<producer>.py``, a function ``extract(root: Path) ->
list[dict]``) read from the producer's source: ``id``, ``format``, ``text``, ``where``, ``level`` and,
where known, ``code`` and ``versions``. The rules (``tools/catalogs/rules/<producer>.toml``) give each
entry its ``severity``, ``class`` and ``signature``: ``[[rule]]`` tables tried in order (the first whose
conditions all hold wins), then ``[[override]]`` tables by id. An entry no rule maps is an error: every
message the producer defines is mapped on purpose, none by default.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the engine's own idea of "matchable" (forensics/catalogs/text.py), no install needed
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the extractors share tools/catalogs/csource.py
from forensics.catalogs.text import MIN_FIXED, fixed_chars, match_line  # noqa: E402

CATALOGS = ROOT / "forensics" / "catalogs"
RULES = Path(__file__).resolve().parent / "rules"
HERE = Path(__file__).resolve().parent

RAW_FIELDS = ("id", "format", "text", "where", "level", "code", "versions")
MAPPED_FIELDS = ("severity", "class", "signature", "matchable")
FIELD_ORDER = ("id", "format", "text", "where", "level", "code", "versions", "severity", "class", "signature",
               "matchable")
SEVERITIES = ("error", "warning", "info")
_RULE_KEYS = {"text", "format", "where", "level", "id", "code", "severity", "class", "signature", "note"}


def matchable(text: str) -> bool:
    return fixed_chars(match_line(text)) >= MIN_FIXED


def _rule_holds(rule: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    for key in ("text", "format", "where", "id", "code"):
        if key in rule and not re.search(rule[key], str(entry.get(key, "")), re.S):
            return False
    if "level" in rule:
        levels = rule["level"] if isinstance(rule["level"], list) else [rule["level"]]
        if entry.get("level") not in levels:
            return False
    return True


def apply_rules(raw: Sequence[Mapping[str, Any]], rules: Mapping[str, Any]) -> list[dict[str, Any]]:
    classes = {c["id"] for c in rules.get("class", [])}
    overrides = {o["id"]: o for o in rules.get("override", [])}
    for rule in rules.get("rule", []):
        unknown = set(rule) - _RULE_KEYS
        if unknown:
            raise SystemExit(f"rule {rule}: unknown keys {sorted(unknown)}")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for entry in raw:
        if entry["id"] in seen:
            raise SystemExit(f"duplicate message id {entry['id']!r}")
        seen.add(entry["id"])
        mapped = {k: entry[k] for k in RAW_FIELDS if entry.get(k) not in (None, "", [])}
        rule = next((r for r in rules.get("rule", []) if _rule_holds(r, entry)), None)
        chosen: dict[str, Any] = dict(rule) if rule else {}
        chosen.update(overrides.get(entry["id"], {}))
        if "severity" not in chosen:
            raise SystemExit(f"no rule maps {entry['id']!r} ({entry['where']}): {entry['format'][:120]!r}")
        if chosen["severity"] not in SEVERITIES:
            raise SystemExit(f"{entry['id']}: severity {chosen['severity']!r} is not one of {SEVERITIES}")
        mapped["severity"] = chosen["severity"]
        if chosen.get("class"):
            mapped["class"] = chosen["class"]
        elif chosen["severity"] != "info":
            raise SystemExit(f"{entry['id']}: an {chosen['severity']} message needs a class")
        if chosen.get("signature"):
            mapped["signature"] = chosen["signature"]
        if not matchable(entry["text"]):
            mapped["matchable"] = False
        out.append(mapped)
    known = classes | _classes_elsewhere(rules.get("catalog", {}).get("producer", ""))
    for m in out:
        if m.get("class") and m["class"] not in known:
            raise SystemExit(f"{m['id']}: class {m['class']!r} is defined in no catalogue")
    return out


def _classes_elsewhere(producer: str) -> set[str]:
    ids: set[str] = set()
    for path in sorted(RULES.glob("*.toml")):
        if path.stem != producer:
            ids |= {c["id"] for c in tomllib.loads(path.read_text()).get("class", [])}
    return ids


def render(rules: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> str:
    """The catalogue as JSON lines: the header, then one line per class, then one per message (a diff
    shows each message that changed on its own line; loading is a ``json.loads`` per line)."""
    header = dict(rules["catalog"])
    header["count"] = len(messages)
    header["note"] = (f"Generated by tools/catalogs/build.py from {header.get('extractor', 'its extractor')} and "
                      f"tools/catalogs/rules/{header['producer']}.toml: do not edit; see docs/catalogs.md.")
    lines = [json.dumps({"catalog": header}, ensure_ascii=False)]
    lines += [json.dumps({"class": cls}, ensure_ascii=False) for cls in rules.get("class", [])]
    for m in messages:
        ordered = {k: m[k] for k in FIELD_ORDER if k in m}
        ordered.update((k, v) for k, v in m.items() if k not in ordered)
        lines.append(json.dumps({"message": ordered}, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def _load_extractor(producer: str) -> Any:
    path = HERE / f"{producer}.py"
    spec = importlib.util.spec_from_file_location(f"catalog_extractor_{producer}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"no extractor {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def shipped_raw(producer: str) -> list[dict[str, Any]]:
    """The raw fields of the shipped catalogue's messages (a catalogue written as TOML by an earlier
    builder is read too, so it can be rewritten)."""
    path = CATALOGS / f"{producer}.jsonl"
    if path.is_file():
        messages = [obj["message"] for line in path.read_text().splitlines()
                    if line.strip() and "message" in (obj := json.loads(line))]
    else:
        messages = tomllib.loads((CATALOGS / f"{producer}.toml").read_text()).get("message", [])
    return [{k: m[k] for k in RAW_FIELDS if k in m} for m in messages]


def build(producer: str, raw: Sequence[Mapping[str, Any]]) -> str:
    rules = tomllib.loads((RULES / f"{producer}.toml").read_text())
    return render(rules, apply_rules(raw, rules))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("producer")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--raw", type=Path, help="raw entries as JSON (a list of objects)")
    src.add_argument("--snapshot", type=Path, help="a checkout or export of the producer's source at the pin")
    ap.add_argument("--check", action="store_true", help="compare with the shipped catalogue, write nothing")
    args = ap.parse_args(argv)
    if args.raw:
        raw = json.loads(args.raw.read_text())
    elif args.snapshot:
        raw = _load_extractor(args.producer).extract(args.snapshot)
    else:
        raw = shipped_raw(args.producer)
    text = build(args.producer, raw)
    target = CATALOGS / f"{args.producer}.jsonl"
    if args.check:
        same = target.is_file() and target.read_text() == text
        print(f"{args.producer}: {'identical' if same else 'DIFFERS from'} {target.relative_to(ROOT)}")
        return 0 if same else 1
    target.write_text(text)
    legacy = CATALOGS / f"{args.producer}.toml"
    if legacy.is_file():
        legacy.unlink()
    count = text.count('{"message":')
    print(f"{args.producer}: {count} messages -> {target.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
