"""Build tiny, randomly initialised VFM checkpoints offline (for tests and the benchmark).

Every builder writes a `save_pretrained` directory (or a weight file) that the real loaders in
vision_dialogue.vfm.models read back, so tests exercise the production loading code without
downloading anything. Sizes are minimal: a 64x64 image, 32-wide layers.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

WORDS = ["a", "an", "the", "cat", "dog", "photo", "of", "red", "blue", "green", "robot", "man",
         "woman", "sky", "tree", "what", "is", "in", "image", "color", "make", "it", "look",
         "like", "painting", "remove", "replace", "with", "background", "house", "car", "yes",
         "no", "two", "one", "person", "face", "table", "cup", "coffee", "astronaut", "best",
         "quality", "extremely", "detailed", "lowres", "bad", "anatomy", "hands", ",", ".", "?"]
SIZE = 64


def _seed():
    torch.manual_seed(0)


def bert_tokenizer(path: Path):
    """A tiny BertTokenizer from a generated vocab file (BLIP's tokenizer family)."""
    from transformers import BertTokenizer
    path.mkdir(parents=True, exist_ok=True)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[DEC]", "[ENC]"] + WORDS
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = BertTokenizer(str(path / "vocab.txt"), bos_token="[DEC]")
    tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
    return tok


def clip_tokenizer(path: Path, max_length: int = 77):
    """A tiny byte-level BPE CLIPTokenizer from a generated vocab/merges pair."""
    from transformers import CLIPTokenizer
    path.mkdir(parents=True, exist_ok=True)
    chars = sorted({c for w in WORDS for c in w})
    vocab = ["<|startoftext|>", "<|endoftext|>", "!"]
    vocab += chars + [c + "</w>" for c in chars] + [w + "</w>" for w in WORDS if len(w) > 1]
    merges = ["#version: 0.2"]
    # merges that build each word char by char, then the end-of-word marker
    seen = set(vocab)
    for w in WORDS:
        if len(w) < 2:
            continue
        cur = w[0]
        for i, c in enumerate(w[1:]):
            last = i == len(w) - 2
            right = c + "</w>" if last else c
            merges.append(f"{cur} {right}")
            cur = cur + right
            if cur not in seen:
                vocab.append(cur)
                seen.add(cur)
    vocab_map = {t: i for i, t in enumerate(dict.fromkeys(vocab))}
    (path / "vocab.json").write_text(json.dumps(vocab_map))
    (path / "merges.txt").write_text("\n".join(dict.fromkeys(merges)) + "\n")
    tok = CLIPTokenizer(str(path / "vocab.json"), str(path / "merges.txt"),
                        model_max_length=max_length)
    return tok


def blip(path: Path, vqa: bool = False) -> Path:
    """Tiny BlipForConditionalGeneration (caption) or BlipForQuestionAnswering (vqa)."""
    from transformers import (BlipConfig, BlipForConditionalGeneration, BlipForQuestionAnswering,
                              BlipImageProcessor, BlipProcessor)
    _seed()
    tok = bert_tokenizer(path / "_tok")
    cfg = BlipConfig(
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1,
                           num_attention_heads=4, image_size=32, patch_size=8),
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=37,
                         num_hidden_layers=1, num_attention_heads=4, max_position_embeddings=64,
                         encoder_hidden_size=32, bos_token_id=tok.convert_tokens_to_ids("[DEC]"),
                         pad_token_id=0, sep_token_id=tok.sep_token_id),
        projection_dim=32)
    model = (BlipForQuestionAnswering if vqa else BlipForConditionalGeneration)(cfg).eval()
    model.generation_config.max_length = 6
    model.generation_config.max_new_tokens = 4
    proc = BlipProcessor(BlipImageProcessor(size={"height": 32, "width": 32}), tok)
    model.save_pretrained(path)
    proc.save_pretrained(path)
    return path


