"""Task models with and without contextual vectors: a biLSTM-CRF tagger and a sentence classifier.

Both models read tokens through the same input layer and the same biLSTM encoder:

- **Token representation** ``x``: a word embedding (random init, or a word2vec/GloVe file, see
  :func:`build_vocabularies`; trained with the model) and, optionally, a small character CNN
  (:class:`WordCharCNN`: char embeddings, one convolution, max over the characters; Lample et al.
  2016, Ma & Hovy 2016). Words are looked up **lowercased** (like Senna's and GloVe 6B's
  vocabularies); case reaches the model through the characters and the contextual vectors.
  During training a word seen once in train is replaced by UNK with probability
  ``word_unk_rate`` (Lample et al.), so the UNK vector is trained for unseen words.
- **Character n-grams** (optional, ``char_ngram_dim``; Hashimoto et al. 2016, the "Char" of
  CoVe's Table 2): the mean of the embeddings of the word's character 1- to 4-grams
  (:func:`char_ngrams`, :class:`NgramEmbedder`), concatenated to ``x``, trained with the task.
- **Contextual vectors** (ELMo, Peters et al. 2018, section 3.3): a
  :class:`~contextvec.embedder.ContextualEmbedder` over the frozen encoder gives one learned
  scalar mix per place: ``input`` concatenates ``ELMo_task`` to ``x`` at the biLSTM input
  (``[x; ELMo_task]``); ``input+output`` also concatenates a second mix ``ELMo_task'`` to the
  biLSTM output (``[h; ELMo_task']``). With a fixed ``layers`` combination instead of ``mix``
  (``last``, ``sum_last_4``, ``concat_last_4``: the BERT paper's feature-based NER study, Table 7,
  via :func:`~contextvec.encoders.bert.combine_layers`) the embedder sees one combined layer
  (:class:`FixedLayers`) and its mixes are frozen at weight 1, gamma 1 (no mix penalty).
  For speed the encoder's layers can be computed once per dataset and passed in with each
  batch (``Batch.layers``, the same mixes and dropout are then applied to them); without them
  the embedder runs the encoder itself, so a trained model also tags new text.
- :class:`NerTagger`: ``x`` -> biLSTM (1-2 layers) -> linear -> :class:`~contextvec.tasks.crf.CRF`
  with the transition constraints of its tag scheme (the biLSTM-CRF of Lample et al. 2016 and
  Peters et al. 2017/2018).
- :class:`SentenceClassifier`: ``x`` -> biLSTM -> ``[max; mean]`` pooling over the tokens -> MLP
  (one ReLU hidden layer) -> softmax. A deliberately simple model (not CoVe's biattentive
  classification network), the same for SST-5, SST-2 and TREC-6.
- :class:`~contextvec.tasks.models.bcn.BCNClassifier` (``classifier="bcn"``): CoVe's
  biattentive classification network over the same inputs (:mod:`contextvec.tasks.models.bcn`).
- :class:`~contextvec.tasks.models.pair.PairModel`: sentence pairs (GLUE's MRPC, RTE, STS-B, WNLI):
  the shared biLSTM over each sentence, attention between the two, ``[u; v; |u-v|; u*v]`` -> MLP,
  classes or one regression score (:mod:`contextvec.tasks.models.pair`).
"""

from contextvec.tasks.models.bcn import BCNClassifier
from contextvec.tasks.models.bilstm import (
    NerTagger,
    NgramEmbedder,
    SentenceClassifier,
    TaskModelBase,
    TokenEmbedder,
    WordCharCNN,
)
from contextvec.tasks.models.contextual import FixedLayers, check_layers, contextual_embedder
from contextvec.tasks.models.pair import PairBatch, PairModel, pair_batch
from contextvec.tasks.models.settings import (
    CLASSIFIERS,
    LAYERS,
    MIX_PLACEMENTS,
    Classifier,
    ModelLayers,
    ModelSettings,
    Placement,
)
from contextvec.tasks.models.vocab import (
    MAX_CHARS,
    PAD,
    UNK,
    Batch,
    Indexer,
    Vocabulary,
    build_vocabularies,
    char_ngrams,
    ngram_vocabulary,
    wanted_words,
)

__all__ = [
    "CLASSIFIERS", "LAYERS", "MAX_CHARS", "MIX_PLACEMENTS", "PAD", "UNK", "BCNClassifier", "Batch",
    "Classifier", "FixedLayers", "Indexer", "ModelLayers", "ModelSettings", "NerTagger", "NgramEmbedder",
    "PairBatch", "PairModel", "Placement", "SentenceClassifier", "TaskModelBase", "TokenEmbedder",
    "Vocabulary", "WordCharCNN", "build_vocabularies", "char_ngrams", "check_layers", "contextual_embedder",
    "ngram_vocabulary", "pair_batch", "wanted_words",
]
