"""``forensics mcp``: the analysis served to AI agents over the Model Context Protocol (stdio).

Read-only: five tools (``analyze``, ``report``, ``diff``, ``timeline``, ``explain``) over the inputs under
the directories given with ``--root``, answers redacted as reports are and capped in size. The tools'
work is :mod:`.tools` (plain Python, no SDK); :mod:`.server` registers it with the official ``mcp`` SDK
(the optional extra ``gpu-forensics[mcp]``); :mod:`.cli` is the subcommand.
"""
