"""Log-format parsers: one module per format at this level (``dmesg``, ``journalctl``, ``nvidia_smi_q`` …).

Installed as ``forensics.parsers``. :mod:`.registry` lists them in detection order; :mod:`.common` holds
what several formats share (the parser contract in :mod:`.common.base`, line templates, the big-log
pre-pass); :mod:`.producers` reads one program's records wherever they appear (PyTorch's c10d, NCCL,
Python tracebacks, torchrun, Slurm, the kernel's messages, stack dumps). Importing this package imports
no parser.
"""
