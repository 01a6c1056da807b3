"""Toy SQuAD data for the question-answering tests: questions any tiny span model learns."""

from __future__ import annotations

from contextvec.tasks.models import ModelSettings
from contextvec.tasks.qa.squad import Answer, Question, SquadData

PLACES = [("France", "Paris"), ("Italy", "Rome"), ("Germany", "Berlin"), ("Spain", "Madrid"),
          ("Austria", "Vienna"), ("Norway", "Oslo"), ("Peru", "Lima"), ("Japan", "Tokyo"),
          ("Egypt", "Cairo"), ("Kenya", "Nairobi"), ("Chile", "Santiago"), ("Cuba", "Havana")]

TINY_SPAN = ModelSettings(word_dim=8, char_cnn=False, hidden=8, lstm_layers=1, dropout=0.0, word_unk_rate=0.0)
"""A span model's words alone, as small as it trains."""


def toy_squad(places: int = len(PLACES)) -> SquadData:
    """One question per place of the first ``places`` of :data:`PLACES`, whose answer is always
    the word after "capital is", on contexts of different lengths (so batches pad)."""
    questions = []
    for k, (country, city) in enumerate(PLACES[:places]):
        context = f"{country} is a country{' in the world' * (k % 3)}. Its capital is {city}, a city."
        questions.append(Question(f"q{k}", f"What is the capital of {country}?", context,
                                  (Answer(city, context.index(city)),)))
    return SquadData(tuple(questions), tuple(range(len(questions))), "toy")
