"""Real multi-host pastes: pdsh-prefixed DeepSpeed launcher output of two nodes in one file
(``tests/data/multihost/``, sources in its README).

Each host's lines are read as that host's (the presentation learner's label, an IPv4 address or a
host name), the launchers' start and clean exit are the shared moments, and the offset comes with
its uncertainty — which here is honestly wide: these moments are loose, and none is applied.
All three runs are healthy: the verdict must say so, and no host may be named first to fail.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from forensics.analysis import Analysis, Options, analyze, to_json_dict
from forensics.text_report import render_text

DATA = Path(__file__).resolve().parent / "data" / "multihost"


def run(name: str) -> Analysis:
    return analyze([str(DATA / name)], Options())


def launch_hosts(a: Analysis) -> dict[int, str | None]:
    return {e.attrs["node_rank"]: e.host for e in a.timeline.events if e.kind == "torchrun" and e.attrs.get("launch")}


def test_ip_labelled_pdsh_paste_reads_each_nodes_lines_as_that_node() -> None:
    a = run("aws_batch_mistral_2node.log")
    assert launch_hosts(a) == {0: "10.0.143.177", 1: "10.0.128.14"}
    loss_hosts = {e.host for e in a.timeline.events if e.kind == "progress" and "loss" in e.attrs}
    assert loss_hosts == {"10.0.143.177", "10.0.128.14"}  # both nodes print the loss dicts
    bars = [e for e in a.timeline.events if e.kind == "progress" and "loss" not in e.attrs]
    assert bars and all(e.host is None for e in bars)  # the bars pdsh passed on without a label name no host
    tl = a.timeline
    other = next(h for h in tl.clock_offsets if h != tl.clock_reference)
    off = tl.clock_offsets[other]
    # one launcher start on each node, 0.764 s apart: a single loose moment, not applied
    assert abs(off.offset_s) == pytest.approx(0.764, abs=0.001)
    assert off.n_pairs == 1 and off.uncertainty_s >= 1.0
    assert tl.offsets_applied == {}
    assert a.verdict.root_cause is None and a.verdict.blame is None
    text = render_text(a)
    assert "1 shared moment of launcher start; not applied" in text


def test_kinds_that_disagree_make_the_uncertainty_as_wide_as_their_disagreement() -> None:
    """Polaris: node 1's launcher started 54 s after node 0's (its ssh and Python start), yet its
    workers ended 10.5 s *before* node 0's. No clock skew explains both: the estimate says so."""
    a = run("polaris_allreduce_2node.log")
    assert launch_hosts(a) == {0: "x3211c0s37b0n0", 1: "x3211c0s37b1n0"}
    tl = a.timeline
    assert tl.clock_reference == "x3211c0s37b0n0"
    off = tl.clock_offsets["x3211c0s37b1n0"]
    kinds = {k.kind: k.offset_s for k in tl.clock_evidence["x3211c0s37b1n0"]}
    assert kinds == {"launch": pytest.approx(-53.879, abs=0.001), "clean-exit": pytest.approx(10.495, abs=0.001)}
    assert off.uncertainty_s >= (kinds["clean-exit"] - kinds["launch"]) / 2
    assert abs(off.offset_s) < off.uncertainty_s  # nothing here tells the clocks apart
    assert tl.offsets_applied == {}
    assert a.verdict.root_cause is None and a.verdict.blame is None
    doc = to_json_dict(a)["timeline"]["clock_offsets"]["x3211c0s37b1n0"]
    assert doc["applied_s"] == 0.0 and set(doc["by_kind"]) == {"launch", "clean-exit"}


def test_held_back_two_nodes_that_are_one_machine_come_out_near_zero() -> None:
    """stas00/ml-engineering's emulated 2-node run: worker-0 and worker-1 are one machine, so the
    true offset is 0. Written before the analyzer was run on the file."""
    a = run("mlengineering_emulated_2node.log")
    assert set(launch_hosts(a).values()) == {"worker-0", "worker-1"}
    tl = a.timeline
    other = next(h for h in tl.clock_offsets if h != tl.clock_reference)
    off = tl.clock_offsets[other]
    assert off.n_pairs >= 2
    assert abs(off.offset_s) < 0.01  # the truth, 0, to within 10 ms
    assert abs(off.offset_s) <= off.uncertainty_s  # and the uncertainty covers it
    assert tl.offsets_applied == {}
    assert a.verdict.root_cause is None and a.verdict.blame is None
