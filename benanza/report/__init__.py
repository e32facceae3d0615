"""Report writers: they only format a ``benanza.analyze.Report`` (terminal, JSON, HTML, trace)."""

from benanza.report.csv_report import to_csv, write_csv
from benanza.report.html import to_html, write_html
from benanza.report.json_report import to_json, write_json
from benanza.report.terminal import print_report
from benanza.report.trace import trace_events, write_trace

__all__ = ["print_report", "to_csv", "to_html", "to_json", "trace_events", "write_csv", "write_html", "write_json",
           "write_trace"]
