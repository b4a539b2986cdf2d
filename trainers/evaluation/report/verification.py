"""The verification gap in every report: per level, how the team's reviews judge its first
answers, what filtering by them adds (the gap), what revisions fix and break, beside the model
alone's headroom (pass@k - maj@k over the same k samples).

`verification_table` gathers the figures of one evaluation (`trainers.evaluation.evaluate`'s
results: ``metrics`` and its ``levels`` from `trainers.evaluation.metrics.review_metrics`,
``compare`` and its ``levels`` from `trainers.evaluation.compare.compare_team_alone`);
`verification_report` writes them as a markdown table, `verification_change` two of them
(`verification_tables`) as before -> after.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from envs.roles import role_of
from trainers.rollout.records import review_roles_for

# (key, row label, signed): `{who}` is the reviewing role (critic, verifier).
VERIFICATION = (
    ("solver/accuracy", "solver accuracy (first answer)", False),
    ("review/tpr", "{who} TPR (right answers accepted)", False),
    ("review/tnr", "{who} TNR (wrong answers rejected)", False),
    ("review/balanced_accuracy", "{who} balanced accuracy", False),
    ("review/gap", "verification gap (accepted - all first answers)", True),
    ("review/fixed", "fixed (rejected wrong -> right)", False),
    ("review/broke", "broke (right under review -> wrong)", False),
    ("review/fault_real", "named fault real (rejections of wrong answers)", False),
)


def reviewer(metrics: Mapping[str, Any], env_id: str | None = None) -> str:
    """The role whose verdicts the review figures are: the first agent of a reviewing role of
    `env_id` (its facts' ``review_roles``: critic, verifier), or, with no env known, of a role
    some registered env states as reviewing (`trainers.rollout.records.review_roles_for`)."""
    reviewing = review_roles_for(env_id)
    for agent in metrics.get("agents", {}):
        role = role_of(agent)
        if role in reviewing:
            return role
    return "review"


def headroom_k(compare: Mapping[str, Any]) -> int | None:
    """The k whose headroom the table shows: the baseline's (`baseline_k`, else `matched_k`)
    when above 1, else the largest k that has one; None without a headroom."""
    have = [int(name.split(" - ")[0].rsplit("@", 1)[1]) for name in compare.get("headroom", {})]
    if not have:
        return None
    k = compare.get("baseline_k", compare.get("matched_k"))
    return k if k in have else max(have)


def verification_table(results: Mapping[str, Any], k: int | None = None) -> dict[str, Any]:
    """The figures of `VERIFICATION` and the alone headroom at `k` (default: `headroom_k`),
    overall (``all``) and per level: ``{"columns": ["all", "2", ...], "rows": {key: {column:
    value or None}}, "who": role, "headroom_k": k}`` (``who``: the reviewing role of the
    results' env, ``env``, `reviewer`); the headroom (``alone/pass@k -
    alone/maj@k``) is a ``{"diff", "ci95"}`` per column. A figure no column has is left out (no
    reviews: debate, ensemble)."""
    m = results["metrics"]
    levels = m.get("levels", {})
    columns = ["all", *levels]
    sources = {"all": m, **levels}
    rows: dict[str, dict[str, Any]] = {}
    for key, _, _ in VERIFICATION:
        cells = {col: sources[col].get(key) for col in columns}
        if any(key in sources[col] for col in columns):
            rows[key] = cells
    compare = results.get("compare") or {}
    k = headroom_k(compare) if k is None else k
    if k is not None and compare.get("headroom"):
        name = f"alone/pass@{k} - alone/maj@{k}"
        cells = {"all": compare["headroom"].get(name)}
        for col in columns[1:]:
            cells[col] = compare.get("levels", {}).get(col, {}).get(name)
        rows[name] = cells
    return {
        "columns": columns,
        "rows": rows,
        "who": reviewer(m, results.get("env")),
        "headroom_k": k,
    }


def _label(key: str, who: str) -> tuple[str, bool]:
    for name, text, signed in VERIFICATION:
        if name == key:
            return text.format(who=who), signed
    k = key.split(" - ")[0].rsplit("@", 1)[1]
    return f"alone pass@{k} - maj@{k} (headroom)", True


def _value(cell: Any, signed: bool) -> str:
    if isinstance(cell, Mapping):  # a paired difference
        cell = cell.get("diff")
    if cell is None:
        return "n/a"
    return f"{cell:+.3f}" if signed else f"{cell:.3f}"


def verification_report(results: Mapping[str, Any]) -> list[str]:
    """The verification gap table of one evaluation (`verification_table`), one column per
    level; the overall headroom carries its paired 95% interval. Empty without figures."""
    table = verification_table(results)
    if not table["rows"]:
        return []
    columns = table["columns"]
    head = "".join(" all |" if c == "all" else f" level {c} |" for c in columns)
    intro = (
        "The verification gap (what filtering the first answers by the team's own check adds), "
        "the reviews' rates and the revisions' fixes and breaks, from the team's episodes"
    )
    if table["headroom_k"] is not None:
        intro += ", beside the model alone's headroom (what a perfect vote over its samples adds)"
    lines = [
        intro + ":",
        "",
        f"| per level |{head}",
        "|---|" + "---|" * len(columns),
    ]
    for key, cells in table["rows"].items():
        text, signed = _label(key, table["who"])
        row = f"| {text} |"
        for col in columns:
            cell = cells.get(col)
            value = _value(cell, signed)
            if col == "all" and isinstance(cell, Mapping) and cell.get("ci95"):
                lo, hi = cell["ci95"]
                value += f" [{lo:+.3f}, {hi:+.3f}]"
            row += f" {value} |"
        lines.append(row)
    return [*lines, ""]


def verification_tables(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> dict[str, dict[str, Any]]:
    """`verification_table` of two evaluations (``{"before": ..., "after": ...}``), the
    headroom at the same k on both sides (the after evaluation's)."""
    table = verification_table(after)
    return {"before": verification_table(before, table["headroom_k"]), "after": table}


def verification_change(tables: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The verification gap table before -> after training (`verification_tables`), one column
    per level both evaluations have; empty when the after evaluation has no figures."""
    b, a = tables["before"], tables["after"]
    if not a["rows"]:
        return []
    columns = [c for c in a["columns"] if c in b["columns"]]
    head = "".join(" all |" if c == "all" else f" level {c} |" for c in columns)
    lines = [f"| verification gap, before -> after |{head}", "|---|" + "---|" * len(columns)]
    for key, now in a["rows"].items():
        text, signed = _label(key, a["who"])
        was = b["rows"].get(key, {})
        cells = "".join(
            f" {_value(was.get(c), signed)} -> {_value(now.get(c), signed)} |" for c in columns
        )
        lines.append(f"| {text} |{cells}")
    return lines
