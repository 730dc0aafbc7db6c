"""kvbench.workload."""
