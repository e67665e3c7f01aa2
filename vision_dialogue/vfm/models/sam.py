"""Segment Anything (facebook/sam-vit-huge, as Visual ChatGPT's Segmenting) through transformers.

`segment`: masks of the whole image from a grid of point prompts (SAM's automatic mask
generator: best of three masks per point, kept when its predicted IoU and stability are high,
near duplicates dropped), drawn as colour overlays, largest first (Visual ChatGPT's picture).
`segment_objects`: the detector's boxes for the named objects as box prompts, one mask each.
Nothing found makes no image: the text says so.

The grid is ours, not transformers' "mask-generation" pipeline: that pipeline needs
torchvision, whose PyPI wheel is built against CUDA torch and breaks the CPU torch here.
"""
from __future__ import annotations

import colorsys
from collections import Counter

import cv2
import numpy as np
import torch

from vision_dialogue.vfm.errors import ToolError
from vision_dialogue.vfm.models.common import LoadedModel, RunContext, ToolImage

#: the overlay's weight of the image (Visual ChatGPT's show_mask: 0.7 image + 0.3 colour)
IMAGE_WEIGHT = 0.7
#: an image whose pixels vary less than this is blank: nothing to segment
BLANK_STD = 1.0


def colours(n: int) -> np.ndarray:
    """Well separated RGB colours, uint8, one per mask (golden-ratio hues)."""
    return np.array([[round(c * 255) for c in colorsys.hsv_to_rgb((i * 0.618034) % 1, 0.75, 1)]
                     for i in range(n)], np.uint8).reshape(-1, 3)


def overlay(rgb: np.ndarray, masks: list[np.ndarray]) -> np.ndarray:
    """Each mask in its own colour over the image, largest first so small ones stay on top."""
    out = rgb.astype(np.float32)
    order = sorted(range(len(masks)), key=lambda i: -int(masks[i].sum()))
    for colour, i in zip(colours(len(masks)), order):
        m = masks[i]
        out[m] = IMAGE_WEIGHT * out[m] + (1 - IMAGE_WEIGHT) * colour
        edges = cv2.morphologyEx(m.astype(np.uint8), cv2.MORPH_GRADIENT, np.ones((3, 3)))
        out[edges > 0] = colour
    return out.round().clip(0, 255).astype(np.uint8)


def within(mask: np.ndarray, box) -> np.ndarray:
    """The mask inside its prompt box: a box prompt asks for the object in that box."""
    x1, y1, x2, y2 = (int(round(v)) for v in box)
    out = np.zeros_like(mask)
    out[y1:y2 + 1, x1:x2 + 1] = mask[y1:y2 + 1, x1:x2 + 1]
    return out


def mask_iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 0.0


class Segmenter(LoadedModel):
    """SAM with point-grid (whole image) and box (named objects) prompts."""

    points_per_side = 16         # SAM's generator uses 32; 16 keeps a CPU call in seconds
    points_per_batch = 64
    pred_iou_thresh = 0.88       # SAM's defaults
    stability_thresh = 0.95
    stability_offset = 1.0
    duplicate_iou = 0.7
    min_area = 0.001             # of the image: smaller masks are specks
    max_masks = 64

    def load(self):
        self.load_transformers("SamProcessor", "SamModel")

    @torch.inference_mode()
    def _embed(self, rgb: np.ndarray, **prompts):
        """The image read once, with its prompts in the model's coordinates."""
        inputs = self.processor(images=rgb, return_tensors="pt", **prompts)
        emb = self.model.get_image_embeddings(inputs["pixel_values"].to(self.device, self.dtype))
        return inputs, emb

    @torch.inference_mode()
    def _decode(self, inputs, emb, multimask: bool, **prompts):
        out = self.model(image_embeddings=emb, multimask_output=multimask, **prompts)
        logits = self.processor.image_processor.post_process_masks(
            out.pred_masks.float().cpu(), inputs["original_sizes"],
            inputs["reshaped_input_sizes"], binarize=False)[0]
        return logits, out.iou_scores.float().cpu()[0]

    def segment(self, rgb: np.ndarray, ctx: RunContext) -> ToolImage:
        """Every segment SAM finds, each in its own colour; the count in the text."""
        h, w = rgb.shape[:2]
        if float(rgb.std()) < BLANK_STD:
            return ToolImage(None, "no segments: the image is blank (one colour)")
        ctx.progress("embedding", 0, 1)
        n = self.points_per_side
        grid = [[[(x + 0.5) * w / n, (y + 0.5) * h / n]] for y in range(n) for x in range(n)]
        inputs, emb = self._embed(rgb, input_points=[grid])
        points = inputs["input_points"].to(self.device, self.dtype)
        starts = range(0, len(grid), self.points_per_batch)
        found: list[tuple[float, np.ndarray]] = []
        for b, i in enumerate(starts):
            ctx.check()
            ctx.progress("segmenting", b, len(starts))
            logits, scores = self._decode(
                inputs, emb, True, input_points=points[:, i:i + self.points_per_batch])
            for per_point, iou in zip(logits, scores):
                best = int(iou.argmax())
                found.append((float(iou[best]), per_point[best].numpy()))
        ctx.progress("segmenting", len(starts), len(starts))
        masks = self._keep(found, h * w)
        if not masks:
            return ToolImage(None, "no segments found")
        return ToolImage(overlay(rgb, masks), f"{len(masks)} segment{'s' * (len(masks) > 1)}")

    def _keep(self, found: list[tuple[float, np.ndarray]], area: int) -> list[np.ndarray]:
        """Confident, stable, large enough, not a near duplicate of a better one."""
        kept: list[np.ndarray] = []
        for iou, logit in sorted(found, key=lambda f: -f[0]):
            if iou < self.pred_iou_thresh:
                break
            mask = logit > 0
            size = int(mask.sum())
            if size < self.min_area * area:
                continue
            stable = (logit > self.stability_offset).sum() / max(
                1, (logit > -self.stability_offset).sum())
            if stable < self.stability_thresh:
                continue
            if any(mask_iou(mask, k) > self.duplicate_iou for k in kept):
                continue
            kept.append(mask)
            if len(kept) >= self.max_masks:
                break
        return kept

    def segment_objects(self, rgb: np.ndarray, text: str, detector,
                        ctx: RunContext) -> ToolImage:
        """The named objects' masks: the detector's boxes as SAM box prompts.

        None found is an answer (no image, the text says so), not an error.
        """
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names:
            raise ToolError("segmentobject needs the object name(s) to find, comma separated")
        ctx.progress("detecting", 0, 2)
        dets = detector.detect(rgb, names)
        if not dets:
            return ToolImage(None, f"found no {' or '.join(names)} in the image")
        ctx.check()
        ctx.progress("segmenting", 1, 2)
        dets = dets[:self.max_masks]
        boxes = [list(map(float, box)) for _n, _s, box in dets]
        inputs, emb = self._embed(rgb, input_boxes=[boxes])
        logits, _scores = self._decode(
            inputs, emb, False, input_boxes=inputs["input_boxes"].to(self.device, self.dtype))
        masks = [within(m[0].numpy() > 0, box) for m, box in zip(logits, boxes)]
        ctx.progress("segmenting", 2, 2)
        counts = Counter(name for name, _s, _b in dets)
        said = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in counts.items())
        missing = [n for n in names if n not in counts]
        text = f"segmented {said}" + (f"; found no {' or '.join(missing)}" if missing else "")
        return ToolImage(overlay(rgb, masks), text)
