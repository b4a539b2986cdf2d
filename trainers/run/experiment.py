"""What every `scripts/train_<env>.py` does: evaluate, train, evaluate again, write the results.

Writes into ``output_dir``: the trained model (``final/``), ``metrics.json`` (before/after
evaluation and the training log), ``curves.png`` (reward and accuracy per agent over steps) and,
where the evaluations compared the team with the model alone, ``compute.png`` (accuracy against
generations and tokens, before and after: `trainers.evaluation.plots.plot_compute`).
Files are replaced atomically; ``metrics.json`` is first written with the "before" evaluation,
which a run resumed with ``--resume_from_checkpoint`` reuses (see `trainers.run.checkpoint`).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from envs.tasks import PROCEDURAL_TASKS
from trainers.embedded import resolve_model
from trainers.evaluation.evaluate import (
    EvalConfig,
    evaluate,
    held_levels,
    label,
    markdown_report,
)
from trainers.evaluation.metrics import INTERVAL_KEYS, figure_of, paired_interval
from trainers.evaluation.plots import has_curve, plot_compute
from trainers.evaluation.report import verification_change, verification_tables
from trainers.run.args import RunArguments
from trainers.run.checkpoint import (
    atomic_path,
    resume_checkpoint_requested,
    write_json_atomic,
)

logger = logging.getLogger(__name__)


def eval_config(env_args: RunArguments, model: str, config: Any) -> EvalConfig:
    """Held-out evaluation matching the training env (its verifier, rewards, audit and protocol:
    `RunArguments.env_options`): generated tasks' ``--eval_split``
    (default test), of the training levels that hold enough distinct problems of it
    (``--eval_difficulty`` to choose); ``--eval_data_path`` for a local file.

    `config` is any algorithm's config; its `temperature` and its tokens per turn
    (`max_completion_length`, every algorithm's name) set the sampling, else 1.0 and
    `EvalConfig`'s 96 tokens; ``--eval_temperature`` sets the evaluation's own. It runs where
    training runs (the config's device: a GPU unless ``use_cpu``).
    """
    device = getattr(config, "device", None)
    levels = env_args.eval_difficulty
    if env_args.task in PROCEDURAL_TASKS and not levels:  # the training levels that hold enough
        split = env_args.eval_split or "test"
        levels = held_levels(env_args.task, split, env_args.difficulty, env_args.eval_problems)
    return EvalConfig(
        env_id=env_args.env_id,
        task=env_args.task,
        data_path=env_args.eval_data_path or env_args.data_path,
        split=env_args.eval_split,
        difficulty=levels,
        num_problems=env_args.eval_problems,
        model=model,
        samples=env_args.eval_samples,
        rounds=env_args.rounds,
        num_agents=env_args.num_agents,
        temperature=env_args.eval_temperature or getattr(config, "temperature", None) or 1.0,
        max_completion_length=getattr(config, "max_completion_length", None)
        or EvalConfig.max_completion_length,
        num_envs=env_args.num_envs,
        seed=config.seed,
        device=None if device is None else str(device),
        env_options=env_args.env_options(),
    )


class OverlapError(ValueError):
    """A run's evaluation problems occur among its training problems."""


def task_problems(kwargs: dict[str, Any], count: int, offset: int = 0) -> list[dict[str, Any]]:
    """Problems `offset`..`offset + count - 1` (at most the source's) of the task an env built
    with `kwargs` plays: what a run trains or evaluates on."""
    import envs

    options = dict(kwargs.get("task_kwargs") or {})
    for key in ("data_path", "split"):
        if kwargs.get(key) is not None:
            options[key] = kwargs[key]
    source = envs.make_task(kwargs["task"], **options).source
    return [source[i] for i in range(offset, min(offset + count, len(source)))]


def check_held_out(env_args: RunArguments, evaluation: EvalConfig) -> dict[str, Any]:
    """Refuse (`OverlapError`) a run whose evaluation problems share a text with its training
    problems (`envs.overlap`: whitespace and case ignored), unless ``--allow_overlap``; return
    the counts compared. Generated tasks are held out by construction (`envs.splits`); a user's
    JSONL or hub split is checked here, as the training problems the run will read."""
    import envs

    train = task_problems(env_args.env_kwargs(split="train"), env_args.train_problems)
    held = task_problems(evaluation.env_kwargs(), evaluation.num_problems, evaluation.offset)
    shared = envs.overlap(held, train)
    figures = {"train_problems": len(train), "eval_problems": len(held), "shared": len(shared)}
    if shared and not env_args.allow_overlap:
        examples = "; ".join(repr(text[:100]) for text in shared[:3])
        raise OverlapError(
            f"refusing to train: {len(shared)} of the {len(held)} evaluation problems occur among "
            f"the {len(train)} training problems (whitespace and case ignored), e.g. {examples}. "
            "Evaluate on other problems (--eval_split, --eval_data_path) or pass --allow_overlap "
            "to train anyway"
        )
    if shared:
        logger.warning("--allow_overlap: %d evaluation problems are training problems", len(shared))
    return figures


def is_main(config: Any) -> bool:
    """Whether this is the main process of the run (always, outside ``accelerate launch``)."""
    return config.process_index == 0


def start_run(env_args: RunArguments, config: Any, algo: str) -> tuple[Path, dict[str, Any]]:
    """Create ``output_dir``, resolve the start model, evaluate it (``results["before"]``).

    Under ``accelerate launch`` only the main process evaluates and writes; every process trains.
    """
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    start_model = resolve_model(env_args.model_name_or_path)
    results: dict[str, Any] = {"env": env_args.env_id, "algo": algo, "start_model": start_model}
    results["env_kwargs"] = env_args.env_kwargs()  # the training env's (critic_reward, audit...)
    results["processes"] = config.world_size
    if not env_args.eval_problems:
        return out, results
    before = eval_config(env_args, start_model, config)
    results["held_out"] = check_held_out(env_args, before)  # every process, before any model
    if is_main(config):
        results["before"] = kept_before(out / "metrics.json", before, config) or evaluate(before)
        print(markdown_report(results["before"]))
        write_json_atomic(out / "metrics.json", results)  # a killed run keeps its "before"
    return out, results


def kept_before(path: Path, before: EvalConfig, config: Any) -> dict[str, Any] | None:
    """A resumed run's earlier "before" evaluation from `path`, if it used the same settings."""
    if resume_checkpoint_requested(config) and path.is_file():
        try:
            kept = json.loads(path.read_text()).get("before")
        except (OSError, ValueError) as exc:
            logger.warning("%s is unreadable (%s): evaluating the start again", path, exc)
            return None
        same = json.loads(json.dumps(vars(before), default=str))
        if isinstance(kept, dict) and kept.get("config") == same:
            logger.info("resumed run: reusing the before-evaluation in %s", path)
            return kept
    return None


def finish_run(
    env_args: RunArguments,
    config: Any,
    results: dict[str, Any],
    final: Path,
    log_history: list[dict[str, Any]],
) -> dict[str, Any]:
    """Evaluate the saved model at `final`, write metrics.json and curves.png; return results.

    Call it on every process after ``trainer.save_model(final)``; only the main one evaluates.
    """
    out = Path(config.output_dir)
    results["log_history"] = log_history
    if not is_main(config):
        return results
    if env_args.eval_problems:
        after = eval_config(env_args, str(final), config)
        base = results.get("rl_start_model", results["start_model"])  # RL's start (warmed up?)
        if getattr(env_args, "role_adapters", False):  # final/ holds one adapter per role
            after.model, after.role_adapters_dir = base, str(final)
        elif getattr(env_args, "role_models", ""):  # final/ holds one model per role
            roles = sorted(p.parent.name for p in final.glob("*/config.json"))
            after.model = base
            after.role_models = {role: str(final / role) for role in roles}
        results["after"] = evaluate(after)
        print(markdown_report(results["after"]))
        results["summary"] = summary(results)
        print(summary_table(results["summary"]))
    write_json_atomic(out / "metrics.json", results)
    title = f"{env_args.env_id} {results['algo']}"
    with atomic_path(out / "curves.png") as tmp:
        plot_curves(log_history, tmp, title, results.get("summary"))
    written = [final, out / "metrics.json", out / "curves.png"]
    evaluations = {w: results[w] for w in ("before", "after") if has_curve(results.get(w))}
    if evaluations:  # accuracy against compute, team and model alone, before and after
        with atomic_path(out / "compute.png") as tmp:
            plot_compute(evaluations, tmp, title)
        written.append(out / "compute.png")
    print(f"wrote {', '.join(map(str, written))}")
    return results


class TimeBudget(TrainerCallback):
    """Stops training (after saving a checkpoint) once `minutes` of training have passed.

    The clock starts at ``on_train_begin`` of this process, so a resumed run gets a fresh budget.
    """

    def __init__(self, minutes: float) -> None:
        if not minutes > 0:
            raise ValueError(f"time budget must be > 0 minutes, got {minutes!r}")
        self.seconds = 60.0 * minutes
        self.began: float | None = None
        self.stopped_at: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.began is not None and time.perf_counter() - self.began >= self.seconds:
            if self.stopped_at is None:
                logger.info(
                    "time budget of %.1f min reached at step %d",
                    self.seconds / 60,
                    state.global_step,
                )
            self.stopped_at = state.global_step
            control.should_training_stop = True
            control.should_save = True
        return control


MIN_MINUTES = 1.0  # what a budget leaves to training after `spent_seconds` of warm-up, at least


def budget_minutes(env_args: RunArguments, spent_seconds: float = 0.0) -> float | None:
    """What the time budget leaves to training: ``--max_train_minutes`` less `spent_seconds`
    already spent on the run's training (a warm-up), but at least `MIN_MINUTES`; None: none."""
    minutes = getattr(env_args, "max_train_minutes", None)
    if not minutes:
        return None
    return max(minutes - spent_seconds / 60, MIN_MINUTES)


def callbacks(env_args: RunArguments, spent_seconds: float = 0.0) -> list[TrainerCallback]:
    """The run's callbacks from the env arguments: the time budget (`budget_minutes`)."""
    minutes = budget_minutes(env_args, spent_seconds)
    return [] if minutes is None else [TimeBudget(minutes)]


KEYS = INTERVAL_KEYS  # the summary reports the figures that carry intervals
SINGLE = "single_agent_pass1@turn1"
# The old keys a comparison's figures stand for (same figure per problem), left out of its table.
SUPERSEDED = ("maj1@turnK", "accuracy", "pass1@turn1", SINGLE)


def summary(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Before/after headline metrics, the team's and the same model alone, with ``ci95``:
    95% bootstrap intervals over problems (``{"before": {key: [lo, hi]}, "after": ...}``).

    Where the evaluations compared the team with the same model alone (`evaluate`'s
    ``compare``), ``before``/``after`` also hold its figures (``team/vote``, ``team/final``,
    ``team/first``, ``alone/pass@1``, ``alone/maj@k``) and tokens per episode
    (``tokens/team``, ``tokens/alone@k``), and the summary adds
    ``compare``: ``{"matched_k": k, "before": {...}, "after": {...}}``, each the paired
    differences ``"team/vote - alone/maj@k"`` / ``"team/final - alone/maj@k"`` as
    ``{"diff", "ci95", "problems"}``, and, per evaluation (``{"before": k, "after": k}``),
    ``tokens_k`` (alone matched in tokens) and ``baseline_k`` (the stronger baseline);
    ``levels``: per evaluation, per problem level, the figures; ``paired``: after - before of
    each figure, paired by problem id (`after_minus_before`); and ``verification``: the
    verification gap tables before and after
    (`trainers.evaluation.report.verification_tables`).
    """
    rows: dict[str, dict[str, Any]] = {"ci95": {}}
    for when in ("before", "after"):
        metrics = results[when]["metrics"]
        rows[when] = {k: metrics[k] for k in KEYS if k in metrics}
        intervals = {k: v for k, v in metrics.get("ci95", {}).items() if k in rows[when]}
        single = results[when].get("single_agent")
        if single:
            rows[when][SINGLE] = single["pass1@turn1"]
            if "pass1@turn1" in single.get("ci95", {}):
                intervals[SINGLE] = single["ci95"]["pass1@turn1"]
        compare = results[when].get("compare")
        if compare:
            rows[when].update(compare["figures"])
            intervals.update(compare.get("ci95", {}))
            for side, tokens in compare.get("tokens_per_episode", {}).items():
                rows[when][f"tokens/{side}"] = tokens
            compared = rows.setdefault("compare", {"matched_k": compare["matched_k"]})
            compared[when] = compare["paired"]
            for key in ("tokens_k", "baseline_k"):
                if key in compare:
                    compared.setdefault(key, {})[when] = compare[key]
            levels = {
                level: {k: v for k, v in row.items() if not isinstance(v, dict)}
                for level, row in compare.get("levels", {}).items()
            }
            if levels:
                rows.setdefault("levels", {})[when] = levels
        rows["ci95"][when] = intervals
    paired = after_minus_before(results)
    if paired:
        rows["paired"] = paired
    rows["verification"] = verification_tables(results["before"], results["after"])
    return rows


def after_minus_before(results: dict[str, Any], resamples: int = 1000) -> dict[str, Any]:
    """After - before of each per-problem figure both evaluations have (``team/vote``,
    ``team/final``, ``team/first``, ``alone/...``), paired by problem id (both evaluations play
    the same problems): ``{figure: {"diff", "ci95", "problems"}}``; empty when either evaluation
    lacks per-problem figures (one saved before evaluations recorded them)."""
    before = results["before"].get("per_problem")
    after = results["after"].get("per_problem")
    if not before or not after:
        return {}
    seed = int(results["after"].get("config", {}).get("seed") or 0)
    names = [n for n in after[next(iter(after))] if "/" in n]
    out = {}
    for name in names:
        a, b = figure_of(after, name), figure_of(before, name)
        if set(a) & set(b):
            out[name] = paired_interval(a, b, resamples, seed=seed)
    return out


def _name(key: str) -> str:
    if key == SINGLE:
        return "same model alone: pass1@turn1"
    if key.startswith("tokens/"):
        return f"tokens per episode: {key.split('/', 1)[1]}"
    if "/" in key:
        return label(key)
    return "team: final answer (accuracy)" if key == "accuracy" else f"team: {key}"


def summary_table(rows: dict[str, dict[str, Any]]) -> str:
    """The before/after tables: first, where the evaluations compared the team with the same
    model alone, team - alone (paired by problem) before and after, compute-matched in
    generations and in tokens, and after - before (paired by problem); then each figure before
    and after with its 95% interval when there is one, the figures per level, and the
    verification gap per level (`trainers.evaluation.report.verification_change`)."""
    lines: list[str] = []
    compare = rows.get("compare")
    if compare:
        lines += [*_compare_lines(compare), ""]
    paired = rows.get("paired")
    if paired:
        lines += ["| after - before (paired by problem, 95% CI) | change |", "|---|---|"]
        lines += [f"| {label(name)} | {_diff(d)} |" for name, d in paired.items() if _shown(name)]
        lines.append("")
    lines += _figure_lines(rows, bool(compare))
    levels = rows.get("levels", {})
    if "before" in levels and "after" in levels and compare:
        lines += ["", *_level_lines(levels, compare)]
    verification = verification_change(rows["verification"]) if "verification" in rows else []
    if verification:
        lines += ["", *verification]
    return "\n".join(lines)


def _shown(name: str) -> bool:
    """Whether the before/after tables show a figure: not alone pass@k past k = 1 (the
    verification gap table shows it as the headroom over maj@k)."""
    return not (name.startswith("alone/pass@") and name != "alone/pass@1")


def _diff(d: dict[str, Any] | None) -> str:
    """A paired difference with its 95% interval, or "" where there is none."""
    if not d:
        return ""
    lo, hi = d["ci95"]
    return f"{d['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _per_when(compare: dict[str, Any], key: str) -> str:
    """A k that may differ before and after (``tokens_k``), as ``7`` or ``7 -> 9``."""
    ks = [compare[key][w] for w in ("before", "after") if w in compare.get(key, {})]
    return str(ks[0]) if len(set(ks)) == 1 else " -> ".join(map(str, ks))


def _compare_lines(compare: dict[str, Any]) -> list[str]:
    """Team - same model alone, before and after: compute-matched in generations first, then in
    tokens (its k may differ before and after), then the other ks; and the baseline's k."""
    matched = compare["matched_k"]
    tokens = compare.get("tokens_k", {})
    found = list(dict.fromkeys([*compare.get("before", {}), *compare.get("after", {})]))
    lines = [
        "| team - same model alone (paired by problem, 95% CI) | before | after |",
        "|---|---|---|",
    ]

    def row(text: str, names: dict[str, str]) -> str:
        b = _diff(compare.get("before", {}).get(names.get("before", "")))
        a = _diff(compare.get("after", {}).get(names.get("after", "")))
        return f"| {text} | {b} | {a} |"

    both = ("before", "after")
    also = " and in tokens" if tokens and set(tokens.values()) == {matched} else ""
    for mine in ("team/vote", "team/final"):
        name = f"{mine} - alone/maj@{matched}"
        lines.append(row(f"{label(name)} (compute-matched{also})", dict.fromkeys(both, name)))
    if tokens and not also:
        for mine in ("team/vote", "team/final"):
            names = {w: f"{mine} - alone/maj@{k}" for w, k in tokens.items()}
            text = f"{label(mine).split(' (')[0]} - alone: maj@k matched in tokens"
            lines.append(row(f"{text} (k = {_per_when(compare, 'tokens_k')})", names))
    skip = {str(k) for k in (matched, *tokens.values())}  # the ks shown above
    for name in found:
        if name.rsplit("@", 1)[-1] not in skip:
            lines.append(row(label(name), dict.fromkeys(both, name)))
    if tokens and not also:
        baseline = _per_when(compare, "baseline_k")
        lines += ["", f"The baseline to beat (the stronger of the two matched): k = {baseline}."]
    return lines


def _figure_lines(rows: dict[str, dict[str, Any]], compared: bool) -> list[str]:
    """Each figure before and after, with its 95% interval when there is one."""

    def cell(when: str, key: str) -> str:
        value = rows[when][key]
        ci = rows.get("ci95", {}).get(when, {}).get(key)
        return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{value:.3f}"

    keys = [k for k in rows["before"] if k in rows["after"] and _shown(k)]
    if compared:  # the comparison's figures stand for these
        keys = [k for k in keys if k not in SUPERSEDED]
    lines = [
        "| metric (95% CI, bootstrap over problems) | before | after | change |",
        "|---|---|---|---|",
    ]
    for key in keys:
        b, a = rows["before"][key], rows["after"][key]
        if key.startswith("tokens/"):
            lines.append(f"| {_name(key)} | {b:.1f} | {a:.1f} | {a - b:+.1f} |")
            continue
        lines.append(
            f"| {_name(key)} | {cell('before', key)} | {cell('after', key)} | {a - b:+.3f} |"
        )
    if not compared and SINGLE in rows["after"] and "maj1@turnK" in rows["after"]:
        gap = rows["after"]["maj1@turnK"] - rows["after"][SINGLE]
        lines.append(f"| team maj1@turnK - same model alone, after | | | {gap:+.3f} |")
    return lines


def _level_lines(levels: dict[str, Any], compare: dict[str, Any]) -> list[str]:
    """Team vote, final answer and alone maj@k per level, before -> after, k matched in
    generations and, where it differs, in tokens."""
    matched, both = compare["matched_k"], ("before", "after")
    shown = {
        label(n): dict.fromkeys(both, n)
        for n in ("team/vote", "team/final", f"alone/maj@{matched}")
    }  # header -> the figure's name before and after
    tokens = compare.get("tokens_k", {})
    if tokens and set(tokens.values()) != {matched}:
        text = f"alone: maj@k in tokens (k = {_per_when(compare, 'tokens_k')})"
        shown[text] = {w: f"alone/maj@{k}" for w, k in tokens.items()}
    common = [lv for lv in levels["after"] if lv in levels["before"]]
    lines = [
        "| level (problems) |" + "".join(f" {head}: before -> after |" for head in shown),
        "|---|" + "---|" * len(shown),
    ]
    for lv in common:
        b, a = levels["before"][lv], levels["after"][lv]
        row = f"| level {lv} ({a.get('problems', '?')}) |"
        for names in shown.values():
            nb, na = names.get("before"), names.get("after")
            row += f" {b[nb]:.3f} -> {a[na]:.3f} |" if nb in b and na in a else " |"
        lines.append(row)
    return lines


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
