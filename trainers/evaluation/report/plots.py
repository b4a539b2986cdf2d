"""The plots of a run and of an evaluation: accuracy against compute (`plot_compute`: the model
alone's majority vote over k samples as a curve, the team's answers as points at what they spent,
in generations and in tokens per problem), and a run's training curves (`plot_curves`: reward and
accuracy per agent over steps).

`plot_compute` takes one evaluation or several (before and after training, each in its own
colour), as `trainers.evaluation.evaluate.evaluate` returns them with ``compare``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainers.evaluation.report.summary import SINGLE

# The team's figures as points: (figure, legend name, marker).
TEAM_POINTS = (
    ("team/first", "team first answer", "s"),
    ("team/final", "team final answer", "^"),
    ("team/vote", "team vote", "*"),
)
AXES = (("generations", "generations per problem"), ("tokens", "tokens per problem"))


def has_curve(results: Mapping[str, Any] | None) -> bool:
    """Whether an evaluation compared the team with the model alone and kept its curve (one
    saved before evaluations recorded curves has none)."""
    compare = (results or {}).get("compare") or {}
    return bool(compare.get("curve", {}).get("k"))


def plot_compute(
    evaluations: Mapping[str, Mapping[str, Any]], path: str | Path, title: str = ""
) -> None:
    """Two panels, accuracy against generations (left) and tokens (right) per problem: for each
    evaluation (legend name -> `evaluate`'s results; e.g. ``{"before": ..., "after": ...}``), in
    its own colour, the model alone's maj@k for k = 1..its samples (a line; pass@k, the ceiling
    of any vote over the same samples, faint and dashed) and the team's first answer, final
    answer and vote as points at the generations and tokens their episodes spent.

    Raises:
        ValueError: no evaluation has a comparison with its curve (`has_curve`): evaluate with
            the comparison on (``compare``, not ``--no_compare``).
    """
    shown = {name: r for name, r in evaluations.items() if has_curve(r)}
    if not shown:
        raise ValueError(
            f"no evaluation of {sorted(evaluations)} compared the team with the model alone "
            "(results['compare']['curve']); evaluate with the comparison on to plot compute"
        )
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=True)
    for i, (name, results) in enumerate(shown.items()):
        c = results["compare"]
        curve, spent, color = c["curve"], c.get("spent", {}), f"C{i}"
        prefix = f"{name}: " if name else ""
        for ax, (x, _) in zip(axes, AXES, strict=True):
            ax.plot(curve[x], curve["alone/maj"], "o-", color=color, ms=4)
            ax.plot(curve[x], curve["alone/pass"], "--", color=color, alpha=0.35)
            for figure, _, marker in TEAM_POINTS:
                if figure in spent and figure in c["figures"]:
                    xy = (spent[figure][x], c["figures"][figure])
                    ax.plot(*xy, marker, color=color, ms=11, markeredgecolor="k")
        # the legend: one entry per line and marker kind, in this evaluation's colour
        axes[0].plot(
            [], [], "o-", color=color, label=f"{prefix}alone maj@k, k = 1..{curve['k'][-1]}"
        )
        axes[0].plot([], [], "--", color=color, alpha=0.35, label=f"{prefix}alone pass@k")
    for _, legend, marker in TEAM_POINTS:
        axes[0].plot([], [], marker, color="w", markeredgecolor="k", ms=9, label=legend)
    for ax, (_, xlabel) in zip(axes, AXES, strict=True):
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
    axes[0].xaxis.set_major_locator(MaxNLocator(integer=True))  # whole generations
    axes[0].set_ylabel("accuracy (held out)")
    axes[0].legend(fontsize=8)
    fig.suptitle(
        f"{title + ': ' if title else ''}accuracy against compute, team vs the model alone"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def smooth(values: list[float], window: int) -> list[float]:
    """Trailing moving average over up to `window` points."""
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def plot_curves(
    history: list[dict[str, Any]],
    path: Path,
    title: str,
    evals: dict[str, dict[str, float]] | None = None,
) -> None:
    """Reward and accuracy per agent over training steps (raw, faint, and smoothed), one panel
    each, a reviewer's balanced accuracy beside its accuracy; `evals` (``summary``'s before/after rows) marks the held-out evaluations on the
    accuracy panel at the first and the last step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series: dict[str, dict[str, list[tuple[int, float]]]] = {"reward": {}, "accuracy": {}}
    for row in history:
        for key, value in row.items():
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "agents" and parts[2] in series:
                series[parts[2]].setdefault(parts[1], []).append((row.get("step", 0), value))
            elif len(parts) == 3 and parts[0] == "agents" and parts[2] == "balanced_accuracy":
                # a reviewer's verdicts with both classes weighed alike, on the accuracy panel
                name = f"{parts[1]} (balanced)"
                series["accuracy"].setdefault(name, []).append((row.get("step", 0), value))
    last = max((row.get("step", 0) for row in history), default=0)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, (metric, agents) in zip(axes, series.items(), strict=True):
        for agent, points in sorted(agents.items()):
            steps, values = zip(*points, strict=True) if points else ((), ())
            (line,) = ax.plot(steps, values, alpha=0.25)
            window = max(1, len(values) // 10)
            ax.plot(steps, smooth(list(values), window), color=line.get_color(), label=agent)
        if metric == "accuracy" and evals and "before" in evals and "after" in evals:
            matched = evals.get("compare", {}).get("matched_k")
            marks = (
                ("maj1@turnK", "team maj1@turnK (held out)", "k"),
                ("team/final", "team final answer (held out)", "tab:blue"),
                (f"alone/maj@{matched}", f"same model alone, maj@{matched} (held out)", "gray")
                if matched
                else (SINGLE, "same model alone (held out)", "gray"),
            )
            for key, label, color in marks:
                if key in evals["before"] and key in evals["after"]:
                    ys = (evals["before"][key], evals["after"][key])
                    ax.plot((0, last), ys, "o--", color=color, label=label)
        ax.set_xlabel("step")
        ax.set_ylabel(metric)
        ax.set_title(f"{title}: {metric} per agent")
        if agents:
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
