"""kvbench.report."""
