"""Classic syslog files (``/var/log/syslog``, ``/var/log/messages``, ``kern.log``).

RFC 3164 lines ``Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: ...`` (no year, day
space-padded; the kernel's uptime stamp often kept inside the message, which then anchors
boot-relative logs), rsyslog's ``#012``-escaped newlines (one multi-line record), grep's
``/var/log/syslog:`` prefixes, and RSYSLOG_FileFormat high-precision ISO stamps
(``2024-03-03T10:11:12.123456+00:00 host kernel: ...``). The line reader is shared with
journalctl (parsers/journalctl.py); :func:`~forensics.parsers.journalctl.flavour` decides
which of the two kinds a file is.
"""

from __future__ import annotations

from forensics.parsers.common.base import ParseContext
from forensics.parsers.common.kernlog import KernelLogParser
from forensics.parsers.journalctl import SyslogReader, flavour_detector

__all__ = ["PARSER"]


def _reader(ctx: ParseContext) -> SyslogReader:
    return SyslogReader(ctx)


PARSER = KernelLogParser(
    name="syslog",
    samples=(
        # stackhpc/ansible-collection-... #287: rsyslog's "#012" escapes in /var/log/messages
        "Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version 535.54.03, but#012NVRM: this "
        "kernel module has the version 530.30.02.  Please#012NVRM: make sure that this kernel module and all NVIDIA "
        "driver#012NVRM: components have the same version.\n",
        # pop-os/pop#3363: the kernel's uptime stamp kept inside the syslog message
        "Sep 19 16:18:02 bubz kernel: [68183.615790] pcieport 0000:00:03.1: AER: Correctable error message received "
        "from 0000:00:00.0\n"
        "Sep 19 16:18:02 bubz kernel: [68183.615810] pcieport 0000:00:03.1: PCIe Bus Error: severity=Correctable, "
        "type=Data Link Layer, (Transmitter ID)\n",
    ),
    reader=_reader,
    detect=flavour_detector("syslog"),
)
