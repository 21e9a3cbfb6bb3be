"""Producers' message catalogues: every error and warning NCCL, PyTorch, CUDA, the NVIDIA driver, DCGM …
define, taken from their own source at a pinned version, mapped to a signature or a producer-level class
(docs/catalogs.md). :mod:`.model` reads them, :mod:`.matching` finds them in events, :mod:`.text` turns a
message's text into what is matched.
"""
