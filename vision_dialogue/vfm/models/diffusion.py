"""Stable Diffusion tools.

Text-to-image, InstructPix2Pix editing, inpainting (remove/replace with a CLIPSeg mask,
outpainting with a BLIP caption) and ControlNet generation from condition maps.

Every pipeline call reports each denoising step through `callback_on_step_end` and stops
between steps when the goal is cancelled (`pipe._interrupt = True`, then Cancelled).

Safety: with `safety_checker` on (the default, as in Visual ChatGPT), every generated image
goes through Stable Diffusion's safety checker, loaded from the SD checkpoint's
`safety_checker/` and `feature_extractor/` folders; a flagged image is withheld (ToolError),
and a checkpoint without the checker makes the tool refuse to load rather than run unchecked.
"""
from __future__ import annotations

import dataclasses
import math
import random
import re
import threading
import weakref

import cv2
import numpy as np
import torch
from PIL import Image

from vision_dialogue.vfm.errors import Cancelled, ModelMissingError, ToolError
from vision_dialogue.vfm.models.common import LoadedModel, RunContext, resolve_dir

A_PROMPT = "best quality, extremely detailed"
N_PROMPT = ("longbody, lowres, bad anatomy, bad hands, missing fingers, extra digit, "
            "fewer digits, cropped, worst quality, low quality")

# held weakly: a base lives while a loaded tool holds it (`self.base`), so the memory budget
# can free it by unloading its tools
_BASES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_BASES_LOCK = threading.Lock()
#: outpaint: each step grows a side at most this much; the largest side it makes
OUTPAINT_GROWTH = 2.0
OUTPAINT_MAX_SIDE = 4096


def base_pipeline(checkpoint: str, device: str, dtype, allow_download: bool):
    """Return the one StableDiffusionPipeline per (checkpoint, device).

    Shared by text2image and every ControlNet tool on that device (the UNet/VAE/text encoder
    are loaded once).
    """
    from diffusers import StableDiffusionPipeline
    path = resolve_dir(checkpoint, allow_download)
    key = (path, device)
    with _BASES_LOCK:
        pipe = _BASES.get(key)
        if pipe is None:
            pipe = StableDiffusionPipeline.from_pretrained(
                path, torch_dtype=dtype, safety_checker=None, requires_safety_checker=False,
                local_files_only=True).to(device)
            _BASES[key] = pipe
        return pipe


def fit_size(h: int, w: int, target: int, multiple: int = 64) -> tuple[int, int]:
    """(H, W) with the longer side ~target, both multiples of `multiple` (as VCG's resize)."""
    s = target / max(h, w)
    return (max(multiple, int(round(h * s / multiple)) * multiple),
            max(multiple, int(round(w * s / multiple)) * multiple))


def _pil(rgb: np.ndarray, hw: tuple[int, int] | None = None) -> Image.Image:
    img = Image.fromarray(np.ascontiguousarray(rgb[:, :, :3]))
    return img.resize((hw[1], hw[0]), Image.BICUBIC) if hw else img


def _to_uint8(arr) -> np.ndarray:
    return (np.asarray(arr) * 255.0).round().clip(0, 255).astype(np.uint8)


