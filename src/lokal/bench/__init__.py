"""Evaluation: batch benchmark, BFCL evaluation, reports."""
