"""The markdown report of one evaluation (`markdown_report`): the team against the same model
alone, and alone with the team's tool where it was compared (`comparison_report`), the
verification gap (`trainers.evaluation.report.verification`), the split sizes, the team's
metrics; and how reports name the figures (`label`)."""

from __future__ import annotations

from typing import Any

from trainers.evaluation.report.verification import verification_report

HEADLINE = ("accuracy", "pass1@turn1", "maj1@turnK", "pass1@turnK")
# How reports name the figures (`trainers.evaluation.compare.compare_team_alone`).
LABELS = {
    "team/vote": "team: majority vote (maj1@turnK)",
    "team/final": "team: final answer",
    "team/first": "team: first answer (pass1@turn1)",
    "alone/pass@1": "alone: pass@1 (mean of its samples)",
}


def _ci(value: float, ci: list[float] | None, signed: bool = False) -> str:
    fmt = "{:+.3f}" if signed else "{:.3f}"
    text = fmt.format(value)
    return f"{text} [{fmt.format(ci[0])}, {fmt.format(ci[1])}]" if ci else text


def label(name: str) -> str:
    """How reports name a figure of `compare_team_alone` (``alone/maj@5`` -> "alone: maj@5")."""
    if name in LABELS:
        return LABELS[name]
    if " - " in name:
        return " - ".join(label(part).split(" (")[0] for part in name.split(" - "))
    return name.replace("/", ": ", 1)


def matched_tags(compare: dict[str, Any]) -> dict[int, str]:
    """What each compute-matched k of a comparison is: ``{5: "matched", 7: "tokens-matched,
    baseline"}``; the baseline is named only where the two differ (`compare_team_alone`)."""
    matched, tokens_k = compare["matched_k"], compare.get("tokens_k")
    tags: dict[int, list[str]] = {matched: ["matched"]}
    if tokens_k is not None:
        tags.setdefault(tokens_k, []).append("tokens-matched")
        baseline = compare.get("baseline_k", matched)
        if tokens_k != matched and baseline in tags:
            tags[baseline].append("baseline")
    return {k: ", ".join(v) for k, v in tags.items()}


def _k_of(name: str) -> int | None:
    """The k of a figure or difference named ``...@k``, else None."""
    k = name.rsplit("@", 1)[-1]
    return int(k) if k.isdigit() else None


def _tag(name: str, tags: dict[int, str]) -> str:
    """The compute-matched tag of a figure or difference named ``...@k`` (or "")."""
    k = _k_of(name)
    return "" if k is None else tags.get(k, "")


def _matching(c: dict[str, Any]) -> str:
    """How the comparison matches compute, as a sentence."""
    matched = c["matched_k"]
    text = f"Compute-matched: k = {matched} in generations" + (
        "" if matched == c["team_generations"] else " (the nearest k asked for)"
    )
    if "tokens_k" in c:
        per_sample = c.get("alone_tokens_per_sample", 0.0)
        team = c.get("tokens_per_episode", {}).get("team", 0.0)
        text += (
            f", k = {c['tokens_k']} in tokens (the team {team:.1f} tokens per episode, alone "
            f"{per_sample:.1f} per sample"
            + (
                f"; capped at the {c['alone_samples']} alone samples"
                if c["tokens_k_capped"]
                else ""
            )
            + f"); the baseline to beat: k = {c.get('baseline_k', matched)}, the stronger"
        )
    return text + "."


def comparison_report(results: dict[str, Any], key: str = "compare") -> list[str]:
    """The team against the same model alone: the paired differences first (compute-matched in
    generations and in tokens on top), then the figures with tokens per episode, each with
    per-level columns on procedural tasks. ``key="compare_tool"``: against the model alone
    with the team's tool (`evaluate`'s ``compare_tool``), its rows named "alone + tool"."""
    c = results.get(key)
    if not c:
        return []
    who = "alone" if c.get("alone_env") is None else "alone + tool"
    groups = _column_groups(c)
    lines = [
        _comparison_intro(results["env"], c),
        "",
        *_paired_table(c, groups, who),
        "",
        *_figure_table(c, groups, who),
    ]
    if groups:
        counts = ", ".join(f"{lv}: {row['problems']}" for lv, row in groups.items())
        lines += ["", f"Problems per column: {counts}."]
    return [*lines, ""]