def dpt(path: Path) -> Path:
    """Tiny DPTForDepthEstimation (non-hybrid) + image processor."""
    from transformers import DPTConfig, DPTForDepthEstimation, DPTImageProcessor
    _seed()
    cfg = DPTConfig(hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                    intermediate_size=37, image_size=32, patch_size=8,
                    neck_hidden_sizes=[8, 8, 16, 16],
                    fusion_hidden_size=16, backbone_out_indices=[0, 1, 2, 3], is_hybrid=False,
                    head_in_index=-1)
    DPTForDepthEstimation(cfg).eval().save_pretrained(path)
    DPTImageProcessor(size={"height": 32, "width": 32},
                      keep_aspect_ratio=False).save_pretrained(path)
    return path


def clip_towers(tok, layers: int) -> dict:
    """Tiny CLIP text and vision tower configs (CLIPSeg and OWL-ViT are built on them)."""
    return dict(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=37,
                         num_hidden_layers=layers, num_attention_heads=4,
                         max_position_embeddings=77, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id or 1),
        vision_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=layers,
                           num_attention_heads=4, image_size=32, patch_size=8))


def clipseg(path: Path, mask_bias: float | None = 8.0) -> Path:
    """Tiny CLIPSegForImageSegmentation + processor (CLIP tokenizer + ViT image processor).

    mask_bias sets the decoder's output bias so the mask is predictable: +8 marks the whole
    image as the object (remove/replace always find it), -8 marks nothing (object not found).
    """
    from transformers import (CLIPSegConfig, CLIPSegForImageSegmentation, CLIPSegProcessor,
                              ViTImageProcessor)
    _seed()
    tok = clip_tokenizer(path / "_tok", max_length=77)
    cfg = CLIPSegConfig(
        **clip_towers(tok, layers=2), projection_dim=32, reduce_dim=16, extract_layers=[1],
        decoder_num_attention_heads=2, decoder_intermediate_size=16)
    model = CLIPSegForImageSegmentation(cfg).eval()
    if mask_bias is not None:
        with torch.no_grad():
            model.decoder.transposed_convolution.bias.fill_(mask_bias)
    model.save_pretrained(path)
    CLIPSegProcessor(ViTImageProcessor(size={"height": 32, "width": 32}, do_center_crop=False),
                     tok).save_pretrained(path)
    return path


def upernet(path: Path) -> Path:
    """Tiny UperNetForSemanticSegmentation on a ConvNext backbone (VCG's seg model family)."""
    from transformers import (ConvNextConfig, SegformerImageProcessor, UperNetConfig,
                              UperNetForSemanticSegmentation)
    _seed()
    backbone = ConvNextConfig(num_channels=3, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                              out_features=["stage1", "stage2", "stage3", "stage4"])
    cfg = UperNetConfig(backbone_config=backbone, hidden_size=16, auxiliary_in_channels=32,
                        auxiliary_channels=8, num_labels=150, use_auxiliary_head=False)
    UperNetForSemanticSegmentation(cfg).eval().save_pretrained(path)
    SegformerImageProcessor(size={"height": 64, "width": 64},
                            do_reduce_labels=False).save_pretrained(path)
    return path


def owlvit(path: Path) -> Path:
    """Tiny OwlViTForObjectDetection + processor."""
    from transformers import (OwlViTConfig, OwlViTForObjectDetection, OwlViTImageProcessor,
                              OwlViTProcessor)
    _seed()
    tok = clip_tokenizer(path / "_tok", max_length=77)
    cfg = OwlViTConfig(**clip_towers(tok, layers=1), projection_dim=32)
    OwlViTForObjectDetection(cfg).eval().save_pretrained(path)
    OwlViTProcessor(OwlViTImageProcessor(size={"height": 32, "width": 32},
                                         crop_size={"height": 32, "width": 32}),
                    tok).save_pretrained(path)
    return path


