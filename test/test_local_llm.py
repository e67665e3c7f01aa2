"""TransformersChatBackend on tiny random models built here from configs (no network)."""
from __future__ import annotations

import base64
import os
import threading

import cv2
import numpy as np
import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from vision_dialogue.llm.base import BackendError, ChatBackend  # noqa: E402
from vision_dialogue.llm.transformers_backend import TransformersChatBackend  # noqa: E402
from vision_dialogue.llm.sentences import split_sentences  # noqa: E402

pytestmark = pytest.mark.timeout(120)

WORDS = ("hello robot i see a person the red cup blue sky green tree dog cat is on under "
         "table chair hand wave smile yes no maybe we you they . ! ? ,").split()
SPECIALS = ["<unk>", "<pad>", "<|im_start|>", "<|im_end|>", "<image>"]
TEXT_TEMPLATE = ("{% for m in messages %}<|im_start|> {{ m['role'] }} {{ m['content'] }} "
                 "<|im_end|> "
                 "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")
VISION_TEMPLATE = ("{% for m in messages %}<|im_start|> {{ m['role'] }} "
                   "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
                   "{% for p in m['content'] %}{% if p['type'] == 'image' %}<image> "
                   "{% else %}{{ p['text'] }} {% endif %}{% endfor %}{% endif %}<|im_end|> "
                   "{% endfor %}{% if add_generation_prompt %}<|im_start|> assistant {% endif %}")


def _tokenizer(template: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # GPT-2/Qwen style: byte-level pre-tokenizer and decoder, words with and without the
    # leading-space marker "Ġ" (what AutoTokenizer's Qwen2/Llama classes expect to decode)
    vocab = {t: i for i, t in enumerate(SPECIALS + WORDS + ["\u0120" + w for w in WORDS])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<|im_end|>", bos_token="<|im_start|>",
                                   additional_special_tokens=["<image>"], chat_template=template)
    return fast, vocab


def tiny_decoder(vocab: dict) -> dict:
    """A tiny decoder's configuration (the Qwen2 text model and LLaVA's Llama share it)."""
    return dict(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                max_position_embeddings=512, bos_token_id=vocab["<|im_start|>"],
                eos_token_id=vocab["<|im_end|>"], pad_token_id=vocab["<pad>"])


@pytest.fixture(scope="module")
def text_model_dir(tmp_path_factory):
    """A tiny random Qwen2 chat model + WordLevel tokenizer with a chat template, on disk."""
    path = tmp_path_factory.mktemp("tiny-qwen2")
    tok, vocab = _tokenizer(TEXT_TEMPLATE)
    cfg = transformers.Qwen2Config(**tiny_decoder(vocab), tie_word_embeddings=True)
    torch.manual_seed(0)
    transformers.Qwen2ForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    """A tiny random LLaVA (tiny CLIP vision tower + tiny Llama) with a processor, on disk."""
    path = tmp_path_factory.mktemp("tiny-llava")
    tok, vocab = _tokenizer(VISION_TEMPLATE)
    text_cfg = transformers.LlamaConfig(**tiny_decoder(vocab))
    vis_cfg = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        image_size=32, patch_size=8, projection_dim=32)
    cfg = transformers.LlavaConfig(
        vision_config=vis_cfg, text_config=text_cfg, image_token_index=vocab["<image>"],
        vision_feature_layer=-1, vision_feature_select_strategy="default",
        projector_hidden_act="gelu")
    torch.manual_seed(0)
    transformers.LlavaForConditionalGeneration(cfg).save_pretrained(path)
    proc = transformers.LlavaProcessor(
        image_processor=transformers.CLIPImageProcessor(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
        tokenizer=tok, patch_size=8, vision_feature_select_strategy="default",
        num_additional_image_tokens=1, chat_template=VISION_TEMPLATE)
    proc.save_pretrained(path)
    return str(path)


def _data_url(img: np.ndarray) -> str:
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    return "data:image/jpeg;base64," + base64.b64encode(buf.tobytes()).decode()


def _norm(text: str) -> str:
    return " ".join(text.split())


MESSAGES = [{"role": "system", "content": "you are a robot ."},
            {"role": "user", "content": "hello robot , i see a red cup on the table ."}]


def test_text_model_complete_and_stream_agree(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=24)
    assert isinstance(backend, ChatBackend)
    assert backend.supports_images is False
    full = backend.complete(MESSAGES)
    assert full, "greedy reply from the tiny model should not be empty"
    assert backend.complete(MESSAGES) == full  # greedy: deterministic
    sentences = list(backend.stream(MESSAGES))
    assert all(s.strip() for s in sentences)
    assert _norm(" ".join(sentences)) == _norm(full)
    assert sentences == split_sentences(full)


def test_sampled_stream_yields_sentences_matching_complete(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=80, temperature=3.0)
    torch.manual_seed(123)
    full = backend.complete(MESSAGES)
    torch.manual_seed(123)
    sentences = list(backend.stream(MESSAGES))
    assert _norm(" ".join(sentences)) == _norm(full)
    # near-uniform random logits over a vocabulary with . ! ? give several sentences
    assert len(sentences) >= 2, sentences


def test_max_tokens_override_limits_reply(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=40, temperature=1.5)
    tok = transformers.AutoTokenizer.from_pretrained(text_model_dir)
    torch.manual_seed(5)
    short = backend.complete(MESSAGES, max_tokens=3)
    assert 1 <= len(tok(short, add_special_tokens=False)["input_ids"]) <= 3
    with pytest.raises(BackendError, match="max_tokens"):
        backend.complete(MESSAGES, max_tokens=0)


def test_image_parts_are_dropped_for_text_models(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=16)
    img = np.zeros((40, 40, 3), np.uint8)
    with_image = [MESSAGES[0], {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": _data_url(img), "detail": "low"}},
        {"type": "text", "text": MESSAGES[1]["content"]}]}]
    assert backend.complete(with_image) == backend.complete(MESSAGES)
    only_image = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": _data_url(img)}}]}]
    with pytest.raises(BackendError, match="no text"):
        backend.complete(only_image)