class SafetyChecker:
    """Stable Diffusion's CLIP-based safety checker, one per (SD checkpoint, device)."""

    _loaded: weakref.WeakValueDictionary = weakref.WeakValueDictionary()   # held by tools
    _lock = threading.Lock()

    def __init__(self, model, processor, device, dtype):
        self.model, self.processor, self.device, self.dtype = model, processor, device, dtype

    @classmethod
    def load(cls, sd_dir: str, device: str, dtype) -> "SafetyChecker":
        from pathlib import Path
        key = (sd_dir, device)
        with cls._lock:
            checker = cls._loaded.get(key)
            if checker is None:
                if not ((Path(sd_dir) / "safety_checker").is_dir()
                        and (Path(sd_dir) / "feature_extractor").is_dir()):
                    raise ModelMissingError(
                        f"Stable Diffusion checkpoint {sd_dir} has no safety_checker/ and "
                        "feature_extractor/; the diffusion tools do not run without the "
                        "checker unless the vfm_server parameter safety_checker is false")
                from diffusers.pipelines.stable_diffusion.safety_checker import (
                    StableDiffusionSafetyChecker)
                from transformers import CLIPImageProcessor
                model = StableDiffusionSafetyChecker.from_pretrained(
                    sd_dir, subfolder="safety_checker", torch_dtype=dtype,
                    local_files_only=True).to(device).eval()
                proc = CLIPImageProcessor.from_pretrained(sd_dir, subfolder="feature_extractor",
                                                          local_files_only=True)
                checker = cls._loaded[key] = cls(model, proc, device, dtype)
            return checker

    def check(self, rgb: np.ndarray) -> None:
        """ToolError when the image is flagged (it is then never stored or shown)."""
        clip_input = self.processor(images=[Image.fromarray(rgb)], return_tensors="pt")
        with torch.no_grad():
            _, flagged = self.model(images=[rgb.astype(np.float32) / 255.0],
                                    clip_input=clip_input.pixel_values.to(self.device,
                                                                          self.dtype))
        if flagged[0]:
            raise ToolError("the safety checker withheld this picture; try another request")


class _Diffusion(LoadedModel):
    """Runs a diffusers pipeline.

    With step feedback, cancel, an optional seed and the safety checker.
    """

    pipe = None
    safety: SafetyChecker | None = None

    def __init__(self, checkpoint: str, device: str = "cpu", allow_download: bool = False,
                 safety_checker: bool = True):
        super().__init__(checkpoint, device, allow_download)
        self.use_safety_checker = bool(safety_checker)

    def load_safety_checker(self, sd_dir: str) -> None:
        if self.use_safety_checker:
            self.safety = SafetyChecker.load(sd_dir, self.device, self.dtype)

    def _call(self, ctx: RunContext, **kwargs) -> np.ndarray:
        total = int(kwargs.get("num_inference_steps", ctx.steps))

        def on_step(pipe, i, t, cb_kwargs):
            ctx.progress("denoising", i + 1, total)
            if ctx.cancelled():
                pipe._interrupt = True
            return cb_kwargs

        seed = ctx.seed if ctx.seed >= 0 else random.randint(0, 65535)
        gen = torch.Generator(device="cpu").manual_seed(seed)
        ctx.check()
        ctx.progress("denoising", 0, total)
        out = self.pipe(num_inference_steps=total, callback_on_step_end=on_step,
                        generator=gen, output_type="np", **kwargs)
        if getattr(self.pipe, "_interrupt", False) or ctx.cancelled():
            raise Cancelled()
        img = _to_uint8(out.images[0])
        if self.safety is not None:
            self.safety.check(img)
        return img


class TextToImage(_Diffusion):
    """Text -> image with Stable Diffusion 1.5."""

    def load(self):
        from diffusers import StableDiffusionPipeline
        self.load_safety_checker(self.dir())
        self.base = base = base_pipeline(self.checkpoint, self.device, self.dtype,
                                         self.allow_download)
        comps = dict(base.components)
        comps["scheduler"] = type(base.scheduler).from_config(base.scheduler.config)
        self.pipe = StableDiffusionPipeline(**comps, requires_safety_checker=False)
        self.pipe.set_progress_bar_config(disable=True)

    def run(self, text: str, ctx: RunContext) -> np.ndarray:
        return self._call(ctx, prompt=f"{text}, {A_PROMPT}", negative_prompt=N_PROMPT,
                          height=ctx.image_size, width=ctx.image_size,
                          guidance_scale=ctx.guidance_scale)


class InstructPix2Pix(_Diffusion):
    """Image + instruction -> edited image (timbrooks/instruct-pix2pix)."""

    image_guidance_scale = 1.2

    def load(self):
        from diffusers import (EulerAncestralDiscreteScheduler,
                               StableDiffusionInstructPix2PixPipeline)
        self.load_safety_checker(self.dir())
        self.pipe = StableDiffusionInstructPix2PixPipeline.from_pretrained(
            self.dir(), torch_dtype=self.dtype, safety_checker=None,
            requires_safety_checker=False, local_files_only=True).to(self.device)
        self.pipe.scheduler = EulerAncestralDiscreteScheduler.from_config(
            self.pipe.scheduler.config)
        self.pipe.set_progress_bar_config(disable=True)

    def run(self, rgb: np.ndarray, text: str, ctx: RunContext) -> np.ndarray:
        hw = fit_size(*rgb.shape[:2], ctx.image_size, 8)
        out = self._call(ctx, prompt=text, image=_pil(rgb, hw),
                         image_guidance_scale=self.image_guidance_scale)
        return cv2.resize(out, (rgb.shape[1], rgb.shape[0]), interpolation=cv2.INTER_CUBIC)


