"""gpu-forensics: why did my multi-GPU training run die?

The public surface is small: the command line (``forensics``), the headless
analysis façade (:func:`forensics.analysis.analyze`), and the data types in
:mod:`forensics.events`.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
