"""gpu-forensics: why did my multi-GPU training run die?

The command line is ``forensics``; the library is this package (README, *Python API*)::

    import forensics
    analysis = forensics.analyze("forensics-runs/node1-20261130T140000Z-4242")
    analysis.verdict, analysis.findings, analysis.events_frame(), analysis.metrics_frame()

The names in ``__all__`` are imported when first used (PEP 562 ``__getattr__``), so ``import forensics``
stays as cheap as it was for the recorder, which imports neither the analysis nor pandas. Their types
are in ``__init__.pyi`` (a static import here would also be one for the layer contracts).
"""

from importlib import import_module

__version__ = "0.1.0"
__all__ = ["Analysis", "Event", "Finding", "ForensicsError", "Options", "Verdict", "__version__", "analyze"]

#: public name -> the module that defines it
_EXPORTS = {
    "Analysis": "forensics.analysis", "Options": "forensics.analysis", "analyze": "forensics.api",
    "Event": "forensics.events", "Finding": "forensics.findings", "Verdict": "forensics.findings",
    "ForensicsError": "forensics.errors",
}


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'forensics' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
