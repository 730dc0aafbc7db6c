"""kvbench.results."""
