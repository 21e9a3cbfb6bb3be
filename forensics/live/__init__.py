"""The live watcher: what goes wrong, said while the run is still going (docs/live.md).

``forensics record`` starts it as a process of its own (``python -m forensics.live``, see
``__main__.py``); ``forensics watch`` runs it on log files and bundles (``watch_cli.py``). It
reads only what each file appended (:mod:`.follow`, :mod:`.chunks`), keeps a bounded store
(:mod:`.store`), runs the analysis' own verdict over it when something asks for it
(:mod:`.engine`, :mod:`.watcher`) and tells each incident once (:mod:`.alerts`) through the
channels (:mod:`.channels`).
"""
