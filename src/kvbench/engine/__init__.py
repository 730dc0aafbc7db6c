"""kvbench.engine."""
