"""kvbench.runner."""
