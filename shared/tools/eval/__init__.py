"""Measurement of ragbus: retrieval and answer quality on an outside dataset (fitz-gov),
grader calibration, and the helpers the benchmarks under ``bench/`` share.

Library code only: nothing here prints; the commands in ``bench/`` and ``ragbus eval``
report.
"""
