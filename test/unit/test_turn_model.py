"""The end of a line judged by the embedded 0.5B (voice/turn_model.py) with the real llama.cpp.

Skipped where llama-cpp-python or the embedded model is not installed (README command 2
installs both). The lines here are not the benchmark's, on which the thresholds were set.
"""
from __future__ import annotations


import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed "
                    "(pip install -r requirements/llamacpp.txt)")

from vision_dialogue.voice.turn_end import COMPLETE, INCOMPLETE, UNSURE  # noqa: E402
from vision_dialogue.voice.turn_model import ModelTurnJudge, normalise  # noqa: E402

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def judge():
    from vision_dialogue.llm.default_model import ModelSetupError
    try:
        judge = ModelTurnJudge.embedded()
    except ModelSetupError as e:
        pytest.skip(f"the embedded model is not installed: {e}")
    yield judge
    judge.close()


def test_the_words_are_read_without_the_recognisers_punctuation():
    assert normalise("What colour is?") == "what colour is"
    assert normalise("  Don't stop -- it's 5 o'clock!") == "don't stop -- it's 5 o'clock"


@pytest.mark.parametrize("text", ["What time is it?", "How old are you?",
                                  "Is that a dog?", "What is on the wall?",
                                  "The weather is nice today."])
def test_a_complete_line_ends_soon(judge, text):
    assert judge(text) == COMPLETE, judge.last_probability


@pytest.mark.parametrize("text", ["Can you see what?", "I am looking for?",
                                  "Let me think about.", "Where did you put?",
                                  "Tell me about."])
def test_a_line_that_goes_on_is_held_open_even_with_a_question_mark(judge, text):
    """The recogniser writes "?" or "." at a pause; the model reads the words alone."""
    judge.last_probability = 1.0
    assert judge(text) == INCOMPLETE, judge.last_probability
    assert judge.last_probability < 0.03


def test_what_the_rules_are_sure_of_they_decide_alone(judge):
    judge.last_probability = 1.0
    assert judge("Could you pass me the") == INCOMPLETE
    assert judge("So, um,") == INCOMPLETE
    assert judge("Hello robot.") == INCOMPLETE      # a bare greeting (bench_voice's cut-off)
    assert judge.last_probability == 1.0           # the model was not asked


def test_a_short_line_is_never_held_open_on_the_models_word(judge):
    assert judge("Stop!") in (COMPLETE, UNSURE)
    assert judge("Yes.") in (COMPLETE, UNSURE)


def test_it_keeps_its_prefix_in_the_cache(judge):
    """Each judgement reads only the line: the instruction stays cached.

    How fast it judges is benchmarks/bench_voice.py's to measure, not a test's.
    """
    judge("Hello there, how are you?")
    for _ in range(3):
        judge("Can you tell me what is on the table?")
    assert judge._llm.n_tokens > len(judge._prefix)     # the prefix stayed in the cache


def test_the_speech_nodes_parameter_picks_the_judge():
    from vision_dialogue.voice.build import turn_judge
    from vision_dialogue.voice.turn_end import turn_end
    assert turn_judge({"turn_judge": "rules", "ends_by_meaning": True}) is turn_end
    assert turn_judge({"turn_judge": "model", "ends_by_meaning": False}) is turn_end
    model = turn_judge({"turn_judge": "model", "ends_by_meaning": True})
    assert isinstance(model, ModelTurnJudge) and model("What colour is?") == INCOMPLETE
    model.close()