def sam(path: Path) -> Path:
    """Tiny SamModel + processor at 64 px, with confident, crisp masks.

    The IoU head says 0.95 for every mask and the mask logits are scaled up, so SAM's
    confidence and stability filters pass the random masks through (a random head's masks would
    all be dropped and the tests would see none).
    """
    from transformers import (SamConfig, SamImageProcessor, SamMaskDecoderConfig, SamModel,
                              SamProcessor, SamPromptEncoderConfig, SamVisionConfig)
    _seed()
    vision = SamVisionConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                             image_size=SIZE, patch_size=8, output_channels=16, mlp_dim=64,
                             global_attn_indexes=[0], window_size=4, num_pos_feats=8)
    prompt = SamPromptEncoderConfig(hidden_size=16, image_size=SIZE, patch_size=8,
                                    mask_input_channels=4)
    decoder = SamMaskDecoderConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                   mlp_dim=32, iou_head_hidden_dim=16)
    model = SamModel(SamConfig(vision_config=vision, prompt_encoder_config=prompt,
                               mask_decoder_config=decoder)).eval()
    with torch.no_grad():
        head = model.mask_decoder.iou_prediction_head.proj_out
        head.weight.zero_()
        head.bias.fill_(0.95)
        for mlp in model.mask_decoder.output_hypernetworks_mlps:
            mlp.proj_out.weight.mul_(2e6)
    model.save_pretrained(path)
    SamProcessor(SamImageProcessor(size={"longest_edge": SIZE},
                                   pad_size={"height": SIZE, "width": SIZE})).save_pretrained(path)
    return path


def grounding_dino(path: Path) -> Path:
    """Tiny GroundingDinoForObjectDetection (Swin + BERT towers) + processor at 64 px."""
    from transformers import (BertConfig, GroundingDinoConfig, GroundingDinoForObjectDetection,
                              GroundingDinoImageProcessor, GroundingDinoProcessor, SwinConfig)
    _seed()
    tok = bert_tokenizer(path / "_tok")
    backbone = SwinConfig(image_size=SIZE, patch_size=4, embed_dim=16, depths=[1, 1, 1, 1],
                          num_heads=[1, 1, 1, 1], window_size=2,
                          out_features=["stage2", "stage3", "stage4"])
    text = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
    # two decoder layers: the box heads of the layers after the first are tied to it
    cfg = GroundingDinoConfig(backbone_config=backbone, text_config=text, d_model=32,
                              encoder_layers=1, decoder_layers=2, encoder_ffn_dim=64,
                              decoder_ffn_dim=64, encoder_attention_heads=2,
                              decoder_attention_heads=2, num_queries=20, num_feature_levels=3,
                              encoder_n_points=2, decoder_n_points=2, max_text_len=32)
    GroundingDinoForObjectDetection(cfg).eval().save_pretrained(path)
    GroundingDinoProcessor(GroundingDinoImageProcessor(
        size={"shortest_edge": SIZE, "longest_edge": SIZE}), tok).save_pretrained(path)
    return path


def hed(path: Path) -> Path:
    """Random weights for the ControlNet HED (Apache-2) network at 1/16 width; a .pth file."""
    from vision_dialogue.vfm.models.hed import ControlNetHED
    _seed()
    path.mkdir(parents=True, exist_ok=True)
    f = path / "ControlNetHED.pth"
    torch.save(ControlNetHED(width=4).state_dict(), f)
    return f


def _unet(in_channels: int = 4):
    from diffusers import UNet2DConditionModel
    return UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=SIZE // 2,
        in_channels=in_channels, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=32,
        norm_num_groups=16, attention_head_dim=4)


def stable_diffusion(path: Path, kind: str = "text2image") -> Path:
    """A tiny SD 1.5-layout pipeline. kind: text2image | pix2pix | inpaint."""
    from diffusers import (AutoencoderKL, DDIMScheduler, EulerAncestralDiscreteScheduler,
                           StableDiffusionInpaintPipeline, StableDiffusionInstructPix2PixPipeline,
                           StableDiffusionPipeline)
    from transformers import CLIPTextConfig, CLIPTextModel
    _seed()
    tok = clip_tokenizer(path / "_tok", max_length=77)
    unet = _unet({"text2image": 4, "pix2pix": 8, "inpaint": 9}[kind])
    vae = AutoencoderKL(block_out_channels=[16, 32], in_channels=3, out_channels=3,
                        down_block_types=["DownEncoderBlock2D"] * 2,
                        up_block_types=["UpDecoderBlock2D"] * 2, latent_channels=4,
                        norm_num_groups=16, sample_size=SIZE)
    text = CLIPTextModel(CLIPTextConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=1,
        num_attention_heads=4, max_position_embeddings=77, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=1, projection_dim=32))
    sched_cls = EulerAncestralDiscreteScheduler if kind == "pix2pix" else DDIMScheduler
    kw = {} if kind == "pix2pix" else {"clip_sample": False, "set_alpha_to_one": False}
    sched = sched_cls(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                      steps_offset=1, **kw)
    cls = {"text2image": StableDiffusionPipeline,
           "pix2pix": StableDiffusionInstructPix2PixPipeline,
           "inpaint": StableDiffusionInpaintPipeline}[kind]
    pipe = cls(unet=unet, vae=vae, text_encoder=text, tokenizer=tok, scheduler=sched,
               safety_checker=None, feature_extractor=None, requires_safety_checker=False)
    pipe.save_pretrained(path)
    safety_checker(path)
    return path


