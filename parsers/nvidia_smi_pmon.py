"""``nvidia-smi pmon``: per-process rows (``gpu pid type sm mem … command``), maybe with ``-o DT``.

Each process seen on a GPU gives one ``gpu-info`` event (first sighting, with its utilisation
then); this maps the pids of Xid lines and framework logs to GPUs.
"""

from __future__ import annotations

from collections.abc import Iterator

from forensics.parsers.common.base import ParseContext, Record
from forensics.parsers.common.nvidia_smi_common import number, smi_event
from forensics.parsers.nvidia_smi_dmon import DMON_HEADER, columns_of, row_stamp, table_rows

from forensics.ingest.textdoc import TextDocument

__all__ = ["PARSER"]


class NvidiaSmiPmonParser:
    name = "nvidia-smi-pmon"
    samples = (
        # Shape: `nvidia-smi pmon` (header/unit lines as the nvidia-smi documentation shows them).
        """# gpu         pid   type     sm    mem    enc    dec    jpg    ofa    command
# Idx           #    C/G      %      %      %      %      %      %    name
    0       4321     C     98     41      -      -      -      -    python
    1       4322     C     97     38      -      -      -      -    python
    1          -     -      -      -      -      -      -      -    -
""",
        # Shape: `nvidia-smi pmon -o DT`.
        """#Date       Time        gpu        pid  type    sm   mem   enc   dec   command
#YYYYMMDD   HH:MM:SS    Idx          #   C/G     %     %     %     %   name
 20241114   10:11:10      0       4321     C    98    41     -     -   python train.py
""",
    )

    def detect(self, head: list[str]) -> float:
        for h in head[:5]:
            if DMON_HEADER.match(h.strip()) and "pid" in columns_of(h):
                return 0.95
        return 0.0

    def parse(self, doc: TextDocument, ctx: ParseContext) -> Iterator[Record]:
        seen: set[tuple[str, int]] = set()
        for line, cells in table_rows(doc, "pid"):
            gpu, pid_text = cells.get("gpu", ""), cells.get("pid", "")
            if not (gpu.isdigit() and pid_text.isdigit()):
                continue
            pid = int(pid_text)
            if (gpu, pid) in seen:
                continue
            seen.add((gpu, pid))
            ts, ts_source = row_stamp(cells, ctx)
            process = cells.get("command", "")
            attrs = {"tool": self.name, "pid": pid, "process": process, "type": cells.get("type"),
                     "sm_pct": number(cells.get("sm")), "mem_pct": number(cells.get("mem"))}
            yield smi_event(ctx, ctx.origin(line), "gpu-info", f"process {process} (pid {pid}) on GPU {gpu}",
                            ts=ts, ts_source=ts_source, gpu=gpu, attrs=attrs)


PARSER = NvidiaSmiPmonParser()
