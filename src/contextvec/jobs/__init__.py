"""The jobs the command line offers, one call each (the use-case layer): each takes one frozen
settings object, validated when it is made, does the whole job with the rooms below (reads the
data, loads the encoder, runs) and returns a result with everything a command prints or writes.
The commands parse, build the settings, call and render; Python users make the same calls.

- :mod:`.train_task`: ``run_train_task`` (``contextvec train-task``);
- :mod:`.predict`: ``run_predict`` (``contextvec predict``);
- :mod:`.probes`: ``run_pos_probe``, ``run_wsd``, ``run_neighbours`` (``contextvec probe ...``);
- :mod:`.experiments`: ``run_analysis``, ``run_representations`` (``contextvec experiment ...``);
- :mod:`.choice`: what they share: which encoder (``EncoderChoice``), which task files (``TaskFiles``).
"""
