"""Tracking: run directories and metric sinks (JSONL, console). Nothing of the training path."""