class Inpainter(_Diffusion):
    """SD inpainting: remove, replace and extend.

    A CLIPSeg masker finds what to remove or replace; a BLIP captioner says what to paint
    around an image being extended.
    """

    def load(self):
        from diffusers import StableDiffusionInpaintPipeline
        self.load_safety_checker(self.dir())
        self.pipe = StableDiffusionInpaintPipeline.from_pretrained(
            self.dir(), torch_dtype=self.dtype, safety_checker=None,
            requires_safety_checker=False, local_files_only=True).to(self.device)
        self.pipe.set_progress_bar_config(disable=True)

    def remove(self, rgb: np.ndarray, target: str, masker, ctx: RunContext) -> np.ndarray:
        """Paint `target` over with background."""
        return self.replace(rgb, target, "background", masker, ctx)

    def replace_described(self, rgb: np.ndarray, text: str, masker,
                          ctx: RunContext) -> np.ndarray:
        """`text` is "object to replace, what to replace it with" (Visual ChatGPT's form)."""
        target, sep, repl = text.partition(",")
        if not sep or not target.strip() or not repl.strip():
            raise ToolError("replace needs text 'object to replace, what to replace it with'")
        return self.replace(rgb, target.strip(), repl.strip(), masker, ctx)

    def replace(self, rgb: np.ndarray, target: str, replacement: str, masker,
                ctx: RunContext) -> np.ndarray:
        ctx.progress("segmenting", 0, ctx.steps)
        mask = masker.mask(rgb, target)
        if mask is None:
            raise ToolError(f"could not find '{target}' in the image (mask under 2% of it)")
        hw = fit_size(*rgb.shape[:2], ctx.image_size, 8)
        out = self._call(ctx, prompt=replacement, image=_pil(rgb, hw),
                         mask_image=Image.fromarray(mask).resize((hw[1], hw[0]), Image.NEAREST),
                         height=hw[0], width=hw[1], guidance_scale=7.5)
        return cv2.resize(out, (rgb.shape[1], rgb.shape[0]), interpolation=cv2.INTER_CUBIC)

    def outpaint(self, rgb: np.ndarray, text: str, captioner, ctx: RunContext) -> np.ndarray:
        """Extend the image to the size in `text` ("2048x1024" or "2x"), step by step.

        Visual ChatGPT's InfinityOutPainting: each step captions the image so far, puts it in
        the middle of a canvas at most OUTPAINT_GROWTH times larger per side and inpaints the
        border; the known pixels are put back. Feedback names the step; cancel stops between
        steps and between denoising steps.
        """
        h, w = rgb.shape[:2]
        tw, th = outpaint_size(text, w, h)
        n = outpaint_steps(w, h, tw, th)
        img = rgb
        for i in range(1, n + 1):
            ctx.check()
            stage = f"extending {i}/{n}"
            ctx.progress(f"{stage}: captioning", 0, ctx.steps)
            prompt = f"{captioner.run(img)}, {A_PROMPT}"
            ch = min(th, int(round(img.shape[0] * OUTPAINT_GROWTH)))
            cw = min(tw, int(round(img.shape[1] * OUTPAINT_GROWTH)))
            y, x = (ch - img.shape[0]) // 2, (cw - img.shape[1]) // 2
            canvas = cv2.copyMakeBorder(img, y, ch - img.shape[0] - y, x, cw - img.shape[1] - x,
                                        cv2.BORDER_REPLICATE)
            mask = np.full((ch, cw), 255, np.uint8)
            mask[y:y + img.shape[0], x:x + img.shape[1]] = 0
            hw = fit_size(ch, cw, ctx.image_size, 8)
            step_ctx = dataclasses.replace(
                ctx, progress=lambda _s, k, total, stage=stage: ctx.progress(stage, k, total))
            out = self._call(step_ctx, prompt=prompt, negative_prompt=N_PROMPT,
                             image=_pil(canvas, hw),
                             mask_image=Image.fromarray(mask).resize((hw[1], hw[0]),
                                                                     Image.NEAREST),
                             height=hw[0], width=hw[1], guidance_scale=7.5)
            out = cv2.resize(out, (cw, ch), interpolation=cv2.INTER_CUBIC)
            out[y:y + img.shape[0], x:x + img.shape[1]] = img      # the known pixels stay
            img = out
        return img


