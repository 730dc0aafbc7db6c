"""kvbench.config."""
