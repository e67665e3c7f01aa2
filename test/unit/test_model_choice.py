"""`model: default:auto` (llm/model_choice.py): the 1.5B where it is fast enough, else the 0.5B.

The choice's rule is checked with given clause times, the measurement on the real llama.cpp
and the embedded 0.5B where they are installed (README command 2 installs both; skipped
elsewhere, saying why); the manager resolving it with both real models is in
test/test_llamacpp_backend.py.
"""
from __future__ import annotations

import logging
import math

import pytest

from vision_dialogue.llm import model_choice
from vision_dialogue.llm.model_choice import (AUTO, CLAUSE_BUDGET_S, FALLBACK, PREFERRED,
                                              VariantChoice, choose, resolve)
from vision_dialogue.llm.options import default_variant

pytestmark = pytest.mark.timeout(300)


def test_auto_is_a_variant_name_of_the_embedded_model():
    assert default_variant("default:auto") == AUTO


@pytest.mark.parametrize("took, variant", [(0.1, PREFERRED), (CLAUSE_BUDGET_S, PREFERRED),
                                           (CLAUSE_BUDGET_S + 0.01, FALLBACK), (2.0, FALLBACK)])
def test_the_larger_model_is_kept_only_within_the_budget(took, variant):
    choice = choose(lambda: took)
    assert (choice.variant, choice.clause_s, choice.model) == (variant, took, f"default:{variant}")
    assert f"{took:.2f} s" in choice.reason() and f"{CLAUSE_BUDGET_S:.2f} s" in choice.reason()
    assert ("within" if variant == PREFERRED else "over") in choice.reason()


def test_without_llama_cpp_the_smaller_model_is_used_and_the_log_says_why():
    choice = choose(None)
    assert choice == VariantChoice(FALLBACK, None)
    assert "llama.cpp is not installed" in choice.reason()


@pytest.mark.parametrize("model", ["default", "default:1.5b", "default:0.5b", "gpt-4o-mini",
                                   "/models/other.gguf", ""])
def test_any_other_model_name_is_kept_and_nothing_is_measured(model, monkeypatch):
    def never(threads):
        raise AssertionError("measured a model that is not default:auto")
    monkeypatch.setattr(model_choice, "_measure_preferred", never)
    assert resolve(model) == model


def test_the_doctor_checks_both_models_auto_may_run(monkeypatch):
    from vision_dialogue.cli import doctor
    from vision_dialogue.llm import probe
    from vision_dialogue.llm.probe import Probe
    asked = []

    def fake(variant=""):
        asked.append(variant)
        return Probe(variant != FALLBACK, f"{variant} looked at", "pip install it")
    monkeypatch.setattr(probe, "probe_default_model", fake)
    cfg = doctor.Config(llm_backend="local", model="default:auto")
    found = doctor.check_default_model(cfg)
    assert asked == [PREFERRED, FALLBACK]
    assert (found.result, found.detail) == (doctor.FAIL, f"{FALLBACK} looked at")
    asked.clear()
    found = doctor.check_default_model(doctor.Config(llm_backend="local", model="default:1.5b"))
    assert (asked, found.result) == ([PREFERRED], doctor.OK)


@pytest.fixture(scope="module")
def small_llm():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed "
                                    "(pip install -r requirements/llamacpp.txt)")
    from vision_dialogue.llm.default_model import ModelSetupError, ensure_default_gguf
    try:
        path = ensure_default_gguf(variant=FALLBACK)
    except ModelSetupError as e:
        pytest.skip(f"the embedded model is not installed: {e}")
    # one thread: the suite runs 3 workers on 2 cores, where 2 threads wait on each other
    llm = llama_cpp.Llama(model_path=path, n_ctx=256, n_threads=1, n_threads_batch=1,
                          verbose=False)
    yield llm
    llm.close()


def test_the_clause_is_measured_on_the_real_model_and_leaves_its_context_empty(small_llm):
    took = model_choice.clause_seconds(small_llm, tries=1)
    assert math.isfinite(took) and took > 0
    assert small_llm.n_tokens == 0


def test_a_larger_model_that_cannot_load_leaves_the_smaller_one_and_says_why(monkeypatch, caplog):
    from vision_dialogue.llm.default_model import ModelSetupError

    def missing(threads):
        def measure():
            raise ModelSetupError("default model 1.5B: 22 of 22 parts are not installed")
        return measure
    monkeypatch.setattr(model_choice, "_measure_preferred", missing)
    monkeypatch.setattr("vision_dialogue.llm.llamacpp_backend.llamacpp_installed", lambda: True)
    with caplog.at_level(logging.INFO, logger=model_choice.__name__):
        assert resolve("default:auto") == f"default:{FALLBACK}"
    assert [r.getMessage() for r in caplog.records] == [
        f"model default:auto runs the {FALLBACK.upper()}: the 1.5B cannot load (default model "
        "1.5B: 22 of 22 parts are not installed)"]