def outpaint_size(text: str, w: int, h: int) -> tuple[int, int]:
    """Return the (width, height) asked for: "WxH" or a scale "2x" / "1.5x".

    ToolError when it is not larger than the image, or past OUTPAINT_MAX_SIDE.
    """
    t = text.strip().lower().replace(" ", "").replace("×", "x")
    size = re.fullmatch(r"(\d+)x(\d+)", t)
    scale = re.fullmatch(r"(?:scale)?(\d+(?:\.\d+)?)x?", t) or re.fullmatch(
        r"x(\d+(?:\.\d+)?)", t)
    if size:
        tw, th = int(size.group(1)), int(size.group(2))
    elif scale:
        f = float(scale.group(1))
        tw, th = int(round(w * f)), int(round(h * f))
    else:
        raise ToolError(f"outpaint needs the new size as widthxheight (e.g. 2048x1024) or a "
                        f"scale (e.g. 2x), not {text!r}")
    if tw < w or th < h or (tw, th) == (w, h):
        raise ToolError(f"outpaint makes an image larger: {tw}x{th} is not larger than the "
                        f"{w}x{h} image in both sides")
    if max(tw, th) > OUTPAINT_MAX_SIDE:
        raise ToolError(f"outpaint size {tw}x{th} is too large: at most {OUTPAINT_MAX_SIDE} "
                        "pixels a side")
    return tw, th


def outpaint_steps(w: int, h: int, tw: int, th: int) -> int:
    """How many canvases it takes to reach (tw, th), each side growing OUTPAINT_GROWTH a step."""
    ratio = max(tw / w, th / h)
    return max(1, math.ceil(math.log(ratio) / math.log(OUTPAINT_GROWTH) - 1e-9))


class ControlNetGenerator(_Diffusion):
    """Condition map + description -> new image (SD 1.5 + one ControlNet 1.0 model)."""

    def __init__(self, checkpoint: str, device: str = "cpu", allow_download: bool = False,
                 base_checkpoint: str = "runwayml/stable-diffusion-v1-5",
                 safety_checker: bool = True):
        super().__init__(checkpoint, device, allow_download, safety_checker)
        self.base_checkpoint = base_checkpoint

    def load(self):
        from diffusers import (ControlNetModel, StableDiffusionControlNetPipeline,
                               UniPCMultistepScheduler)
        self.load_safety_checker(resolve_dir(self.base_checkpoint, self.allow_download))
        cn = ControlNetModel.from_pretrained(self.dir(), torch_dtype=self.dtype,
                                             local_files_only=True).to(self.device)
        self.base = base = base_pipeline(self.base_checkpoint, self.device, self.dtype,
                                         self.allow_download)
        comps = {k: v for k, v in base.components.items()
                 if k in ("vae", "text_encoder", "tokenizer", "unet", "feature_extractor",
                          "image_encoder")}
        self.pipe = StableDiffusionControlNetPipeline(
            **comps, controlnet=cn, safety_checker=None, requires_safety_checker=False,
            scheduler=UniPCMultistepScheduler.from_config(base.scheduler.config))
        self.pipe.set_progress_bar_config(disable=True)

    def run(self, cond: np.ndarray, text: str, ctx: RunContext) -> np.ndarray:
        hw = fit_size(*cond.shape[:2], ctx.image_size, 64)
        return self._call(ctx, prompt=f"{text}, {A_PROMPT}", image=_pil(cond, hw),
                          height=hw[0], width=hw[1], eta=0.0, negative_prompt=N_PROMPT,
                          guidance_scale=ctx.guidance_scale)
