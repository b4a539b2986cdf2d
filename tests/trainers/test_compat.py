"""`trainers.compat`: clear errors for unsupported versions and missing private upstream API."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

import pytest
import trl.trainer.utils
from trl import GRPOTrainer

from trainers import compat


def installed(**versions: str):
    """An `installed_version` replacement: `versions` (underscores for dashes), else the real."""
    real = compat.installed_version
    return lambda dist: versions.get(dist.replace("-", "_"), real(dist))


def test_installed_versions_are_supported():
    assert compat.check_versions() == []


def test_an_old_trl_is_refused_naming_the_range_the_private_api_and_the_fix(monkeypatch):
    monkeypatch.delenv(compat.ALLOW_UNSUPPORTED, raising=False)
    monkeypatch.setattr(compat, "installed_version", installed(trl="1.9.0"))
    with pytest.raises(ImportError) as caught:
        compat.check_versions()
    message = str(caught.value)
    assert "trl 1.9.0 is installed; mathteams supports trl>=1.16,<1.17 because" in message
    assert "GRPOTrainer._generate_and_score_completions" in message
    assert "trl.trainer.utils.add_fused_lm_head" in message
    assert "pip install 'trl>=1.16,<1.17'" in message
    assert "transformers" not in message  # only what is wrong


@pytest.mark.parametrize(
    ("dist", "version"),
    [
        ("trl", "1.17.0"),  # the next minor may change the private hooks
        ("trl", "1.17.0.dev0"),  # a pre-release of it too
        ("trl", "1.16.0rc1"),  # and a pre-release of the tested one
        ("transformers", "5.24.0"),
        ("transformers", "4.57.1"),
    ],
)
def test_versions_outside_a_strict_range_are_refused(monkeypatch, dist, version):
    monkeypatch.delenv(compat.ALLOW_UNSUPPORTED, raising=False)
    with pytest.raises(ImportError, match=f"{dist} {version} is installed"):
        compat.check_versions({dist: version})


def test_patch_releases_inside_the_range_pass():
    assert compat.check_versions({"trl": "1.16.4", "transformers": "5.23.9"}) == []


def test_the_escape_hatch_turns_the_error_into_a_warning(monkeypatch):
    monkeypatch.setenv(compat.ALLOW_UNSUPPORTED, "1")
    with pytest.warns(UserWarning, match=r"trl 1\.17\.0 is installed; mathteams supports"):
        warned = compat.check_versions({"trl": "1.17.0"})
    assert len(warned) == 1


def test_public_api_dependencies_outside_their_range_only_warn(monkeypatch):
    monkeypatch.delenv(compat.ALLOW_UNSUPPORTED, raising=False)
    with pytest.warns(UserWarning, match=r"torch 2\.11\.0 is installed; mathteams was tested"):
        warned = compat.check_versions({"torch": "2.11.0"})
    assert "pip install 'torch>=2.13,<3'" in warned[0]


def test_a_missing_dependency_is_not_a_version_problem():
    assert compat.version_problem("peft", None) is None


def test_the_installed_private_api_passes():
    compat.check_private_api()


def test_a_missing_hook_names_the_class_the_attribute_and_the_version(monkeypatch):
    monkeypatch.delattr(GRPOTrainer, "_compute_loss")
    with pytest.raises(AttributeError) as caught:
        compat.check_private_api()
    message = str(caught.value)
    assert message.startswith(
        "GRPOTrainer._compute_loss (trl.trainer.grpo_trainer.GRPOTrainer) does not exist"
    )
    assert f"trl {compat.installed_version('trl')} is installed" in message
    assert "pip install 'trl>=1.16,<1.17'" in message


def test_a_hook_whose_parameters_changed_is_reported(monkeypatch):
    # TRL 1.14's shape of this method: the overrides pass input_ids, ... positionally.
    def changed(self, model, *args, batch_size=None, compute_aux_loss=False, **kwargs):
        raise AssertionError("never called")

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", changed)
    with pytest.raises(AttributeError, match=r"takes \(self, model, args, batch_size, "):
        compat.check_private_api()


def test_a_missing_internal_function_is_reported(monkeypatch):
    monkeypatch.delattr(trl.trainer.utils, "add_fused_lm_head")
    with pytest.raises(AttributeError, match=r"^trl\.trainer\.utils\.add_fused_lm_head .*does not"):
        compat.check_private_api()
    with pytest.raises(AttributeError, match="add_fused_lm_head"):
        compat.internal("add_fused_lm_head")


def test_a_trainer_without_an_instance_attribute_is_reported():
    trainer = SimpleNamespace(_buffered_inputs=None, _step=0)
    with pytest.raises(AttributeError, match=r"GRPOTrainer\._metrics .* not set on this Simple"):
        compat.check_trainer(trainer)
    with pytest.raises(AttributeError, match=r"GRPOTrainer\._buffered_inputs .* not set on"):
        compat.buffered_inputs(SimpleNamespace())


def test_accessors_read_and_write_the_trainer_state():
    trainer = SimpleNamespace(
        _buffered_inputs=[{"a": 1}], _step=3, _metrics={"train": defaultdict(list)}
    )
    compat.check_trainer(trainer)
    compat.set_buffered_inputs(trainer, [{"b": 2}])
    compat.log_metric(trainer, "train", "ppo/value_loss", 0.5)
    assert compat.buffered_inputs(trainer) == [{"b": 2}]
    assert compat.micro_step(trainer) == 3
    assert trainer._metrics["train"]["ppo/value_loss"] == [0.5]


def test_tied_weight_keys():
    assert compat.tied_weight_keys(SimpleNamespace(_tied_weights_keys={"lm_head.weight": "x"})) == {
        "lm_head.weight"
    }
    assert compat.tied_weight_keys(SimpleNamespace(_tied_weights_keys=None)) == set()
    assert compat.tied_weight_keys(object()) == set()


def test_hook_marks_a_declared_override_and_refuses_an_undeclared_one():
    def _compute_loss(self, model, inputs):
        return None

    assert compat.hook(_compute_loss) is _compute_loss
    assert _compute_loss.compat_hook is compat.HOOKS["_compute_loss"]

    def _calculate_rewards(self, inputs):
        return None

    with pytest.raises(TypeError, match="declares no hook '_calculate_rewards'"):
        compat.hook(_calculate_rewards)


def test_lazy_names_resolve_on_use_and_unknown_names_raise():
    from trl.generation.vllm_client import VLLMClient

    from trainers.compat import (
        VLLMClient as Lazy,  # as trainers.algorithms.grpo.rollout_policy imports it
    )

    assert Lazy is VLLMClient
    with pytest.raises(AttributeError, match="has no attribute 'VLLMClients'"):
        _ = compat.VLLMClients


def test_a_missing_pettingzoo_helper_is_reported(monkeypatch):
    from pettingzoo import AECEnv

    monkeypatch.delattr(AECEnv, "_was_dead_step")
    with pytest.raises(AttributeError, match=r"^AECEnv\._was_dead_step .*pettingzoo>=1\.27,<2"):
        compat.check_private_api()
