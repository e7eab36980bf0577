"""Autocomp: LLM-driven beam search that optimizes accelerator kernels, verified on real
evaluators. See DESIGN.md in the project's shared notes for the architecture."""

__version__ = "0.1.0"
