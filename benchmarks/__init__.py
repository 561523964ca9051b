"""Benchmarks of FaithJudge: each module runs as ``python -m benchmarks.NAME`` (see README.md).

Tests never time anything; these scripts do. Every benchmark prints a human summary and writes
``benchmarks/results/NAME.json`` with its numbers and the facts of the machine it ran on.
"""
