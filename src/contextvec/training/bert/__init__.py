"""BERT pretraining: WordPiece vocabularies, pair instances and masking, the trainer, evaluation."""
