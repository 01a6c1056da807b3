"""What the layers do, as numbers a page can show (``contextvec serve``'s explorer) and Python can
use alike: how alike a word's occurrences are per layer and which corpus contexts are nearest to
it (:mod:`.contexts`), and the learned mixes and per-layer scores of a finished run
(:mod:`.layer_report`)."""
