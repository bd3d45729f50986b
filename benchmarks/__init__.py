"""Benchmark scripts. Every one writes result files (metrics.json + a markdown table) under --out."""
