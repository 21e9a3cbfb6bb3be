"""Binary Windows event logs (``.evtx``) turned into the XML text the Windows-event parsers read.

Read through the ``evtx`` package (Rust-backed). The text starts with :data:`MARKER`, which the
``windows-evtx`` parser (``parsers/windows_evtx.py``) claims.
"""

from __future__ import annotations

import io

from forensics.lazy_re import lazy_compile

__all__ = ["EVTX_MAGIC", "MARKER", "evtx_to_xml", "is_evtx"]

EVTX_MAGIC = b"ElfFile\x00"
MARKER = "<!-- gpu-forensics: records of a binary .evtx file, converted to XML -->"
_XML_DECL = lazy_compile(rb"^\s*<\?xml[^>]*\?>\s*")
_MAX_RECORD_ERRORS = 20


def is_evtx(raw: bytes) -> bool:
    return raw.startswith(EVTX_MAGIC)


def evtx_to_xml(raw: bytes) -> tuple[bytes, list[str]]:
    """The records of an ``.evtx`` file as XML text (``MARKER`` line, then ``<Events>``), and
    warnings for what could not be read. Never raises: a corrupt chunk costs its records."""
    warnings: list[str] = []
    out = [MARKER.encode(), b"<Events>"]
    try:
        import evtx
    except ImportError:
        return b"", ["the evtx package is not installed; cannot read .evtx files (pip install evtx)"]
    try:
        records = evtx.PyEvtxParser(io.BytesIO(raw)).records()
    except (OSError, RuntimeError, ValueError) as exc:
        return b"", [f"unreadable .evtx file ({exc})"]
    errors = 0
    count = 0
    while True:
        try:
            rec = next(records)
        except StopIteration:
            break
        except Exception as exc:  # the binding raises RuntimeError per bad chunk, then goes on
            errors += 1
            if errors <= 3:
                warnings.append(f"unreadable .evtx chunk skipped ({str(exc)[:200]})")
            if errors >= _MAX_RECORD_ERRORS:
                warnings.append("too many unreadable .evtx chunks; stopped reading")
                break
            continue
        xml = rec.get("data") if isinstance(rec, dict) else None
        if not isinstance(xml, str):
            continue
        out.append(_XML_DECL.sub(b"", xml.encode("utf-8", errors="replace")).rstrip())
        count += 1
    out.append(b"</Events>")
    if count == 0 and not warnings:
        warnings.append(".evtx file holds no readable records (empty or cut before its first chunk ended)")
    return b"\n".join(out) + b"\n", warnings