def _column_groups(c: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A comparison's extra columns: per member task of a mixed task (envs.tasks.mixed), then
    per level, each with the same rows as the whole."""
    groups = {f"task {m}": row for m, row in c.get("members", {}).items()}
    groups.update({f"level {lv}": row for lv, row in c.get("levels", {}).items()})
    return groups


def _comparison_intro(env: str, c: dict[str, Any]) -> str:
    """The paragraph that says what the comparison compares, and how compute is matched."""
    alone_env = c.get("alone_env")
    against = (
        "the model alone" if alone_env is None else f"the model alone with the tool ({alone_env})"
    )
    return (
        f"Same model, same problems: the team ({env}, at most "
        f"{c['team_generations']} generations per episode, {c['team_generations_mean']:.2f} "
        f"used) against {against} with k independent samples (prompt: {c['alone_prompt']}; "
        f"{c['alone_samples']} samples per problem), same temperature and token cap. "
        + _matching(c)
        + " 95% intervals: bootstrap over problems, differences paired by problem."
    )


def _alone_name(name: str, who: str) -> str:
    """How the comparison's table names a figure, its "alone" rows named `who`."""
    return label(name).replace("alone:", f"{who}:")


def _paired_table(c: dict[str, Any], groups: dict[str, dict[str, Any]], who: str) -> list[str]:
    """The paired differences, team minus alone, the compute-matched ks first."""
    level_head = "".join(f" {lv} |" for lv in groups)
    lines = [
        f"| team - {who} (paired by problem) | all |{level_head}",
        f"|---|---|{'---|' * len(groups)}",
    ]
    tags = matched_tags(c)
    names = list(c["paired"])  # by k, the vote before the final answer
    rank = {k: i for i, k in enumerate(tags)}  # the compute-matched ks first
    ordered = sorted(names, key=lambda n: (rank.get(_k_of(n), len(rank)), names.index(n)))
    for name in ordered:
        d = c["paired"][name]
        tag = f" ({_tag(name, tags)})" if _tag(name, tags) else ""
        row = f"| {_alone_name(name, who)}{tag} | {_ci(d['diff'], d['ci95'], signed=True)} |"
        for group in groups.values():
            cell = group.get(name)
            row += f" {_ci(cell['diff'], cell['ci95'], signed=True)} |" if cell else " |"
        lines.append(row)
    return lines


def _figure_table(c: dict[str, Any], groups: dict[str, dict[str, Any]], who: str) -> list[str]:
    """The figures of the team and of the model alone, with tokens per episode."""
    level_head = "".join(f" {lv} |" for lv in groups)
    lines = [
        f"| figure | all |{level_head} tokens/episode |",
        f"|---|---|{'---|' * len(groups)}---|",
    ]
    for name, value in c["figures"].items():
        if name.startswith("alone/pass@") and name != "alone/pass@1":
            continue  # in the verification table, as the headroom over maj@k
        row = f"| {_alone_name(name, who)} | {_ci(value, c['ci95'].get(name))} |"
        for group in groups.values():
            cell = group.get(name)
            row += f" {cell:.3f} |" if cell is not None else " |"
        tok = _figure_tokens(c, name)
        lines.append(row + (f" {tok:.1f} |" if tok is not None else " |"))
    return lines


def _figure_tokens(c: dict[str, Any], name: str) -> float | None:
    """The tokens per episode behind figure `name`, None where not recorded."""
    tokens = c.get("tokens_per_episode", {})
    if name.startswith("team/"):  # the first answer spent the turns up to it
        return c.get("spent", {}).get(name, {}).get("tokens", tokens.get("team"))
    if name.startswith("alone/maj@"):
        return tokens.get(f"alone@{name.rsplit('@', 1)[1]}")
    return tokens.get("alone@1")


def split_size_report(sizes: dict[str, Any]) -> list[str]:
    """The per-level split sizes as a markdown table (">= n" where a count is a lower bound)."""
    if not sizes:
        return []
    lines = ["| level | train | validation | test |", "|---|---|---|---|"]
    if all("exact" not in row for row in sizes.values()):  # a mixed task's: per member
        sizes = {f"{m} {lv}": row for m, levels in sizes.items() for lv, row in levels.items()}
    for level, row in sizes.items():
        mark = "" if row["exact"] else ">= "
        lines.append(
            f"| {level} |"
            + "".join(f" {mark}{row[s]:,} |" for s in ("train", "validation", "test"))
        )
    return ["Distinct problems per split (a problem's split is a hash of its text):", "", *lines]


def oracle_report(results: dict[str, Any]) -> list[str]:
    """The oracle row (`trainers.evaluation.oracle`: the same solver sampled afresh, a sound
    critic, the scripted patch) beside the learned team, paired by problem; nothing without
    one."""
    oracle = results.get("oracle")
    if not oracle:
        return []
    m, o = results["metrics"], oracle["metrics"]
    lines = [
        "| the same solver, then | final answer | vote |",
        "|---|---|---|",
        f"| learned critic and refiner | {m['accuracy']:.3f} | {m['maj1@turnK']:.3f} |",
        f"| oracle: sound critic, scripted patch | {o['accuracy']:.3f} | {o['maj1@turnK']:.3f} |",
    ]
    for figure, name in (("team/final", "final answer"), ("team/vote", "vote")):
        diff = oracle["team_minus_oracle"][figure]
        lines.append(
            f"| learned {name} - oracle final | {_ci(diff['diff'], diff['ci95'], True)} | |"
        )
    return [*lines, ""]


def markdown_report(results: dict[str, Any]) -> str:
    """The team against the same model alone (compute-matched, paired) first, then the
    verification gap per level (`trainers.evaluation.report.verification.verification_report`), then the
    team's metrics, flips and per-agent table."""
    m = results["metrics"]
    lines = [f"## {results['env']}: {m['problems']} problems, {m['episodes']} episodes", ""]
    lines += comparison_report(results)
    lines += comparison_report(results, "compare_tool")
    lines += oracle_report(results)
    lines += verification_report(results)
    sizes = split_size_report(results.get("split_sizes", {}))
    lines += sizes + ([""] if sizes else [])
    # the review figures are in the verification table; the rest of the team's metrics here
    keys = [k for k in m if k in HEADLINE or k.startswith(("pass@", "flip/"))]
    names = {"accuracy": "final answer (accuracy)"}
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {names.get(k, k)} | {m[k]:.3f} |" for k in keys]
    if m.get("levels") and not results.get("compare"):
        levels = m["levels"]
        lines += [
            "",
            "| metric |" + "".join(f" level {lv} |" for lv in levels),
            "|---|" + "---|" * len(levels),
        ]
        for key in ("maj1@turnK", "accuracy", "pass1@turn1"):
            row = f"| {names.get(key, key)} |"
            lines.append(row + "".join(f" {levels[lv].get(key, 0.0):.3f} |" for lv in levels))
    audited = any("false_arithmetic" in a for a in m["agents"].values())
    extra = " false arithmetic |" if audited else ""
    lines += [
        "",
        f"| agent | turns | reward | accuracy | parse errors | tokens/turn |{extra}",
        "|---|---|---|---|---|---|" + ("---|" if audited else ""),
    ]
    for agent, a in m["agents"].items():
        row = (
            f"| {agent} | {a['turns']} | {a['reward']:.3f} | {a['accuracy']:.3f} | "
            f"{a['parse_error']:.3f} | {a['completion_tokens']:.1f} |"
        )
        if audited:
            row += f" {a['false_arithmetic']:.3f} |" if "false_arithmetic" in a else " |"
        lines.append(row)
    return "\n".join(lines)
