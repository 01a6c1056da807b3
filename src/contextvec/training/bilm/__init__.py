"""biLM (ELMo) training: LM windows, the LM head, the config and presets, the trainer."""
