# The types of forensics/__init__.py, whose public names are imported on first use (PEP 562).
from forensics.analysis import Analysis as Analysis
from forensics.analysis import Options as Options
from forensics.api import analyze as analyze
from forensics.errors import ForensicsError as ForensicsError
from forensics.events import Event as Event
from forensics.findings import Finding as Finding
from forensics.findings import Verdict as Verdict

__version__: str
__all__ = ["Analysis", "Event", "Finding", "ForensicsError", "Options", "Verdict", "__version__", "analyze"]