def test_closing_the_stream_stops_generation_and_frees_the_backend(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=400, temperature=1.5)
    torch.manual_seed(7)
    it = backend.stream(MESSAGES)
    first = next(it)
    assert first
    it.close()
    assert not backend._turns.lock.locked()
    assert not [t for t in threading.enumerate() if t.name == "local-llm-generate"]
    assert backend.complete(MESSAGES, max_tokens=4)


def test_one_generation_at_a_time_from_threads(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=12)
    expected = backend.complete(MESSAGES)
    results, errors = [], []

    def worker():
        try:
            results.append(backend.complete(MESSAGES))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and results == [expected] * 3


def test_generation_failure_is_a_backend_error(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=8)
    backend._model.to("meta")  # weights gone: every forward pass fails inside generate()
    with pytest.raises(BackendError, match="local generation failed"):
        backend.complete(MESSAGES)
    with pytest.raises(BackendError, match="local generation failed"):
        list(backend.stream(MESSAGES))
    assert not backend._turns.lock.locked()


def test_bad_messages_raise_backend_error(text_model_dir):
    backend = TransformersChatBackend(text_model_dir)
    for bad in ([], "hello", [{"content": "no role"}], [{"role": "user", "content": 3}]):
        with pytest.raises(BackendError):
            backend.complete(bad)


def test_missing_path_is_a_backend_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(BackendError, match="no-such-model"):
        TransformersChatBackend(str(missing))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BackendError, match="config.json"):
        TransformersChatBackend(str(empty))
    # an id that is not in the HF cache is not downloaded
    with pytest.raises(BackendError, match="vd-test/not-cached-model"):
        TransformersChatBackend("vd-test/not-cached-model")


def test_constructor_validates_arguments(text_model_dir):
    with pytest.raises(BackendError, match="dtype"):
        TransformersChatBackend(text_model_dir, dtype="int3")
    with pytest.raises(BackendError, match="temperature"):
        TransformersChatBackend(text_model_dir, temperature=-1)


def test_vlm_receives_images(vlm_dir):
    backend = TransformersChatBackend(vlm_dir, max_new_tokens=12)
    assert backend.supports_images is True
    seen = []
    tower = backend._model.model.vision_tower
    hook = tower.register_forward_pre_hook(lambda mod, args, kw: seen.append(
        (kw.get("pixel_values") if kw.get("pixel_values") is not None else args[0]).shape),
        with_kwargs=True)
    try:
        rng = np.random.default_rng(0)
        frames = [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(2)]
        msgs = [{"role": "user", "content": [
            {"type": "text", "text": "what is on the table ?"},
            {"type": "image_url", "image_url": {"url": _data_url(frames[0])}},
            {"type": "image_url", "image_url": {"url": _data_url(frames[1])}}]}]
        full = backend.complete(msgs)
        assert seen and tuple(seen[0][:2]) == (2, 3) and tuple(seen[0][-2:]) == (32, 32)
        sentences = list(backend.stream(msgs))
        assert _norm(" ".join(sentences)) == _norm(full)
        seen.clear()
        backend.complete([{"role": "user", "content": "hello robot ."}])
        assert seen == []  # text-only turn: the vision tower does not run
    finally:
        hook.remove()


def test_vlm_rejects_undecodable_and_remote_images(vlm_dir):
    backend = TransformersChatBackend(vlm_dir, max_new_tokens=4)
    bad = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,bm90IGFuIGltYWdl"}}]}]
    with pytest.raises(BackendError, match="cannot decode image"):
        backend.complete(bad)
    remote = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://example.com/x.jpg"}}]}]
    with pytest.raises(BackendError, match="remote image URL refused"):
        backend.complete(remote)