def safety_checker(sd_path: Path, flag_everything: bool = False) -> Path:
    """Add a tiny random Stable Diffusion safety checker to an SD checkpoint.

    Into `sd_path`/safety_checker (and its feature_extractor). Its concept thresholds make it
    pass every image, or, with `flag_everything`, flag every image, so both outcomes are
    deterministic.
    """
    from diffusers.pipelines.stable_diffusion.safety_checker import (
        StableDiffusionSafetyChecker)
    from transformers import CLIPConfig, CLIPImageProcessor
    _seed()
    cfg = CLIPConfig(text_config=dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1,
                                      num_attention_heads=4),
                     vision_config=dict(hidden_size=32, intermediate_size=37,
                                        num_hidden_layers=1, num_attention_heads=4,
                                        image_size=32, patch_size=8),
                     projection_dim=32)
    checker = StableDiffusionSafetyChecker(cfg).eval()
    with torch.no_grad():     # score = cosine - threshold: > 0 flags
        checker.concept_embeds_weights.fill_(-2.0 if flag_everything else 2.0)
        checker.special_care_embeds_weights.fill_(-2.0 if flag_everything else 2.0)
    checker.save_pretrained(Path(sd_path) / "safety_checker")
    CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}).\
        save_pretrained(Path(sd_path) / "feature_extractor")
    return Path(sd_path)


def controlnet(path: Path) -> Path:
    """A tiny ControlNetModel matching the tiny SD UNet."""
    from diffusers import ControlNetModel
    _seed()
    ControlNetModel(block_out_channels=(32, 64), layers_per_block=1, in_channels=4,
                    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                    cross_attention_dim=32,
                    conditioning_embedding_out_channels=(16, 32), norm_num_groups=16,
                    attention_head_dim=4).save_pretrained(path)
    return path


BUILDERS = {
    "caption": lambda p: blip(p, vqa=False),
    "vqa": lambda p: blip(p, vqa=True),
    "depth": dpt,
    "clipseg": clipseg,
    "seg": upernet,
    "detect": owlvit,
    "sam": sam,
    "grounding": grounding_dino,
    "hed": hed,
    "sd": lambda p: stable_diffusion(p, "text2image"),
    "pix2pix": lambda p: stable_diffusion(p, "pix2pix"),
    "inpaint": lambda p: stable_diffusion(p, "inpaint"),
    "controlnet": controlnet,
}


_CACHE: dict[str, dict[str, str]] = {}


def cached(root: Path) -> dict[str, str]:
    """build_all(root) once per process (test modules share one set of tiny models)."""
    key = str(root)
    if key not in _CACHE:
        _CACHE[key] = build_all(root)
    return dict(_CACHE[key])


def build_all(root: Path, keys=None) -> dict[str, str]:
    """Build the tiny checkpoints under `root`.

    Returns {checkpoint key: path} for the `checkpoints.*` parameters (every ControlNet shares one
    tiny ControlNet).
    """
    root = Path(root)
    out: dict[str, str] = {}
    for key, fn in BUILDERS.items():
        if keys is not None and key not in keys:
            continue
        out[key] = str(fn(root / key))
    if "controlnet" in out:
        cn = out.pop("controlnet")
        for m in ("canny", "line", "hed", "scribble", "pose", "depth", "normal", "seg"):
            out[f"controlnet_{m}"] = cn
    if "hed" in out:
        out["hed_annotator"] = out.pop("hed")
    return out
