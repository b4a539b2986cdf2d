"""Where the embedded solver, critic and refiner go wrong: teacher-forced figures per number.

    python scripts/probe_embedded.py                     # the shipped model
    python scripts/probe_embedded.py --model DIR --problems 300

Plays held-out ``unknown`` problems through the real reflection env with the scripted (always
right) replies of `trainers.embedded.transcripts`, runs the model once over each solver, critic
and refiner reply, and for every number in the reply reports the probability the model gives the
right token (what sampling at temperature 1 gets right) and how often it is the model's first
choice (what greedy decoding gets right), grouped by what the number is: copied from the problem,
worked out at the head of a longer chain, and so on. A chain of n sampled numbers is right with
about the product of their probabilities, so the weakest kind is the one to train.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict

NUMBER = re.compile(r"-?\d+")
CHECK = re.compile(
    r"Check (?P<claimed>\d+): (?P<restated>[^?]*) = (?P<end>\d+)\? (?P<steps>(?:[^.:]*\. )*)"
    r"(?P<diff>[^:.]*): (?P<miss>\d+)?"
)
WORK = re.compile(r"Work back from (?P<end>\d+): (?P<steps>(?:[^.]*\. )*)The answer is \\boxed\{")


def _step_kinds(steps: str, offset: int, role: str) -> list[tuple[int, str]]:
    """Kinds of the numbers of one-equation steps (``a op k = b. ``): a carried from the step
    before (or the chain's start), k copied from the problem, b worked out."""
    kinds = []
    for i, step in enumerate(re.finditer(r"[^.]*\. ", steps)):
        numbers = list(NUMBER.finditer(step.group()))
        names = (
            f"{role} step: value carried" if i else f"{role} step: first value copied",
            f"{role} step: operand copied",
            f"{role} step: worked out",
        )
        kinds += [
            (offset + step.start() + n.start(), name)
            for n, name in zip(numbers, names, strict=True)
        ]
    return kinds


def critic_kinds(reply: str) -> list[tuple[int, str]]:
    """(character offset, kind) of each number in a scripted critic reply
    (``Check 20: 20 + 7 - 4 = 21? 20 + 7 = 27. 27 - 4 = 23. 23 - 21 = 2: 2 too many.``)."""
    match = CHECK.match(reply)
    if match is None:
        raise ValueError(f"not a scripted critic check (`transcripts.check_reply`): {reply!r}")
    kinds = [(match.start("claimed"), "claimed answer, copied")]
    for i, number in enumerate(NUMBER.finditer(match["restated"])):
        kind = "restated: answer substituted" if i == 0 else "restated: step operand, copied"
        kinds.append((match.start("restated") + number.start(), kind))
    kinds.append((match.start("end"), "restated: end, copied after '='"))
    kinds += _step_kinds(match["steps"], match.start("steps"), "critic")
    diff = list(NUMBER.finditer(match["diff"]))
    names = ("difference: result, copied", "difference: end, copied", "difference worked out")
    kinds += [(match.start("diff") + n.start(), name) for n, name in zip(diff, names, strict=True)]
    if match["miss"]:
        kinds.append((match.start("miss"), "miss, copied"))
    return kinds


def solver_kinds(reply: str) -> list[tuple[int, str]]:
    """(character offset, kind) of each number in a scripted worked solver reply
    (``Work back from 21: 21 + 4 = 25. 25 - 7 = 18. The answer is \\boxed{18}.``); a reply at a
    glance has one number, its answer."""
    match = WORK.match(reply)
    if match is None:
        return [(m.start(), "solver: answer at a glance") for m in NUMBER.finditer(reply)]
    kinds = [(match.start("end"), "solver: end, copied")]
    kinds += _step_kinds(match["steps"], match.start("steps"), "solver")
    kinds.append((match.end(), "solver: answer, copied"))
    return kinds


def refiner_kinds(reply: str) -> list[tuple[int, str]]:
    """(character offset, kind) of each number in a scripted refiner reply."""
    kinds = []
    for number in NUMBER.finditer(reply):
        before = reply[: number.start()]
        if before.endswith("{"):
            kind = "refiner: answer, copied"
        elif before.endswith("= "):
            kind = "refiner: repair worked out"
        else:
            kind = "refiner: copied"
        kinds.append((number.start(), kind))
    return kinds


def probe(model_dir: str, problems: int, seed: int) -> dict[str, tuple[float, float, int]]:
    """kind -> (mean probability of the right token, first-choice accuracy, count)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import envs
    from trainers.embedded.transcripts import sft_rows

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    source = envs.make_task(  # the probe reads unknown's scripted replies (CHECK, WORK)
        "unknown", split="test", size=problems, difficulty=[2, 3], seed=seed
    ).source  # level 1 holds 48 test problems, too few for its third of 300
    rows = sft_rows(
        list(source),
        seed,
        review_fraction=1.0,
        second_round=0.5,
        team_fraction=0.0,
        work_fraction=0.5,
    )
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for row in rows:
        kinds_of = {
            "solver": solver_kinds,
            "critic": critic_kinds,
            "refiner": refiner_kinds,
        }.get(row["role"])
        if kinds_of is None:
            continue
        reply = row["messages"][-1]["content"]
        encoded = tokenizer.apply_chat_template(
            row["messages"], return_dict=True, return_assistant_tokens_mask=True
        )
        ids = encoded["input_ids"]
        first = list(encoded["assistant_masks"]).index(1)
        pieces = tokenizer(reply, return_offsets_mapping=True, add_special_tokens=False)
        if ids[first : first + len(pieces["input_ids"])] != pieces["input_ids"]:
            raise RuntimeError(f"the reply's tokens differ inside the chat template: {reply!r}")
        with torch.no_grad():
            probs = model(input_ids=torch.tensor([ids])).logits[0].float().softmax(-1)
        starts = {start: j for j, (start, _) in enumerate(pieces["offset_mapping"])}
        for offset, kind in kinds_of(reply):
            digits = offset + (reply[offset] == "-")
            j = starts.get(digits)
            if j is None:  # a number split over several tokens: score its first token
                j = next(k for k, (s, e) in enumerate(pieces["offset_mapping"]) if s <= digits < e)
            position, target = first + j - 1, ids[first + j]
            total = totals[kind]
            total[0] += probs[position, target].item()
            total[1] += float(probs[position].argmax().item() == target)
            total[2] += 1
    return {kind: (p / n, c / n, int(n)) for kind, (p, c, n) in totals.items()}


def make_parser() -> argparse.ArgumentParser:
    """The parser of ``scripts/probe_embedded.py`` and ``mathteams probe embedded``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--model", default=None, help="model folder (default: the shipped one)")
    parser.add_argument("--problems", type=int, default=300, help="held-out problems to play")
    parser.add_argument("--seed", type=int, default=1, help="seeds the answers under review")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    from trainers.embedded import resolve_model

    figures = probe(resolve_model(args.model), args.problems, args.seed)
    print("| number | p(right token) | first choice right | count |\n|---|---|---|---|")
    for kind, (p, c, n) in sorted(figures.items(), key=lambda item: item[1][0]):
        print(f"| {kind} | {p:.3f} | {c:.3f} | {n} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
