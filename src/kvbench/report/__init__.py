"""Reports: pure functions of a stored RunResult (terminal, JSON).

Imports ``results``, ``metrics`` and ``errors`` (plus rich); never ``engine`` or ``runner``.
"""

from kvbench.report.json_report import document, dumps
from kvbench.report.summary import ReportModel, summarize

__all__ = ["ReportModel", "document", "dumps", "summarize"]