def _conversation(turns: int) -> list[dict]:
    """A growing chat: each call with more turns starts with the previous prompt."""
    msgs = [{"role": "system", "content": "you are a robot . " * 6}]
    for i in range(turns):
        msgs += [{"role": "user", "content": f"i see a {WORDS[i % 20]} on the table ."},
                 {"role": "assistant", "content": "yes . the cup is red ."}]
    return msgs + [{"role": "user", "content": "what do you see ?"}]


def test_prefix_cache_reuses_the_last_prompt_and_answers_the_same(text_model_dir):
    cached = TransformersChatBackend(text_model_dir, max_new_tokens=10)
    plain = TransformersChatBackend(text_model_dir, max_new_tokens=10, prefix_cache=False)
    for turns in (1, 2, 3):
        msgs = _conversation(turns)
        assert cached.complete(msgs) == plain.complete(msgs)
        if turns > 1:   # the previous turn's prompt is the start of this one
            assert cached.reused_tokens >= 30
        assert plain.reused_tokens == 0
    streamed = " ".join(cached.stream(_conversation(4)))
    assert cached.reused_tokens >= 30
    assert _norm(streamed) == _norm(plain.complete(_conversation(4)))
    # an unrelated prompt finds no common prefix and is computed from scratch
    assert cached.complete(MESSAGES) == plain.complete(MESSAGES)
    assert cached.reused_tokens == 0


def test_a_warmed_prompt_is_not_computed_again_and_answers_the_same(text_model_dir):
    """warm() computes the prompt into the reply cache; the reply then reads only its line."""
    warmed = TransformersChatBackend(text_model_dir, max_new_tokens=10)
    plain = TransformersChatBackend(text_model_dir, max_new_tokens=10, prefix_cache=False)
    history = _conversation(3)[:-1]
    read = warmed.warm(history)
    assert read >= 60 and warmed.warm(history) <= 1       # nothing (or one token) new
    assert warmed.complete(_conversation(3)) == plain.complete(_conversation(3))
    assert warmed.reused_tokens >= read - 2
    assert TransformersChatBackend(text_model_dir, prefix_cache=False).warm(history) == 0


def test_avoided_lines_are_not_said_again(text_model_dir):
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=10)
    first = backend.complete(MESSAGES)
    assert backend.complete(MESSAGES, avoid=[first]) != first
    assert backend.complete(MESSAGES) == first          # greedy, unchanged without `avoid`


def test_int8_quantises_every_linear_layer_and_keeps_the_prefix_cache(text_model_dir):
    """dtype=int8: the Linear layers are quantised, and the kept cache still answers the same.

    Replies stay deterministic; the cache gives what computing the whole prompt gives.
    """
    import torch
    cached = TransformersChatBackend(text_model_dir, max_new_tokens=10, dtype="int8")
    plain = TransformersChatBackend(text_model_dir, max_new_tokens=10, dtype="int8",
                                    prefix_cache=False)
    linear = [type(m) for m in cached._model.model.modules()
              if isinstance(m, torch.nn.Module) and "Linear" in type(m).__name__]
    assert linear and torch.nn.Linear not in linear      # all quantised (ao's dynamic Linear)
    for turns in (1, 2, 3):
        msgs = _conversation(turns)
        assert cached.complete(msgs) == plain.complete(msgs)
    assert cached.reused_tokens >= 30
    with pytest.raises(BackendError, match="int8 runs on the CPU only"):
        TransformersChatBackend(text_model_dir, dtype="int8", device="cuda")


def test_background_call_gives_way_to_a_reply(text_model_dir):
    from vision_dialogue.llm.base import Preempted
    backend = TransformersChatBackend(text_model_dir, max_new_tokens=400, temperature=1.5)
    assert backend.preemptible
    outcome: list = []
    started = threading.Event()
    real_generate = backend._model.generate

    def slow_generate(*a, **kw):      # the background generation is running when the reply comes
        started.set()
        return real_generate(*a, **kw)

    backend._model.generate = slow_generate

    def background():
        try:
            outcome.append(backend.complete(MESSAGES, max_tokens=400, background=True))
        except Preempted as e:
            outcome.append(e)

    t = threading.Thread(target=background)
    torch.manual_seed(3)
    t.start()
    assert started.wait(30)
    reply = backend.complete(MESSAGES, max_tokens=3)
    t.join(60)
    assert reply and len(outcome) == 1
    assert isinstance(outcome[0], Preempted), outcome
    backend.stop_background()   # its conversation closes: no background call starts any more
    with pytest.raises(Preempted):
        backend.complete(MESSAGES, background=True)
    assert backend.complete(MESSAGES, max_tokens=3)
    # a new conversation on the same engine takes background calls again (a benchmark's
    # second battery read no warm-up at all: every turn read its prompt anew)
    from vision_dialogue.core.conversation import Conversation
    from vision_dialogue.core.persona import load_persona
    Conversation(backend, load_persona())
    assert backend.complete(MESSAGES, max_tokens=3, background=True)
