"""The producers' message catalogues (docs/catalogs.md): shipped files, the builder, the matcher, the probes."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from forensics.catalogs.matching import match_texts, notable_literals
from forensics.catalogs.model import CatalogError, all_classes, parse_catalog, shipped
from forensics.catalogs.text import fragments, holds_in_order, key_literal, match_line, pieces
from forensics.evaluation.probes import read_probes, run_probe
from forensics.match import load_signatures
from forensics.match.literal_index import LiteralIndex

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "tools" / "catalogs" / "rules"
PROBES = ROOT / "tests" / "data" / "catalogs"
SIGNATURE_IDS = {p.stem for p in (ROOT / "signatures").glob("*.toml")}
PRODUCERS = sorted(p.stem for p in RULES.glob("*.toml"))


def _builder():  # tools/ is not a package: load the builder by path, as its users run it
    spec = importlib.util.spec_from_file_location("catalog_build", ROOT / "tools" / "catalogs" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_rules_file_has_its_catalogue_and_no_catalogue_is_orphaned() -> None:
    shipped_names = {p.stem for p in (ROOT / "forensics" / "catalogs").glob("*.jsonl")}
    assert shipped_names == set(PRODUCERS)
    assert [c.producer for c in shipped()] == sorted(shipped_names)


@pytest.mark.parametrize("producer", PRODUCERS)
def test_the_catalogue_is_what_its_rules_make_of_its_raw_entries(producer: str) -> None:
    """Drift, the half that runs anywhere: no hand edit, and the rules reproduce every mapping. (The other
    half, the extractor against the pinned snapshot, is `build.py PRODUCER --snapshot DIR --check`.)"""
    build = _builder()
    shipped_text = (ROOT / "forensics" / "catalogs" / f"{producer}.jsonl").read_text()
    assert build.build(producer, build.shipped_raw(producer)) == shipped_text


@pytest.mark.parametrize("producer", PRODUCERS)
def test_the_catalogue_is_pinned_and_says_where_it_came_from(producer: str) -> None:
    header = json.loads((ROOT / "forensics" / "catalogs" / f"{producer}.jsonl").read_text().split("\n", 1)[0])
    header = header["catalog"]
    assert header["source"].startswith("https://"), header["source"]
    assert re.fullmatch(r"[0-9a-f]{40}", header["commit"]), "the pin is a full commit (or artefact) hash"
    assert header["version"] and header["extracted"] and header["extractor"].startswith("tools/catalogs/")
    assert (ROOT / header["extractor"]).is_file()
    assert header["markers"], "short messages need marker words to be matched at all"


def test_ids_are_unique_and_every_mapping_points_somewhere_real() -> None:
    ids: set[str] = set()
    classes = all_classes()
    for cat in shipped():
        for m in cat.messages:
            assert m.id not in ids, f"duplicate message id {m.id}"
            ids.add(m.id)
            assert m.id.startswith(cat.producer + "."), m.id
            if m.severity != "info":
                assert m.class_id in classes, f"{m.id}: class {m.class_id!r} is defined nowhere"
            if m.signature is not None:
                assert m.signature in SIGNATURE_IDS, f"{m.id}: no signature {m.signature!r}"
    per_catalogue = [cid for cat in shipped() for cid in cat.classes]
    assert len(per_catalogue) == len(set(per_catalogue)), "class ids are unique across catalogues"


def test_a_malformed_catalogue_is_named_with_its_line() -> None:
    with pytest.raises(CatalogError, match=r"x\.jsonl:2: not JSON"):
        parse_catalog(['{"catalog": {"producer": "p", "title": "P"}}', "{oops"], "x.jsonl")
    with pytest.raises(CatalogError, match="first line must be the catalogue's header"):
        parse_catalog(['{"message": {"id": "p.a", "text": "t", "severity": "error"}}'], "y.jsonl")
    with pytest.raises(CatalogError, match="severity 'fatal'"):
        parse_catalog(['{"catalog": {"producer": "p", "title": "P"}}',
                       '{"message": {"id": "p.a", "text": "t", "severity": "fatal"}}'], "z.jsonl")


# -- what a message's text becomes ------------------------------------------------------------------------

def test_fragments_pieces_and_the_key() -> None:
    assert fragments("NET/IB : Got completion from peer {} with status={} opcode={}") == [
        "NET/IB : Got completion from peer ", " with status=", " opcode=", ""]
    assert fragments("a {{literal}} {}") == ["a {literal} ", ""]
    assert pieces("Timed out after {} seconds waiting for {} clients") == (
        "Timed out after", "seconds waiting for", "clients")
    assert key_literal("Timed out after {} seconds waiting for {} clients") == "seconds waiting for"
    # a text with line breaks is matched by the line with the most fixed text
    assert match_line("NCCL error in: {}:{}, {}\n{}") == "NCCL error in: {}:{}, {}"


def test_pieces_in_order_on_one_line() -> None:
    parts = pieces("peer {} closed connection after {} bytes")
    assert holds_in_order(parts, "x peer 10.0.0.2<3456> closed connection after 42 bytes y")
    assert not holds_in_order(parts, "closed connection after 42 bytes from peer 10.0.0.2")  # wrong order
    assert not holds_in_order(("ab", "bc"), "abc")  # pieces may not overlap


def test_a_long_line_of_near_misses_is_linear() -> None:
    """No regular expression: pieces found one after the other, so a hostile line costs one pass."""
    parts = pieces("{} a {} a {} a {} a {} a {} a {} b")
    line = "a " * 200_000
    assert not holds_in_order(parts, line)


# -- matching events --------------------------------------------------------------------------------------

def _hits(*texts: str) -> dict[int, str]:
    from forensics.catalogs.matching import keys

    index = LiteralIndex(list(texts), keys())
    candidates = {k.lower(): index.positions((k,)) for k in keys()}
    return {p: hits[0].message.id for p, hits in match_texts(list(texts), candidates).items()}


def test_a_producer_line_is_found_with_its_values_and_prefix() -> None:
    line = ("node3:2281:2301 [2] transport/net_socket.cc:496 NCCL WARN NET/Socket : peer 10.0.0.4<41234> message "
            "truncated : receiving 1048576 bytes instead of 65536. If you believe your socket network is in a "
            "healthy state, there may be a mismatch in collective sizes or environment settings")
    found = _hits(line)
    assert found[0].startswith("nccl."), found


def test_a_short_message_counts_only_beside_its_producers_marker() -> None:
    """'invalid argument' is CUDA's text for error 1, and any program's: only a CUDA line is CUDA's."""
    found = _hits("RuntimeError: CUDA error: invalid argument", "OSError: [Errno 22] invalid argument")
    assert found.get(0, "").startswith("cuda.") and 1 not in found


