"""Targets: OpenCL device discovery, Halide target strings and device capabilities."""
