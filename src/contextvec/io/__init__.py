"""File formats: bilm-tf weights, contextvec's native format, embedding outputs."""
