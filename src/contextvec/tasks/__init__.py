"""Downstream tasks on frozen encoders: task data readers, a feature cache, linear probes."""
