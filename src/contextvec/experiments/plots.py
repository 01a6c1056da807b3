"""PNG figures of ``contextvec experiment`` (matplotlib's Agg canvas: no display needed).

- :func:`plot_scores`: dev (and test) score per configuration as bars (``layers``,
  ``placement``; the y axis is zoomed onto the scores, so bars do not start at 0), or against
  the training fraction on a log axis (``sample-efficiency``, ELMo Figure 1); error bars are
  the sample std over seeds.
- :func:`plot_layer_weights`: the learned softmax-normalised layer weights, one group of bars
  per configuration and mix (ELMo Figure 2), averaged over seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from contextvec.experiments.plans import percent
from contextvec.experiments.summary import ConfigSummary
from contextvec.extras import needs
from contextvec.io.atomic import atomic_path

with needs("tasks"):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure


def _save(figure: Figure, path: Path) -> None:
    # An explicit Agg canvas instead of pyplot: no global backend state, no display lookup.
    FigureCanvasAgg(figure)
    figure.tight_layout()
    with atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=120)  # tmp has no .png suffix: name the format


def plot_scores(experiment: str, summary: Sequence[ConfigSummary], metric: str, path: Path) -> None:
    """``<experiment>.png``: scores per configuration (bars) or per training fraction (lines)."""
    splits = ["dev"] + (["test"] if all(s.test is not None for s in summary) else [])
    figure = Figure(figsize=(7, 4.5))
    ax = figure.add_subplot()
    if experiment == "sample-efficiency":
        for config in dict.fromkeys(s.config for s in summary):
            points = sorted((s for s in summary if s.config == config), key=lambda s: s.fraction)
            for split, style in zip(splits, ("-o", "--s"), strict=False):
                values = [getattr(s, split) for s in points]
                ax.errorbar([s.fraction for s in points], [v[0] for v in values], yerr=[v[1] for v in values],
                            fmt=style, capsize=3, label=f"{config} ({split})")
        fractions = sorted({s.fraction for s in summary})
        ax.set_xscale("log")
        ax.set_xticks(fractions, [percent(f) for f in fractions])
        ax.minorticks_off()
        ax.set_xlabel("training set used (log scale)")
    else:
        width = 0.8 / len(splits)
        for i, split in enumerate(splits):
            values = [getattr(s, split) for s in summary]
            x = [j + (i - (len(splits) - 1) / 2) * width for j in range(len(summary))]
            bars = ax.bar(x, [v[0] for v in values], width, yerr=[v[1] for v in values], capsize=3,
                          label=split)
            ax.bar_label(bars, fmt="%.3f", fontsize=8)
        ax.set_xticks(range(len(summary)), [s.config.replace(", ", "\n") for s in summary])
        # Scores of compared settings differ by a point or two: zoom the axis onto them.
        lows = [getattr(s, split)[0] - getattr(s, split)[1] for s in summary for split in splits]
        highs = [getattr(s, split)[0] + getattr(s, split)[1] for s in summary for split in splits]
        margin = max(0.2 * (max(highs) - min(lows)), 0.01)
        ax.set_ylim(max(0.0, min(lows) - 2 * margin), max(highs) + margin)
    ax.set_ylabel(metric)
    seeds = max(len(s.seeds) for s in summary)
    ax.set_title(f"{experiment}" + (f" (mean ± std over {seeds} seeds)" if seeds > 1 else ""))
    ax.legend(fontsize=8)
    _save(figure, path)


def plot_layer_weights(summary: Sequence[ConfigSummary], path: Path) -> None:
    """``layer_weights.png``: the learned mix weights per layer (ELMo Figure 2)."""
    # Each bar group is labelled only by what varies: configuration, fraction, mix.
    several_configs = len({s.config for s in summary if s.weights}) > 1
    several_fractions = len({s.fraction for s in summary}) > 1
    groups: list[tuple[str, list[float]]] = []
    for s in summary:
        for mix, weights in s.weights.items():
            parts = ([s.config.replace(", ", "\n")] if several_configs else []) + \
                ([f"{percent(s.fraction)} of train"] if several_fractions else []) + [f"{mix} mix"]
            groups.append(("\n".join(parts), weights))
    if not groups:
        raise ValueError("no run with a learned mix: nothing to plot")
    num_layers = len(groups[0][1])  # one encoder: every mix has the same layers
    figure = Figure(figsize=(max(6.0, 1.3 * len(groups) + 2), 4.5))
    ax = figure.add_subplot()
    width = 0.8 / num_layers
    for k in range(num_layers):
        x = [g + (k - (num_layers - 1) / 2) * width for g in range(len(groups))]
        ax.bar(x, [w[k] for _, w in groups], width, label=f"layer {k}" + (" (token)" if k == 0 else ""))
    ax.axhline(1 / num_layers, color="grey", linestyle="--", linewidth=1, label="equal weights")
    ax.set_xticks(range(len(groups)), [label for label, _ in groups], fontsize=8)
    ax.set_ylabel("softmax-normalised weight")
    ax.set_ylim(0, 1)
    ax.set_title("learned layer weights")
    ax.legend(fontsize=8)
    _save(figure, path)
