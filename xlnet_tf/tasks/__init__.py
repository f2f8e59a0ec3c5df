"""Tasks: each composes the backbone with its data, heads, loss and metrics."""
