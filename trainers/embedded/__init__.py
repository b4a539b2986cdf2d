"""The embedded default model: a small LM warm-started on ``unknown`` transcripts, shipped.

Every script uses it when no model is given, so the whole pipeline runs offline on a CPU. The
built files (config, tokenizer, safetensors, ``recipe.json`` with each file's sha256) are
committed under ``trainers/embedded/model/`` and installed as package data: a fresh clone trains
at once. ``python scripts/build_embedded.py`` rebuilds them from `EmbeddedRecipe` (seeded; on a
CPU with the recipe's thread count the rebuild is bit-identical), in about 34 minutes on 2 cores.
`REACH_VARIANT` (``--variant reach``) builds on both task families, ``reach`` (the gap family:
checking a chain is far cheaper than finding it) and ``unknown`` (the control); it is measured
in docs/results.md ("The build on both families") and not shipped.

1. transcripts (`trainers.embedded.transcripts`): ``unknown`` train problems (and, in
   `REACH_VARIANT`, ``reach`` ones, interleaved: the solver guesses a chain at a glance, the
   critic replays the chain's operators on the numbers and compares the end with the target,
   the refiner keeps an accepted chain or gives another, `transcripts.reach_rows`) played
   through the real environments with scripted replies. On ``unknown`` the solver answers at a glance or, in 35% of its
   replies, works back from the stated end one step at a time; the critic checks by substitution
   (replays the steps from the answer one equation each, subtracts the stated result and judges
   by whether that is 0); the refiner keeps an accepted answer and repairs a rejected one by the
   miss or, in half of its repairs, works it out afresh. Arithmetic drill rows (16 sums and
   differences each; in `REACH_VARIANT` 12 facts, half of the rows a ``reach`` check's) are
   mixed in;
2. a byte-level BPE tokenizer trained on those transcripts, with every number below 200 a single
   token, and a Mistral-style model (a folder whose tokenizer transformers loads as saved) built
   from a config with random weights (`agents.tiny`), number embeddings starting as cos/sin
   features;
3. SFT with TRL's `SFTTrainer`, loss on the assistant reply only;
4. calibration (`calibrate`): the temperature that minimises the NLL of held-out transcripts is
   folded into the final norm, times a further 1.5 (`EmbeddedRecipe.sharpen`), so sampling at
   T=1 draws from the calibrated distributions at T=1/1.5: the copies and sums the model ranks
   first (right 99-100% of the time) are sampled nearly always, as a real LM's are.

The shipped build's figures (its solver, critic and team on held-out problems, and how a
build is reproduced): docs/results.md, "The embedded team on held-out problems".
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from dataclasses import asdict, dataclass, field, make_dataclass
from pathlib import Path
from typing import Any

import envs
from agents.models import resolve_model_name
from envs.tasks.problems import DEFAULT_TASK

logger = logging.getLogger(__name__)

# The scripts' default task, the one the shipped build is trained on. ``reach`` (the family with a
# generation-verification gap) joins it in `REACH_VARIANT`, not shipped (docs/results.md, "The build on both families").
EMBEDDED_TASK = DEFAULT_TASK  # the default task (`envs.tasks.problems`) is the one it is built on
RECIPE_VERSION = 13  # bump whenever the transcripts or the training change
# bump whenever ``reach``'s transcripts change (`transcripts.reach_rows`, `reach_fact`); keyed only
# into recipes with reach rows, so the shipped (``unknown``-only) key stays as it is. Five other
# checks were built and measured on the model's own answers (set each result beside the answer's;
# judge the end by an equality, drilled; judge it by copying the question, ``Reach 20 from them:
# it checks``; steps written with "is"): none beat this one's (issue 40's notes).
REACH_VERSION = 1
SHIPPED = Path(__file__).resolve().parent / "model"
REBUILD = "python scripts/build_embedded.py"
MODEL_FILES = (  # at least these; recipe.json lists every file with its sha256
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
)


# Recipe fields added after the shipped build, keyed only when they differ from these values, so
# the shipped key stays as it was.
KEYED_WHEN_SET = {
    "spaced_numbers": False,
    "single_tokens": (),
    "group_by_length": False,
    "initializer_range": 0.02,
    "tie_embeddings": True,
}


class EmbeddedModelError(RuntimeError):
    """The shipped embedded model is missing, damaged or stale; the message says how to fix it."""


@dataclass(frozen=True)
class _Recipe:
    """How the embedded model is built; its hash is recorded with the shipped files.

    Args:
        seed (`int`, 0): seeds the transcripts, the weights and the SFT data order.
        num_problems (`int`): ``unknown`` train problems turned into transcripts.
        difficulty (`tuple[int, ...]`): ``unknown`` levels (steps to undo) of the transcripts
            (default, as every family's levels here: the task's declared default levels,
            `envs.tasks.Levels`, which runs play by default).
        reach_problems (`int`, 0): ``reach`` train problems turned into transcripts (the gap
            family, `transcripts.reach_rows`); 0 in the shipped recipe (`REACH_VARIANT`: 8,000).
        reach_difficulty (`tuple[int, ...]`): ``reach`` levels of the transcripts.
        <family>_problems, <family>_difficulty (`int`, 0; the family's default levels): each task
            family's (`envs.tasks.family.EmbeddedPart`) train problems and levels of its
            transcripts, then the family's own fields (`family_fields`).
        arch (`str`, "mistral"): the `build_tiny_model` architecture; "mistral" because
            transformers loads its folders with the saved tokenizer pipeline as is.
        whole_numbers (`bool`, True): numbers are single tokens (`build_tokenizer`), so copying
            and comparing a number is one attention lookup, not a digit-by-digit one.
        spaced_numbers (`bool`, False): a number keeps the space before it (`build_tokenizer`):
            ` 7` is one token, not two, so an edge list ``0 1, 0 2`` reads three tokens an edge.
        single_tokens (`tuple[str, ...]`, ()): strings the tokenizer keeps whole (the colours
            `` A``, `` B``, `` C``: each one token, alike).
        number_features (`int`, 32): the first ``2 * number_features`` embedding dims of each
            number token start as cos/sin of the number at that many periods (2 to 400), so
            adding k is a rotation the model need not discover (`number_embeddings`); 0: random.
        vocab_size, hidden_size, num_layers, num_heads, intermediate_size: the model.
        initializer_range (`float`, 0.02), tie_embeddings (`bool`, True): the random weights'
            std and whether the output layer shares the input embeddings. On graph colouring's
            solver (level 2, 400 steps of 64, the probe's compact text) 0.02 and tied reached
            0.14 exact, 0.1 and tied 0.47, 0.1 and untied 0.59 (issue notes).
        review_fraction, second_round, team_fraction: transcript mix (`transcripts.sft_rows`).
        work_fraction (`float`, 0.35): share of solver-like replies worked step by step
            (`transcripts.work_reply`) rather than given at a glance: the careful behaviour the
            SFT model takes seldom and RL can make its habit.
        rework_fraction (`float`, 0.5): share of the refiner's repairs of a rejected answer
            that work the problem out afresh instead of applying the critic's miss.
        tool_fraction (`float`, 0.0): share of problems that give ``math/tool-v0`` rows
            (analyzer, executor, verifier; the programs run in the sandbox at build time, so
            such a build needs bubblewrap). The executor writes the problem as a search
            (`transcripts.program_reply`): copying, no arithmetic. A build at 0.1 (not shipped)
            had its tool team start at maj1@turnK 0.82-0.85 against 0.42-0.44 for the same
            model alone (GRPO moves that little), but its reflection solver then learnt to 0.97
            alone, leaving its team no room (measured on the earlier overlapping split; git
            history of docs/results.md); so the shipped build has none.
        drill_rows, drill_facts: arithmetic drill rows mixed into the SFT data
            (`transcripts.drill_rows`), each stating that many facts.
        drill_reach_share (`float`, 0.0): share of the drill rows whose facts are a ``reach``
            check's (products, values up to 150; `transcripts.reach_fact`).
        max_steps, batch_size, learning_rate: SFT.
        group_by_length (`bool`, False): the SFT's batches hold rows of about one length, so a
            batch of solver rows is not padded to a critic row's length, and come in a shuffled
            order (`sft.length_batched`), so consecutive steps do not drift through the lengths
            (transformers' ``group_by_length`` sorts runs of 50 batches by length: a build on it
            learnt none of its roles, issue notes).
        calibration_problems (`int`, 300): ``unknown`` train problems the SFT never saw whose
            transcripts fit the model's logit scale after SFT (`calibrate`); 0: no calibration.
        sharpen (`float`, 1.5): a further factor on the fitted logit scale, folded in with
            it: sampling the shipped model at temperature 1 is sampling the calibrated one at
            1 / sharpen. The calibrated model's copies and sums are its first choice 99-100% of
            the time but are sampled right only 92-95% of the time (`scripts/probe_embedded.py`):
            noise a real LM does not make when it copies a number. The fitted scale cannot remove
            it, since the few tokens the model gets wrong with confidence hold it down. Folded
            in by the calibration: with ``calibration_problems`` 0, neither is.
        threads (`int`, 1): torch threads of the build; the same count gives the same bits. One:
            the build runs alike on any machine, and beside other jobs (two threads of this
            small model slowed ten-fold when another process shared the two cores). On an idle
            2-core machine two are 1.55x faster (0.54 s a step against 0.84 s): `REACH_VARIANT`
            builds on two.
    """

    seed: int = 0
    num_problems: int = 13000
    difficulty: tuple[int, ...] = field(default_factory=lambda: _task_default("unknown"))
    reach_problems: int = 0
    reach_difficulty: tuple[int, ...] = field(default_factory=lambda: _task_default("reach"))
    arch: str = "mistral"
    whole_numbers: bool = True
    spaced_numbers: bool = False
    single_tokens: tuple[str, ...] = ()
    number_features: int = 32
    vocab_size: int = 768
    hidden_size: int = 128
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 384
    initializer_range: float = 0.02
    tie_embeddings: bool = True
    review_fraction: float = 0.7
    second_round: float = 0.5
    team_fraction: float = 0.15
    work_fraction: float = 0.35
    rework_fraction: float = 0.5
    tool_fraction: float = 0.0
    drill_rows: int = 20000
    drill_facts: int = 16
    drill_reach_share: float = 0.0
    max_steps: int = 3500
    batch_size: int = 16
    learning_rate: float = 2e-3
    group_by_length: bool = False
    calibration_problems: int = 300
    sharpen: float = 1.5
    threads: int = 1

    def __post_init__(self) -> None:
        if not self.sharpen > 0:
            raise ValueError(f"sharpen={self.sharpen} must be > 0 (it multiplies the logit scale)")
        if not 0 <= 2 * self.number_features <= self.hidden_size:
            raise ValueError(
                f"number_features={self.number_features} needs {2 * self.number_features} of the "
                f"{self.hidden_size} embedding dims; pass at most {self.hidden_size // 2}"
            )

    def key(self) -> str:
        fields = asdict(self)
        if not self.reach_problems:  # no reach rows: the key the recipe had before reach's fields
            fields.pop("reach_problems")
            fields.pop("reach_difficulty")
        if not self.drill_reach_share:
            fields.pop("drill_reach_share")
        for family in RECIPE_FAMILIES:
            _family_key(family, fields)
        for name, before in KEYED_WHEN_SET.items():
            if fields[name] == before:  # the key before these fields
                fields.pop(name)
        if self.reach_problems or self.drill_reach_share:
            fields["reach_version"] = REACH_VERSION
        blob = json.dumps({"version": RECIPE_VERSION, **fields}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


# The build on both families (``reach``, the gap family, and ``unknown``, the control): measured,
# not shipped. On validation its ``reach`` critic adds +0.107 to the solver's accuracy (``unknown``:
# +0.052), but it plays ``unknown`` worse than the shipped build (solver 0.10 against 0.21) and 15
# CPU minutes of GRPO move neither family's team measurably (docs/results.md, "The build on both
# families"). ``python scripts/build_embedded.py --variant reach --out DIR`` builds it (24 min on 2
# threads).
REACH_VARIANT = {
    "num_problems": 4000,
    "reach_problems": 8000,
    "drill_rows": 4000,
    "drill_facts": 12,
    "drill_reach_share": 0.5,
    "max_steps": 2500,
    "threads": 2,
}


def family_fields(families: Any = None) -> list[tuple[str, Any, Any]]:
    """The recipe fields of each task family with an embedded part (`envs.tasks.family`;
    default: `embedded_families`): ``<name>_problems`` (0), ``<name>_difficulty`` (the
    family's default levels) and the family's own `EmbeddedPart.fields`."""
    out: list[tuple[str, Any, Any]] = []
    for family in embedded_families() if families is None else families:
        name = family.name
        levels = field(default_factory=lambda name=name: _task_default(name))
        out += [(f"{name}_problems", int, field(default=0)), (f"{name}_difficulty", tuple, levels)]
        out += [(k, type(v), field(default=v)) for k, v in family.embedded.fields.items()]
    return out


def embedded_families() -> list[Any]:
    """The registered task families the embedded recipe can build on (an `EmbeddedPart`)."""
    return [family for family in envs.families() if family.embedded is not None]


def _family_key(family: Any, fields: dict[str, Any]) -> None:
    """Edit the recipe's key `fields` for `family` (`EmbeddedPart.key`; by default its fields
    drop out without its problems, the key before it, and its version joins with them)."""
    part, name = family.embedded, family.name
    if part.key is not None:
        part.key(fields)
    elif fields[f"{name}_problems"]:
        fields[f"{name}_version"] = part.version
    else:
        for key in (f"{name}_problems", f"{name}_difficulty", *part.fields):
            fields.pop(key)


# The families whose fields the recipe holds: those registered when this module is imported.
RECIPE_FAMILIES = tuple(embedded_families())
EmbeddedRecipe = make_dataclass(
    "EmbeddedRecipe",
    family_fields(RECIPE_FAMILIES),
    bases=(_Recipe,),
    frozen=True,
    namespace={"__doc__": _Recipe.__doc__, "__module__": __name__},
)
VARIANTS = {
    "reach": REACH_VARIANT,
    **{f.name: dict(f.embedded.variant) for f in RECIPE_FAMILIES if f.embedded.variant},
}
# A family's own model's folder (beside the shipped one): built with ``--variant <name>``.
VARIANT_OUT = {
    f.name: SHIPPED.parent / f.embedded.model for f in RECIPE_FAMILIES if f.embedded.model
}


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- shipped files


def check_model_dir(path: str | Path = SHIPPED, recipe: EmbeddedRecipe | None = None) -> Path:
    """Raise `EmbeddedModelError` unless `path` holds every file of a built embedded model,
    each with the sha256 its ``recipe.json`` records (and, given `recipe`, built from it)."""
    path = Path(path)
    manifest_path = path / "recipe.json"
    variant = next((name for name, out in VARIANT_OUT.items() if out == path), None)
    rebuild = f"{REBUILD} --variant {variant}" if variant else REBUILD
    hint = f"rebuild it with `{rebuild}`"
    if not manifest_path.is_file():
        raise EmbeddedModelError(f"the embedded model's {manifest_path} is missing; {hint}")
    try:
        manifest = json.loads(manifest_path.read_text())
        digests = manifest["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EmbeddedModelError(
            f"the embedded model's {manifest_path} is unreadable ({exc}); {hint}"
        ) from exc
    for name in sorted({*MODEL_FILES, *digests}):
        file = path / name
        if not file.is_file():
            raise EmbeddedModelError(f"the embedded model's {file} is missing; {hint}")
        if file_digest(file) != digests.get(name):
            raise EmbeddedModelError(
                f"the embedded model's {file} is damaged (its sha256 differs from the one in "
                f"{manifest_path}); restore it (`git checkout -- {file}`) or {hint}"
            )
    if recipe is not None and manifest.get("key") != recipe.key():
        raise EmbeddedModelError(
            f"the embedded model in {path} was built from recipe {manifest.get('key')}, not the "
            f"current {recipe.key()}; {hint}"
        )
    return path


def model_for(task: Any = None) -> Path:
    """The shipped model that plays `task` (a name; a mixed task's first member decides): a
    task family's own model for it (`EmbeddedPart.model`), the ``unknown`` model for every
    other task."""
    family = envs.get_family(task)
    part = family.embedded if family is not None else None
    return SHIPPED.parent / part.model if part is not None and part.model else SHIPPED


def resolve_model(name_or_path: str | None, task: Any = None) -> str:
    """`name_or_path` as given (a fetched catalog model's name, `agents.models`, as its cache
    folder), or the shipped embedded model's folder for `task` (checked) when None
    (`model_for`)."""
    if name_or_path:
        return resolve_model_name(name_or_path)
    return str(check_model_dir(model_for(task)))


# ---------------------------------------------------------------- build


def build_embedded(
    recipe: EmbeddedRecipe | None = None,
    out_dir: str | Path = SHIPPED,
    progress: bool = False,
    device: str = "cpu",
) -> Path:
    """Build the model of `recipe` into `out_dir` (replacing what is there); return `out_dir`.

    `device` ("cpu" or "cuda") is where the SFT runs; only a CPU build with the recipe's
    thread count is bit-reproducible.
    """
    recipe = recipe or EmbeddedRecipe()
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir.parent, prefix=".build-") as tmp:
        model_dir = Path(tmp) / "model"
        from trainers.embedded.sft import train

        metrics = train(recipe, Path(tmp), model_dir, progress, device)
        if recipe.calibration_problems:
            metrics["calibration"] = calibrate(model_dir, recipe)
        files = {p.name: file_digest(p) for p in sorted(model_dir.iterdir())}
        manifest = {"key": recipe.key(), "recipe": asdict(recipe), "sft": metrics, "files": files}
        (model_dir / "recipe.json").write_text(json.dumps(manifest, indent=2) + "\n")
        if out_dir.exists():
            shutil.rmtree(out_dir)
        model_dir.rename(out_dir)
    logger.info("built the embedded model in %s", out_dir)
    return out_dir


def _task_default(task: str) -> tuple[int, ...]:
    """`task`'s declared default levels (`envs.tasks.Levels`): the recipe's levels of it."""
    from envs.tasks import default_levels

    return tuple(default_levels(task))


def embedded_levels(task: str, recipe: EmbeddedRecipe | None = None) -> list[int]:
    """The levels the recipe builds on for `task` (``reach``, a task family: its levels of it,
    ``<name>_difficulty``; ``unknown``: its `difficulty`). By default the tasks' own defaults
    (`envs.tasks.Levels`), which runs default to; a recipe built on other levels says so here."""
    recipe = recipe or EmbeddedRecipe()
    if task == "reach":
        return list(recipe.reach_difficulty)
    if envs.get_family(task) is not None and "+" not in str(task):
        return list(getattr(recipe, f"{task}_difficulty", None) or envs.default_levels(task))
    return list(recipe.difficulty)


def recipe_problems(recipe: EmbeddedRecipe, size: int, task: str = "unknown") -> list[Any]:
    """The first `size` train problems of `task` (``unknown`` or ``reach``) at the recipe's
    levels for it (a small level's problems cycled: ``unknown`` level 1 holds 333 train
    problems); the build reads no other split."""
    import envs

    source = envs.make_task(
        task,
        split="train",
        size=size,
        difficulty=embedded_levels(task, recipe),
        seed=recipe.seed,
        repeat=True,
    ).source
    return list(source)


def recipe_families(recipe: EmbeddedRecipe) -> dict[str, int]:
    """The task families of the recipe and how many train problems of each it turns into
    transcripts."""
    return {
        "unknown": recipe.num_problems,
        "reach": recipe.reach_problems,
        **{f.name: getattr(recipe, f"{f.name}_problems", 0) for f in embedded_families()},
    }


def mixed_problems(recipe: EmbeddedRecipe) -> list[Any]:
    """Each family's first train problems (`recipe_families`), interleaved in a seeded order,
    so the SFT's batches mix the families."""
    import random

    families = {task: count for task, count in recipe_families(recipe).items() if count > 0}
    problems = [p for task, count in families.items() for p in recipe_problems(recipe, count, task)]
    if len(families) > 1:
        random.Random(f"mix-{recipe.seed}").shuffle(problems)
    return problems


def recipe_transcripts(
    recipe: EmbeddedRecipe, problems: list[Any], rows_seed: int, review_fraction: float
) -> list[dict[str, Any]]:
    """Transcript rows (`transcripts.sft_rows`, drill rows left out) of `problems`, mixed as
    the recipe says."""
    from trainers.embedded.transcripts import sft_rows

    return sft_rows(
        list(problems),
        rows_seed,
        review_fraction,
        recipe.second_round,
        recipe.team_fraction,
        recipe.work_fraction,
        recipe.rework_fraction,
        recipe.tool_fraction,
    )


def calibration_rows(recipe: EmbeddedRecipe) -> list[dict[str, Any]]:
    """Transcript rows (every role, drill rows left out) of ``unknown`` train problems the SFT
    never saw (the train split's next problems, less any text the SFT had: a small level gives
    none), played like the training transcripts. No validation or test problem is read."""
    from envs.tasks.splits import canonical_text

    fresh = []
    families = {task: count for task, count in recipe_families(recipe).items() if count}
    share = -(-recipe.calibration_problems // len(families))
    for task, count in families.items():
        seen = {canonical_text(p["question"]) for p in recipe_problems(recipe, count, task)}
        pool = recipe_problems(recipe, count + 4 * share, task)[count:]
        unseen = [p for p in pool if canonical_text(p["question"]) not in seen]
        if len(unseen) < share:
            raise ValueError(
                f"the recipe's {task} train split gives {len(unseen)} problems the SFT never "
                f"saw, fewer than its share {share} of calibration_problems="
                f"{recipe.calibration_problems}"
            )
        fresh += unseen[:share]
    return recipe_transcripts(recipe, fresh[: recipe.calibration_problems], recipe.seed + 1, 1.0)


def fit_logit_scale(
    logits: Any, targets: Any, grid: tuple[float, float, float] = (0.5, 6.0, 0.05)
) -> tuple[float, float, float]:
    """The scale `s` (on a grid) minimising the mean negative log-likelihood of `targets` under
    ``softmax(s * logits)``: post-hoc temperature scaling, fitted on held-out tokens.

    Returns:
        (s, NLL at s = 1, NLL at s).
    """
    import torch

    low, high, step = grid
    scales = [round(low + i * step, 4) for i in range(round((high - low) / step) + 1)]
    logits, targets = logits.double(), targets[:, None]

    def nll(scale: float) -> float:
        return -(logits * scale).log_softmax(-1).gather(1, targets).mean().item()

    with torch.no_grad():
        losses = {scale: nll(scale) for scale in scales}
        best = min(scales, key=lambda scale: (losses[scale], scale))
        return best, nll(1.0), losses[best]


def calibrate(model_dir: Path, recipe: EmbeddedRecipe) -> dict[str, float]:
    """Fold a fitted temperature into the model in `model_dir` (rewritten in place).

    SFT on transcripts leaves the tiny model underconfident: the number it ranks first is right
    far more often than the probability it gives that number (e13's head-of-chain step: first
    choice right 0.88 of the time at p 0.47), so sampling at temperature 1 is much worse than its
    first choices. The scale that minimises the held-out NLL of the assistant tokens
    (`calibration_rows`) multiplies the final norm's weight, which scales every logit (the LM
    head is linear, without bias), so T=1 samples from the calibrated distribution; then by
    `recipe.sharpen` (`EmbeddedRecipe`), so T=1 samples it at temperature 1 / sharpen.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(recipe.threads)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    logits, targets = [], []
    with torch.no_grad():
        for row in calibration_rows(recipe):
            encoded = tokenizer.apply_chat_template(
                row["messages"], return_dict=True, return_assistant_tokens_mask=True
            )
            ids = torch.tensor(encoded["input_ids"])
            mask = torch.tensor(encoded["assistant_masks"], dtype=torch.bool)[1:]
            out = model(input_ids=ids[None]).logits[0, :-1]
            logits.append(out[mask])
            targets.append(ids[1:][mask])
    scale, before, after = fit_logit_scale(torch.cat(logits), torch.cat(targets))
    norm = model.get_decoder().norm
    with torch.no_grad():
        norm.weight.mul_(scale)
        norm.weight.mul_(recipe.sharpen)  # apart: the bits are the calibrated ones x sharpen
    model.save_pretrained(model_dir)
    logger.info(
        "logit scale %.2f (x %.2f sharpened): held-out NLL %.4f -> %.4f",
        scale,
        recipe.sharpen,
        before,
        after,
    )
    return {
        "logit_scale": scale,
        "sharpen": recipe.sharpen,
        "nll_before": round(before, 5),
        "nll_after": round(after, 5),
    }
