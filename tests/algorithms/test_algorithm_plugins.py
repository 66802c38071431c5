"""Learning rules are plugins: the guide's rule, registered from outside the package, trains
a run and resumes from its checkpoint; names and parallel modes are checked when a config is
parsed; a factory that returns something else than a learner is named."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

from mtrl.config import parse_config
from mtrl.errors import ConfigError
from mtrl.plugins import hookimpl, load_plugins
from mtrl.train.trainer import Trainer

pytestmark = pytest.mark.timeout(240)

TINY = """
total_env_steps: 3000
tasks: [{env: gymnasium/CartPole-v1, num_envs: 8}, {env: gymnasium/Acrobot-v1, num_envs: 4}]
actors: {mode: serial}
learner: {algorithm: ALGO, unroll_length: 8, batch_size: 8, model: {encoder_dim: 16, torso: [16]}}
tracking: {console: quiet, csv: false, wandb: {mode: disabled}, final_eval_episodes: 0,
           run_dir: RUNS}
"""


def _guide_plugin() -> types.SimpleNamespace:
    """The rule printed in docs/plugins.md, as a plugin object registered in-process."""
    guide = (Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    block = next(
        b for b in re.findall(r"```python\n(.*?)```", guide, re.S) if "class CountedImpala" in b
    )
    namespace: dict = {}
    exec(compile(block, "docs/plugins.md", "exec"), namespace)
    return types.SimpleNamespace(mtrl_register_algorithms=namespace["mtrl_register_algorithms"])


def _config(plugins, algo: str, tmp_path: Path, extra: str = ""):
    text = TINY.replace("ALGO", algo).replace("RUNS", str(tmp_path / "runs")) + extra
    return parse_config(
        text,
        env_ids=plugins.envs.ids(),
        algorithms=plugins.algorithms.parallel_support(),
    )


def test_the_guides_rule_trains_a_run_and_resumes(tmp_path: Path) -> None:
    plugins = load_plugins(extra={"guide": _guide_plugin()})
    assert "counted-impala" in plugins.algorithms
    assert plugins.infos["guide"].algorithms == ["counted-impala"]
    cfg = _config(plugins, "counted-impala", tmp_path)
    trainer = Trainer(cfg, plugins, console=False)
    try:
        result = trainer.run()
        learner = trainer.learner
        assert type(learner).__name__ == "CountedImpala"
        samples = list(learner.samples)
        version = learner.version
    finally:
        trainer.close()
    assert result.updates == version > 0
    assert (
        samples[0] > 0
        and samples[1] > 0
        and sum(samples) == sum(t.samples for t in trainer.progress)
    )
    resumed = Trainer.resume(result.run_dir, plugins, console=False, total_env_steps=6000)
    try:
        assert resumed.learner.samples == samples, "the rule's own state came back"
        assert resumed.learner.version == version
        resumed.run()
        assert resumed.learner.samples[0] > samples[0]
    finally:
        resumed.close()


def test_an_unknown_rule_is_refused_with_a_did_you_mean(tmp_path: Path) -> None:
    plugins = load_plugins(extra={"guide": _guide_plugin()})
    with pytest.raises(ConfigError, match=r"learner\.algorithm.*did you mean 'counted-impala'"):
        _config(plugins, "counted-impal", tmp_path)
    with pytest.raises(ConfigError, match=r"registered learning rule, not 'zzz'.*known: "):
        _config(plugins, "zzz", tmp_path)
    # Without the registry only the built-in is known.
    with pytest.raises(ConfigError, match="did you mean 'impala'"):
        parse_config(TINY.replace("ALGO", "impal").replace("RUNS", str(tmp_path)))


def test_a_parallel_mode_the_rule_does_not_support_is_refused_in_one_line(
    tmp_path: Path,
) -> None:
    plugins = load_plugins(extra={"guide": _guide_plugin()})
    text = (
        TINY.replace("ALGO", "counted-impala")
        .replace("RUNS", str(tmp_path))
        .replace(
            "batch_size: 8,", "batch_size: 8, parallel: {data_parallel: 2, model_parallel: fsdp},"
        )
    )
    with pytest.raises(ConfigError) as err:
        parse_config(text, algorithms=plugins.algorithms.parallel_support())
    (line,) = err.value.problems
    assert (
        "learning rule 'counted-impala' does not support learner.parallel fsdp and "
        "data_parallel (it supports: none)" in line
    )
    # impala supports every mode.
    ok = text.replace("counted-impala", "impala")
    assert parse_config(ok, algorithms=plugins.algorithms.parallel_support())


def test_a_factory_returning_no_learner_is_named(tmp_path: Path) -> None:
    @hookimpl
    def mtrl_register_algorithms(register):
        register.algorithm("broken", lambda model, cfg, names, ctx, device, lr: object())
        register.algorithm("odd", lambda m, c, n, x, d, lr: None, parallel=("pipeline",))

    plugins = load_plugins(
        extra={"bad": types.SimpleNamespace(mtrl_register_algorithms=mtrl_register_algorithms)}
    )
    info = plugins.infos["bad"]
    assert any("unknown parallel mode(s) ['pipeline']" in p for p in info.errors), info.errors
    cfg = _config(plugins, "broken", tmp_path)
    with pytest.raises(TypeError, match="learning rule 'broken' of plugin 'bad' returned object"):
        Trainer(cfg, plugins, console=False, write_run_dir=False)
