"""The CPU kernels of inference, one class per kernel, chosen once when a model is prepared.

The encoders' modules are the differentiable reference; these run their products faster in
inference: oneDNN's packed float32 weights (:mod:`.packed_float`), bf16 and int8 weights
(:mod:`.bf16`, :mod:`.int8`, behind :class:`.protocol.WeightKernel`), and the LSTM's inference
recurrence (:mod:`.lstm_inference`) and fused training kernel (:mod:`.lstm_fused`). Every private
torch API they use is in :mod:`contextvec.encoders.torch_private`.
"""
