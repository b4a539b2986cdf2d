"""Rebuild the embedded default model from its recipe into trainers/embedded/model/.

    python scripts/build_embedded.py                    # CPU, 2 threads: bit-identical rebuild
    python scripts/build_embedded.py --out DIR          # somewhere else (e.g. to compare)
    python scripts/build_embedded.py --device cuda      # on a GPU (not bit-identical)
    python scripts/build_embedded.py --out DIR --set tool_fraction=0.1   # a variant recipe
    python scripts/build_embedded.py --variant FAMILY    # a task family's own model, its folder

The shipped files are committed, so nothing needs building to use the project; run this after
changing `trainers.embedded.EmbeddedRecipe` or the transcripts, or to check the shipped files
(`--check` compares the rebuild with them, byte for byte, and exits 1 on a difference).
`--set FIELD=VALUE` (repeatable) changes one `EmbeddedRecipe` field, to build a variant that the
scripts take with `--model_name_or_path DIR`. A recipe with `tool_fraction` > 0 (not the
shipped one) plays tool-env transcripts whose programs run in the sandbox, so its build needs
bubblewrap (see the README).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

from trainers.embedded import (
    SHIPPED,
    VARIANT_OUT,
    VARIANTS,
    EmbeddedRecipe,
    build_embedded,
    file_digest,
)


def recipe_with(settings: list[str], variant: str | None = None) -> EmbeddedRecipe:
    """The default `EmbeddedRecipe` (with a `variant`, its fields: "reach", `REACH_VARIANT`, the
    build on both task families; a task family's name, its own model's, `EmbeddedPart.variant`)
    with each ``FIELD=VALUE`` of `settings` applied (the value converted
    to the field's type; a tuple field takes comma-separated items)."""
    types = {f.name: type(getattr(EmbeddedRecipe(), f.name)) for f in fields(EmbeddedRecipe)}
    changes: dict[str, object] = dict(VARIANTS[variant]) if variant else {}
    for setting in settings:
        name, sep, value = setting.partition("=")
        name = name.strip()
        if not sep or name not in types:
            raise SystemExit(
                f"--set {setting!r}: expected FIELD=VALUE with FIELD one of {', '.join(types)}"
            )
        kind = types[name]
        try:
            if kind is bool:
                if value.lower() not in ("true", "false"):
                    raise ValueError("expected true or false")
                changes[name] = value.lower() == "true"
            elif kind is tuple:
                changes[name] = tuple(int(item) for item in value.split(",") if item.strip())
            else:
                changes[name] = kind(value)
        except ValueError as exc:
            raise SystemExit(
                f"--set {setting!r}: {name} needs a value of type {kind.__name__} ({exc})"
            ) from exc
    try:
        return replace(EmbeddedRecipe(), **changes)
    except ValueError as exc:
        raise SystemExit(f"--set: {exc}") from exc


def make_parser() -> argparse.ArgumentParser:
    """The parser of ``scripts/build_embedded.py`` and ``mathteams build-embedded``."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--device", default="cpu", help="where the SFT runs: cpu or cuda")
    parser.add_argument(
        "--out",
        default=None,
        help="output folder (default: the shipped model's; --variant FAMILY: the family's own)",
    )
    parser.add_argument(
        "--check", action="store_true", help="rebuild in a temp folder and compare with --out"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change one EmbeddedRecipe field (repeatable), e.g. tool_fraction=0.1",
    )
    parser.add_argument(
        "--variant",
        choices=sorted(VARIANTS),
        default=None,
        help="reach: the build on both task families (REACH_VARIANT; not shipped, see "
        "docs/results.md; give it its own --out); "
        + "; ".join(
            f"{name}: the {name} family's own model (into trainers/embedded/{out.name}/)"
            for name, out in VARIANT_OUT.items()
        ),
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    recipe = recipe_with(args.set, args.variant)
    shipped = VARIANT_OUT.get(args.variant, SHIPPED)
    args.out = args.out or str(shipped)
    if (
        (args.set or args.variant not in (None, *VARIANT_OUT))
        and not args.check
        and Path(args.out) in (SHIPPED, *VARIANT_OUT.values())
    ):
        parser.error("--set builds a variant: give it its own --out (the shipped files stay)")
    print(f"recipe {recipe.key()}: {json.dumps(asdict(recipe))}")
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "model" if args.check else Path(args.out)
        build_embedded(recipe, out, progress=True, device=args.device)
        seconds = time.perf_counter() - began
        sft = json.loads((out / "recipe.json").read_text())["sft"]
        print(f"built in {seconds:.0f} s; SFT loss curve {sft['loss_curve']}")
        if not args.check:
            print(out)
            return 0
        shipped = Path(args.out)
        names = sorted({p.name for p in out.iterdir()} | {p.name for p in shipped.glob("*")})
        differ = [
            name
            for name in names
            if not (out / name).is_file()
            or not (shipped / name).is_file()
            or file_digest(out / name) != file_digest(shipped / name)
        ]
    if differ:
        print(f"the rebuild differs from {args.out} in: {', '.join(differ)}")
        return 1
    print(f"the rebuild is identical to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
