"""Build (or find) the embedded default model and print its folder.

    python scripts/build_embedded.py                    # CPU; 1-1.5 h on 2 cores, cached afterwards
    python scripts/build_embedded.py --device cuda      # minutes on a GPU (not bit-identical)
    python scripts/build_embedded.py --cache-dir DIR --force

The folder is named by the recipe's hash under $MATHTEAMS_HOME (default ~/.cache/mathteams); every
script that is given no model uses it. A folder built elsewhere (e.g. on a GPU machine) can be
copied there under the same name.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainers.embedded import EmbeddedRecipe, build_embedded, embedded_path


def main(argv: list[str] | None = None) -> Path:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--device", default="cpu", help="where the SFT runs: cpu or cuda")
    parser.add_argument("--cache-dir", default=None, help="instead of $MATHTEAMS_HOME")
    parser.add_argument("--force", action="store_true", help="rebuild even if the folder exists")
    args = parser.parse_args(argv)
    recipe = EmbeddedRecipe()
    print(f"recipe {recipe.key()}: {json.dumps(vars(recipe))}")
    print(f"folder {embedded_path(recipe, args.cache_dir)}")
    began = time.perf_counter()
    path = build_embedded(
        recipe, cache_dir=args.cache_dir, force=args.force, progress=True, device=args.device
    )
    sft = json.loads((path / "recipe.json").read_text())["sft"]
    print(f"built in {time.perf_counter() - began:.0f} s; SFT loss curve {sft['loss_curve']}")
    print(path)
    return path


if __name__ == "__main__":
    main()
