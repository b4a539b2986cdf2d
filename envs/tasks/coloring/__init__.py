"""The ``coloring`` task family: 3-colour a graph with two vertices' colours given, in one folder.

- `generate`: the generator and its levels (a search to solve, a look-up per edge to check);
- `verifier`: the ``coloring`` verifier (a complete proper colouring, the given colours kept),
  registered into `rewards` with the family;
- `faults`: its named faults (`ColoringFaults`: a clashing edge ``BAD u v``, the patch, the
  scripted min-conflicts repair the oracle row plays);
- `rows`: the scripted replies its roles learn from (the embedded recipe's transcripts, scan
  drills and key fields);
- `probe`: how a model plays its roles (``mathteams probe coloring``);
- here: its prompts, its run defaults and the declaration, `FAMILY`, which `envs.tasks`
  registers in one line (`envs.tasks.register_family`).
"""

from __future__ import annotations

from envs.tasks.coloring import probe, rows
from envs.tasks.coloring.faults import ColoringFaults
from envs.tasks.coloring.generate import (
    EDGES,
    MAX_DIFFICULTY,
    PALETTE,
    VERTICES,
    count_colorings,
    generate_problem,
    greedy_fails,
    min_conflicts,
)
from envs.tasks.coloring.verifier import ColoringVerifier
from envs.tasks.family import EmbeddedPart, FamilyProbe, Levels, TaskFamily

FORMAT = "end with the colouring in \\boxed{}, like \\boxed{0 A 1 B 2 C}."
INSTRUCTIONS = {
    "solver": "Colour the graph; {answer_format}",
    "critic": (
        "Check the colouring edge by edge: look up both ends' colours. End with 'OK. Verdict: "
        "correct', or name a clashing edge: 'BAD u v. Verdict: incorrect'."
    ),
    "refiner": "Keep an accepted colouring; on a rejection recolour one end of the named edge, "
    "not a given vertex, to the colour the fewest of its neighbours have; {answer_format}",
}

# A run of reflection on a colouring: its faults are named, so the refiner patches the clashing
# edge the critic names (`envs.tasks.faults`) and is shown that edge and the verdict alone
# (``feedback="fault"``: the critic's scan is for the critic); nothing states an equation, so
# nothing is audited; its critic scans the edges, one mark each (up to 27 at level 4): 160
# tokens a turn.
RUN_DEFAULTS = {
    "math/reflection-v0": {
        "audit": "",
        "refiner_mode": "patch",
        "feedback": "fault",
        "max_completion_length": 160,
    },
}

# The family's own model's recipe (`trainers.embedded`, ``--variant coloring``): transcripts at
# volume (every train problem a solver row; a share with critic and refiner rows), read through a
# tokenizer that makes each vertex number and each colour one token (`spaced_numbers`,
# `single_tokens`), batches grouped by length. Its checks are lookups, not facts, so no drills
# and no number features. ``python scripts/build_embedded.py --variant coloring`` (2 threads).
VARIANT = {
    "num_problems": 0,
    "coloring_problems": 36000,
    "coloring_difficulty": (2, 3, 4),
    "work_fraction": 0.0,
    "review_fraction": 0.25,
    "second_round": 0.5,
    "team_fraction": 0.03,
    "drill_rows": 0,
    "spaced_numbers": True,
    "single_tokens": (" A", " B", " C"),
    "number_features": 0,
    "vocab_size": 1024,  # room for every number below 200 spaced and unspaced
    "initializer_range": 0.1,
    "tie_embeddings": False,
    "batch_size": 64,
    "learning_rate": 1e-3,
    "group_by_length": True,
    "max_steps": 1300,
    "threads": 2,
}

# References the fuzzer scores adversarial text against (`envs.testing.fuzz`).
FUZZ_REFERENCES = (
    "0 A 1 B 2 C 3 A | 0 1, 0 2, 1 2, 1 3, 2 3 | 0 A, 1 B",
    (
        "0 A 1 B 2 C 3 B 4 C 5 A 6 C | 0 1, 0 2, 0 4, 0 6, 1 2, 1 4, 1 5, 2 3, 2 5, 3 4, 3 5, 3 6, "
        "4 5, 5 6 | 0 A, 1 B"
    ),
    "0 A 1 B | 0 1 | 0 A",
)

FAMILY = TaskFamily(
    "coloring",
    generate_problem,
    Levels((1, 2, 3, 4)),
    default_difficulty=1,
    verifier="coloring",
    verifiers={"coloring": ColoringVerifier},
    answer_format=FORMAT,
    instructions=INSTRUCTIONS,
    faults=ColoringFaults(),
    review_first=True,  # a review sees the colouring before the edges
    run_defaults=RUN_DEFAULTS,
    embedded=EmbeddedPart(
        rows=rows.coloring_rows,
        version=rows.VERSION,
        # scan drills: short ones, and ones on the recipe's own train graphs, as long as a
        # critic's scan (`rows.scan_drill_rows`)
        fields={"coloring_drill_rows": 0, "coloring_scan_rows": 0},
        drills=rows.drills,
        key=rows.key_fields,
        variant=VARIANT,
        # not shipped yet: no build has learnt its critic's lookup (docs/results.md, "The
        # family `coloring`")
        model="model-coloring",
    ),
    probe=FamilyProbe(
        "how a model's coloring solver and critic play, and whether its lookup is learnt",
        probe.__doc__ or "",
        probe.add_arguments,
        probe.run,
    ),
    fuzz_references=FUZZ_REFERENCES,
)

__all__ = [
    "EDGES",
    "FAMILY",
    "MAX_DIFFICULTY",
    "PALETTE",
    "VERTICES",
    "ColoringFaults",
    "ColoringVerifier",
    "count_colorings",
    "generate_problem",
    "greedy_fails",
    "min_conflicts",
]
