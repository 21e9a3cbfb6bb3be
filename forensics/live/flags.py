"""The alerting flags ``forensics record``, ``forensics watch`` and the recorder's watcher process share.

Light on purpose (argparse only): ``forensics record`` reads these flags before it starts the
child, and hands them to the watcher process as arguments (:func:`alert_argv`).
"""

from __future__ import annotations

import argparse
import importlib.util

from forensics.errors import UsageError

__all__ = ["add_alert_flags", "alert_argv", "apprise_installed", "bad_notify_url", "check_alert_flags"]


def apprise_installed() -> bool:
    return importlib.util.find_spec("apprise") is not None


def bad_notify_url(url: str) -> str | None:
    """Why ``url`` cannot be an Apprise URL at all (None: it has the shape of one)."""
    scheme, sep, rest = url.partition("://")
    if not sep or not scheme or not rest or not scheme.replace("+", "").replace("-", "").isalnum():
        return f"--notify wants an Apprise URL such as json://host:port/path, slack://…, ntfy://topic; got {url!r}"
    return None


def add_alert_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("alerts (the live watcher)")
    g.add_argument("--stall-after", type=float, metavar="SECONDS",
                   help="tell a stall (no progress, a rank or GPU idle while its peers work) after this long "
                        "(default: max(60 s, 5 x the median step interval seen so far))")
    g.add_argument("--pause-max", type=float, default=1800.0, metavar="SECONDS",
                   help="after a line that says the run saves a checkpoint or evaluates, a silence is not a "
                        "stall for this long (default 1800)")
    g.add_argument("--notify", action="append", default=[], metavar="URL",
                   help="also send each alert to this Apprise URL (json://host:port/path, slack://…, ntfy://…, "
                        "mailto://…; repeatable; needs the 'live' extra)")
    g.add_argument("--notify-cmd", action="append", default=[], metavar="CMD",
                   help="also run CMD (a shell command) for each alert, with the alert as JSON on its stdin "
                        "(repeatable)")
    g.add_argument("--cpu-budget", type=float, default=0.05, metavar="FRACTION",
                   help="the watcher's share of one core, over a minute (default 0.05)")


def check_alert_flags(args: argparse.Namespace) -> None:
    """Bad values: one clear line (a UsageError), before anything starts."""
    stall = args.stall_after
    if stall is not None and not 1 <= stall <= 7 * 86400:
        raise UsageError(f"--stall-after must be between 1 s and 7 days, got {stall:g}")
    if not 0 <= args.pause_max <= 7 * 86400:
        raise UsageError(f"--pause-max must be between 0 and 7 days, got {args.pause_max:g}")
    if not 0.001 <= args.cpu_budget <= 1:
        raise UsageError(f"--cpu-budget is a share of one core between 0.001 and 1, got {args.cpu_budget:g}")
    for url in args.notify:
        why = bad_notify_url(url)
        if why:
            raise UsageError(why)
    if args.notify and not apprise_installed():
        raise UsageError("--notify needs Apprise: pip install 'gpu-forensics[live]' (or use --notify-cmd)")
    for cmd in args.notify_cmd:
        if not cmd.strip():
            raise UsageError("--notify-cmd wants a command")


def alert_argv(args: argparse.Namespace) -> list[str]:
    """The flags again, as arguments for the watcher process."""
    out = ["--pause-max", repr(float(args.pause_max)), "--cpu-budget", repr(float(args.cpu_budget))]
    if args.stall_after is not None:
        out += ["--stall-after", repr(float(args.stall_after))]
    for url in args.notify:
        out += ["--notify", url]
    for cmd in args.notify_cmd:
        out += ["--notify-cmd", cmd]
    return out
