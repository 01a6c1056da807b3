"""Extractive question answering (SQuAD v1.1): the reader, the official metric, BERT fine-tuned
with a span head, a span model over frozen features, and saved models that answer questions."""
