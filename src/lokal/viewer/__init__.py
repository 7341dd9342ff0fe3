"""Watching runs: the trace viewer page (``page``), the stored traces (``store``), the
OpenTelemetry export (``otlp``) and ``lokal serve``'s ``/traces`` routes (``routes``).

``page``, ``store`` and ``otlp`` read traces and events only; ``routes`` stands on FastAPI
and is imported by ``lokal.serve.app`` alone. Nothing is imported here, so that importing
one of them does not load the others.
"""
