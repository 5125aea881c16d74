"""Benchmarks: oncelog against Tansu, produce and consume, driven by several client processes.

Run ``python -m bench --help``. Modules: :mod:`bench.modes` (what is measured: modes, targets,
ratio rows), :mod:`bench.brokers` (starting the brokers), :mod:`bench.workers` (the client
processes), :mod:`bench.runner` (the interleaved cell loop), :mod:`bench.stats` and
:mod:`bench.report` (figures, tables, JSON).
"""
