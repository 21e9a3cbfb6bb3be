"""The registry of log-format parsers: the explicit tuple that orders them, and detection.

Detection asks each parser for a confidence from the file's first lines and takes the best;
on a tie the earlier entry wins, so specific formats come before generic ones
(the cross-matching test in tests/test_parsers.py keeps this order honest).
"""

from __future__ import annotations

from forensics.parsers import (
    bundle_manifest,
    dcgm_hostengine,
    dcgmi,
    dcgmi_health,
    dcgmi_json,
    dmesg,
    dmesg_ctime,
    dmesg_delta,
    dmesg_iso,
    elastic_error_file,
    flight_recorder,
    journal_json,
    journalctl,
    k8s_device_plugin,
    kmsg,
    lspci,
    lspci_tree,
    nvidia_bug_report,
    nvidia_smi,
    nvidia_smi_csv,
    nvidia_smi_dmon,
    nvidia_smi_pmon,
    nvidia_smi_q,
    nvidia_smi_topo,
    nvidia_smi_xml,
    nvml_events,
    nvml_samples,
    plaintext,
    process_output,
    slurm_daemon_log,
    stack_dumps,
    syslog,
    talos,
    windbg,
    windows_event_csv,
    windows_event_powershell,
    windows_event_text,
    windows_event_xml,
    windows_evtx,
)
from forensics.parsers.common.base import Parser

__all__ = ["PARSERS", "detect", "parser_by_name"]

PARSERS: tuple[Parser, ...] = (
    # Specific formats first; each module exposes one PARSER.
    # The recorder bundle's own files (exact format markers on the first line).
    bundle_manifest.PARSER,
    nvml_samples.PARSER,
    nvml_events.PARSER,
    # Windows event logs and NVIDIA tools (most specific markers first).
    windows_evtx.PARSER,
    nvidia_bug_report.PARSER,
    windows_event_xml.PARSER,
    windows_event_csv.PARSER,
    windows_event_text.PARSER,
    windows_event_powershell.PARSER,
    windbg.PARSER,
    nvidia_smi_xml.PARSER,
    nvidia_smi_q.PARSER,
    nvidia_smi_topo.PARSER,
    nvidia_smi_dmon.PARSER,
    nvidia_smi_pmon.PARSER,
    nvidia_smi_csv.PARSER,
    dcgmi.PARSER,
    dcgmi_health.PARSER,
    dcgmi_json.PARSER,
    dcgm_hostengine.PARSER,
    lspci_tree.PARSER,
    lspci.PARSER,
    k8s_device_plugin.PARSER,
    nvidia_smi.PARSER,
    # Linux kernel logs (specific shapes before the generic dmesg, which also reads bare lines).
    journal_json.PARSER,
    kmsg.PARSER,
    talos.PARSER,
    dmesg_iso.PARSER,
    dmesg_ctime.PARSER,
    dmesg_delta.PARSER,
    syslog.PARSER,
    journalctl.PARSER,
    dmesg.PARSER,
    # Slurm's daemon logs (slurmd.log, slurmctld.log: bracketed ISO stamps and Slurm's own words).
    slurm_daemon_log.PARSER,
    # What a training job prints: the JSON error file, NCCL_DEBUG files, Slurm output, then any process output.
    elastic_error_file.PARSER,
    flight_recorder.PARSER,
    # Stack dumps of live processes (py-spy, faulthandler, gdb): hang evidence.
    stack_dumps.PY_SPY_PARSER,
    stack_dumps.GDB_PARSER,
    stack_dumps.FAULTHANDLER_PARSER,
    process_output.NCCL_DEBUG_PARSER,
    process_output.SLURM_PARSER,
    process_output.PARSER,
    plaintext.PARSER,  # always last: the catch-all
)


def detect(head: list[str], exclude: tuple[str, ...] = ()) -> tuple[Parser, float]:
    """The parser that claims ``head`` most confidently (ties go to the earlier entry), leaving out
    the parsers named in ``exclude`` (a container format asking about its own sections)."""
    best, best_score = PARSERS[-1], -1.0
    for parser in PARSERS:
        if parser.name in exclude:
            continue
        try:
            score = parser.detect(head)
        except Exception:  # a detector bug must not stop the analysis
            score = 0.0
        if score > best_score:
            best, best_score = parser, score
    return best, best_score


def parser_by_name(name: str) -> Parser:
    for parser in PARSERS:
        if parser.name == name:
            return parser
    raise KeyError(name)
