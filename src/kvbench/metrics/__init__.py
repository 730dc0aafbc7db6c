"""kvbench.metrics."""
