"""``pack --anonymize``: consistent pseudonyms for who and where, in every file and member name.

* **host names** seen by the recorder or in the bundle (manifest, ``system.json``, NVML headers,
  ``HOSTNAME``, the kernel log's journal ``_HOSTNAME`` and syslog prefixes, a ``Hostname`` in
  ``nvidia-smi -q``) → ``host-01`` …, as whole words; every other host of a URL or of a fully qualified
  name with an internal-looking suffix → ``host-NN.example`` (public project hosts are kept);
* **user names** (``USER``, ``LOGNAME``, home paths anywhere in the inputs) → ``user1`` …, as whole words
  wherever they appear, home paths included;
* **e-mail addresses** → ``userN@example.com``; **IPv4** → ``192.0.2.N``; **IPv6** → ``2001:db8::N``;
  **MAC addresses** → ``02:00:00:00:00:NN`` (documentation and locally administered ranges).

The same name gets the same pseudonym everywhere, so events still line up across hosts. ``127.0.0.1``,
``0.0.0.0``, ``::1`` and ``root`` are kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable

from forensics.ingest.reader import loads_bounded
from forensics.lazy_re import lazy_compile

__all__ = ["Anonymizer", "Edit", "apply_edits", "known_names"]

_IPV4 = lazy_compile(r"(?<![\d.])(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}(?![\d.])")
_H4 = r"[0-9A-Fa-f]{1,4}"
_IPV6 = lazy_compile(r"(?<![0-9A-Za-z:.])(?:(?:" + _H4 + r":){7}" + _H4 + r"|(?:" + _H4 + r":){1,7}:(?:" + _H4
                     + r"(?::" + _H4 + r"){0,6})?|::(?:" + _H4 + r":){0,6}" + _H4 + r")(?:%[0-9A-Za-z]+)?"
                     r"(?![0-9A-Za-z:])")
_MAC = lazy_compile(r"(?<![0-9A-Fa-f:-])[0-9A-Fa-f]{2}([:-])(?:[0-9A-Fa-f]{2}\1){4}[0-9A-Fa-f]{2}(?![0-9A-Fa-f:-])")
_EMAIL = lazy_compile(r"(?<![\w.+-])[A-Za-z0-9][\w.+-]{0,63}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}(?![\w-])")
_HOME = lazy_compile(r"(?P<pre>/home/|/Users/|/u/|C:\\\\?Users\\\\?)(?P<user>[A-Za-z0-9._-]+)")
_URL_HOST = lazy_compile(r"(?i)\b[a-z][a-z0-9+.-]{0,30}://(?:[^/\s@]*@)?(?P<host>[a-z0-9](?:[a-z0-9-]{0,62}"
                         r"[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?)+)")
_INTERNAL = lazy_compile(r"(?i)(?<![\w.-])(?P<host>[a-z0-9](?:[a-z0-9-]{0,62})(?:\.[a-z0-9-]{1,63})*"
                         r"\.(?:internal|local|lan|corp|intra|intranet|localdomain|cluster|home))(?![\w-])")
_SYSLOG_HOST = lazy_compile(r"(?m)^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<host>[A-Za-z0-9][A-Za-z0-9._-]{0,62}) ")
_HOSTNAME_KEY = lazy_compile(r"(?i)(?:_HOSTNAME|\bhostname|<hostname>)[\"']?\s*[:=>]\s*[\"']?(?P<host>[A-Za-z0-9]"
                             r"[A-Za-z0-9._-]{0,62})")
_KEEP_IPS = frozenset({"0.0.0.0", "127.0.0.1", "255.255.255.255", "::1", "::"})
#: hosts of public projects and vendors a report may link to: not anonymized
_PUBLIC = ("github.com", "githubusercontent.com", "pytorch.org", "nvidia.com", "huggingface.co", "pypi.org",
           "python.org", "readthedocs.io", "readthedocs.org", "microsoft.com", "example.com", "example.org",
           "example.net", "kernel.org", "ubuntu.com", "debian.org", "anaconda.org", "conda.io", "wandb.ai",
           "slack.com", "google.com", "googleapis.com", "amazonaws.com", "docker.io", "nvcr.io")

#: (start, end, replacement, kind): one change to a text
Edit = tuple[int, int, str, str]


def _words(names: Iterable[str], after: str) -> re.Pattern[str] | None:
    ordered = sorted(set(names), key=len, reverse=True)
    if not ordered:
        return None
    return re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(map(re.escape, ordered)) + ")" + after)


def _public(host: str) -> bool:
    host = host.lower()
    return any(host == p or host.endswith("." + p) for p in _PUBLIC)


class Anonymizer:
    """Consistent pseudonyms across every file of one archive."""

    def __init__(self, hosts: set[str], users: set[str]) -> None:
        self.hosts = {h: f"host-{i:02d}" for i, h in enumerate(sorted(h for h in hosts if len(h) >= 2), 1)}
        self.users = {u: f"user{i}" for i, u in enumerate(sorted(u for u in users if len(u) >= 2), 1)}
        self.ips: dict[str, str] = {}
        self.ips6: dict[str, str] = {}
        self.emails: dict[str, str] = {}
        self.macs: dict[str, str] = {}
        self.domains: dict[str, str] = {}
        self._host_re = _words(self.hosts, r"(?![A-Za-z0-9_])")
        self._user_re = _words(self.users, r"(?![A-Za-z0-9_-])")

    def _pseudo(self, table: dict[str, str], key: str, make: str) -> str:
        if key not in table:
            table[key] = make.format(n=len(table) + 1)
        return table[key]

    def _ip(self, ip: str) -> str:
        if ip in _KEEP_IPS:
            return ip
        if ":" in ip:
            return self._pseudo(self.ips6, ip.lower(), "2001:db8::{n:x}")
        if ip not in self.ips:
            n = len(self.ips) + 1
            self.ips[ip] = f"192.0.2.{n}" if n < 255 else f"198.51.100.{n % 254 + 1}"  # documentation ranges
        return self.ips[ip]

    def _domain(self, host: str) -> str:
        short = host.split(".")[0]
        if host in self.hosts or short in self.hosts:
            return self.hosts.get(host) or self.hosts[short]
        return self._pseudo(self.domains, host.lower(), "host-{n:02d}.example")

    def edits(self, text: str) -> list[Edit]:
        """The pseudonyms to put into ``text``: non-overlapping (start, end, replacement, kind), in order."""
        found: list[Edit] = []
        for m in _EMAIL.finditer(text):
            found.append((m.start(), m.end(), self._pseudo(self.emails, m.group(0).lower(), "user{n}@example.com"),
                          "e-mail"))
        for m in _URL_HOST.finditer(text):
            host = m.group("host")
            if not _public(host) and not _IPV4.fullmatch(host):
                found.append((m.start("host"), m.end("host"), self._domain(host), "hostname"))
        for m in _INTERNAL.finditer(text):
            found.append((m.start("host"), m.end("host"), self._domain(m.group("host")), "hostname"))
        for m in _HOME.finditer(text):
            found.append((m.start("user"), m.end("user"), self.users.get(m["user"], "user"), "home-path"))
        if self._host_re is not None:
            for m in self._host_re.finditer(text):
                found.append((m.start(), m.end(), self.hosts[m.group(0)], "hostname"))
        if self._user_re is not None:
            for m in self._user_re.finditer(text):
                found.append((m.start(), m.end(), self.users[m.group(0)], "user-name"))
        for m in _MAC.finditer(text):
            mac = m.group(0).lower().replace("-", ":")
            found.append((m.start(), m.end(), self._pseudo(self.macs, mac, "02:00:00:00:00:{n:02x}"), "mac-address"))
        for m in _IPV6.finditer(text):
            if m.group(0).count(":") >= 2 and not re.fullmatch(r"[\d:]+", m.group(0)):
                new = self._ip(m.group(0))
                if new != m.group(0):
                    found.append((m.start(), m.end(), new, "ip-address"))
        for m in _IPV4.finditer(text):
            new = self._ip(m.group(0))
            if new != m.group(0):
                found.append((m.start(), m.end(), new, "ip-address"))
        found.sort(key=lambda e: (e[0], -(e[1] - e[0])))
        out: list[Edit] = []
        for e in found:
            if out and e[0] < out[-1][1]:
                continue
            out.append(e)
        return out

    def apply(self, text: str, counts: Counter[str]) -> str:
        return apply_edits(text, self.edits(text), counts)


def apply_edits(text: str, edits: list[Edit], counts: Counter[str]) -> str:
    """``text`` with each (start, end, replacement, kind) of ``edits`` (in order, not overlapping) made,
    counted per kind."""
    out = []
    pos = 0
    for s, e, repl, kind in edits:
        out.append(text[pos:s])
        out.append(repl)
        counts[kind] += 1
        pos = e
    out.append(text[pos:])
    return "".join(out)


def _hosts_in(text: str) -> set[str]:
    hosts = {m["host"] for m in _SYSLOG_HOST.finditer(text)} | {m["host"] for m in _HOSTNAME_KEY.finditer(text)}
    return {h for h in hosts if not _IPV4.fullmatch(h) and not h.isdigit()}


def known_names(files: Iterable[tuple[str, bytes]]) -> tuple[set[str], set[str]]:
    """Host and user names the recorder saw, from each file's (member name, bytes) — each file is read
    once, by the caller: manifests, ``system.json``, ``env.json``, NVML headers, the kernel log (journal
    ``_HOSTNAME``, syslog prefixes), ``nvidia-smi -q``, and home paths anywhere (first 4 MiB of each)."""
    hosts: set[str] = set()
    users: set[str] = set()
    for name, raw in files:
        base = name.rsplit("/", 1)[-1]
        head = raw[: 4 << 20]
        text = head.decode("utf-8", "replace")
        users |= {m["user"] for m in _HOME.finditer(text)}
        if base in ("kmsg.log", "journal.jsonl", "dmesg.txt", "nvidia-smi-q.xml", "nvidia-smi-q.txt") or \
                base.startswith(("syslog", "messages", "kern")):
            hosts |= _hosts_in(text)
        if base not in ("manifest.json", "system.json", "env.json", "nvml.jsonl"):
            continue
        try:
            data = loads_bounded(text.splitlines()[0] if base == "nvml.jsonl" else text)
        except (ValueError, IndexError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        for key in ("host", "hostname", "HOSTNAME"):
            if isinstance(data.get(key), str) and data[key]:
                hosts.add(data[key].split(".")[0])
                hosts.add(data[key])
        for key in ("USER", "LOGNAME", "USERNAME", "SUDO_USER"):
            if isinstance(data.get(key), str):
                users.add(data[key])
    users -= {"root", "user"}
    hosts -= {"localhost", "host"}
    return hosts, users