def test_the_most_specific_wording_wins() -> None:
    found = _hits("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert found[0] == "cuda.runtime.illegal-address"


def test_a_wrapped_cause_decides_over_its_wrapper() -> None:
    """PyTorch's cudaGetDeviceCount() wrapper holds CUDA's own error: the wrapped one names what failed."""
    found = _hits("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
                  "before calling NumCudaDevices() that might have already set an error? Error 802: system not "
                  "yet initialized")
    assert found[0] == "cuda.runtime.system-not-ready"


def test_the_key_literals_make_a_chatty_logs_lines_into_events() -> None:
    literals = notable_literals()
    assert "system not yet initialized" in literals
    assert all(len(lit) >= 3 for lit in literals)


# -- probes: a producer's message as a real line, through the whole analysis -------------------------------

#: Probes whose line the analysis answers with another verdict than the catalogue's, each for a reason.
KNOWN = {
    # a signature of its own knows the line and is more specific than the class the probe expects
    "pytorch.nccl.failure-detected-watchdog-work-sequence-id": "nccl-watchdog-timeout",
    "pytorch.nccl.failure-detected-watchdog-work-sequence-id@2.4": "nccl-watchdog-timeout",
    "pytorch.nccl.process-group-watchdog-thread-terminated-exception": "cuda-illegal-memory-access",
    "pytorch.elastic-errors.exitcode-pid": "worker-killed-signal",
    "pytorch.elastic-mp.failed-exitcode-local-rank-pid-binary": "worker-killed-signal",
    "nvml.nvidia-smi.device-handle": "driver-hang",
    "nvml.nvidia-smi.device-handle-lowercase": "driver-hang",
    "nvml.nvidia-smi.device-handle-no-space": "driver-hang",
    "nvml.nvidia-smi.number-of-devices": "driver-hang",
}


def _probes() -> list[tuple[str, dict[str, object]]]:
    return [(p.parent.name, probe) for p in sorted(PROBES.glob("*/probes.jsonl")) for probe in read_probes(p)]


@pytest.fixture(scope="module")
def signatures():  # type: ignore[no-untyped-def]
    return load_signatures()


@pytest.mark.slow
@pytest.mark.parametrize("producer", PRODUCERS)
def test_the_probes_of_each_producer_are_called_failures(producer: str, signatures) -> None:  # type: ignore[no-untyped-def]
    """Coverage as a user meets it: of the producer's error messages drawn at random (and a few real lines),
    at least 90 % get a failure verdict, and every one that gets the verdict its probe names does so for the
    reason the catalogue gives (or a known, more specific signature)."""
    probes = [p for prod, p in _probes() if prod == producer]
    assert len(probes) >= 29, "a probe set per catalogue"
    outcomes = [run_probe(p, producer, signatures) for p in probes]
    errors = [o for o in outcomes if not o._quiet_class()]
    found = sum(o.failure_found for o in errors)
    assert found >= 0.9 * len(errors), [(o.message, o.got) for o in errors if not o.failure_found]
    for o in outcomes:
        if o.message in KNOWN:
            assert o.got == KNOWN[o.message], o


def test_the_nccl_ras_report_of_ranks_at_different_operation_counts_is_a_desync(tmp_path: Path) -> None:
    """NCCL's RAS client (ncclras) asks every rank how far it got; ranks that launched different numbers of
    a collective took different code paths. Written here from the client's own formats (src/ras/
    client_support.cc at the pinned commit) with made-up values: no real report of this shape was reached."""
    from forensics.analysis import Options, analyze

    report = tmp_path / "ncclras.txt"
    report.write_text(
        "#0-0 (7a2b91c04d1e5f3a) MISMATCH\n"
        "  Communicator ranks have different AllGather operation counts\n"
        "  15 ranks have launched up to operation 641\n"
        "  Rank 9 has launched up to operation 640 -- GPU 1 managed by process 48213 on node gpu-node-2\n")
    verdict = analyze([str(report)], Options()).verdict
    assert verdict.root_cause is not None and verdict.root_cause.signature == "nccl-desync"
