"""CoVe's translation model training: config, parallel data, the trainer, translation and BLEU."""
