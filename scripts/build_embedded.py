"""Rebuild the embedded default model from its recipe into trainers/embedded/model/.

    python scripts/build_embedded.py                    # CPU, 2 threads: bit-identical rebuild
    python scripts/build_embedded.py --out DIR          # somewhere else (e.g. to compare)
    python scripts/build_embedded.py --device cuda      # on a GPU (not bit-identical)

The shipped files are committed, so nothing needs building to use the project; run this after
changing `trainers.embedded.EmbeddedRecipe` or the transcripts, or to check the shipped files
(`--check` compares the rebuild with them, byte for byte, and exits 1 on a difference).
A recipe with `tool_fraction` > 0 (not the shipped one) plays tool-env transcripts whose
programs run in the sandbox, so its build needs bubblewrap (see the README).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.embedded import SHIPPED, EmbeddedRecipe, build_embedded, file_digest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--device", default="cpu", help="where the SFT runs: cpu or cuda")
    parser.add_argument("--out", default=str(SHIPPED), help="output folder (default: shipped)")
    parser.add_argument(
        "--check", action="store_true", help="rebuild in a temp folder and compare with --out"
    )
    args = parser.parse_args(argv)
    recipe = EmbeddedRecipe()
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
