"""What frozen encoder layers encode, read off without a task model: linear POS probes per layer
and for a learned mix (:mod:`.linear`), word sense disambiguation by nearest sense centroids
(:mod:`.wsd`, on SemCor (:mod:`.semcor`) and WordNet (:mod:`.wordnet`)), and nearest neighbours
in context (:mod:`.neighbours`)."""
