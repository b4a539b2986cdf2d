"""A run's before/after summary: the headline figures of its two evaluations with their 95%
intervals, team - alone and after - before paired by problem, per level and the verification gap
(`summary`), and its markdown tables (`summary_table`)."""

from __future__ import annotations

from typing import Any

from trainers.evaluation.compare import figure_of, paired_interval
from trainers.evaluation.metrics import INTERVAL_KEYS
from trainers.evaluation.report.tables import label
from trainers.evaluation.report.verification import verification_change, verification_tables

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
    (`trainers.evaluation.report.verification.verification_tables`).
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
            # a mixed task's members (envs.tasks.mixed) first, as "task <name>", then the levels
            groups = {f"task {m}": row for m, row in compare.get("members", {}).items()}
            groups.update(compare.get("levels", {}))
            levels = {
                level: {k: v for k, v in row.items() if not isinstance(v, dict)}
                for level, row in groups.items()
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
    verification gap per level (`trainers.evaluation.report.verification.verification_change`)."""
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
        name = lv if lv.startswith("task ") else f"level {lv}"
        row = f"| {name} ({a.get('problems', '?')}) |"
        for names in shown.values():
            nb, na = names.get("before"), names.get("after")
            row += f" {b[nb]:.3f} -> {a[na]:.3f} |" if nb in b and na in a else " |"
        lines.append(row)
    return lines
