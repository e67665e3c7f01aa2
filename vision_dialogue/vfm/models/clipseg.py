"""Text-prompted segmentation masks with CLIPSeg (CIDAS/clipseg-rd64-refined).

Used by the remove/replace tools, where Visual ChatGPT used MaskFormer.
"""
from __future__ import annotations

import cv2
import numpy as np
import torch

from vision_dialogue.vfm.models.common import LoadedModel


class TextMasker(LoadedModel):
    threshold = 0.5
    min_area = 0.02
    padding = 20  # pixels at 512x512, scaled with the image

    def load(self):
        self.load_transformers("CLIPSegProcessor", "CLIPSegForImageSegmentation")

    @torch.inference_mode()
    def probabilities(self, rgb: np.ndarray, text: str) -> np.ndarray:
        """Per-pixel probability (model resolution) that a pixel shows `text`."""
        inputs = self.processor(text=[text], images=[rgb], padding="max_length",
                                return_tensors="pt").to(self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        logits = self.model(**inputs).logits
        return torch.sigmoid(logits.float()).reshape(logits.shape[-2:]).cpu().numpy()

    def mask(self, rgb: np.ndarray, text: str) -> np.ndarray | None:
        """Return where the object is, as a uint8 HxW image at the input's size.

        255 marks the object (padded a little); None if it covers less than 2% of the image.
        """
        m = self.probabilities(rgb, text) > self.threshold
        if m.mean() < self.min_area:
            return None
        pad = max(1, round(self.padding * m.shape[0] / 512))
        m = cv2.dilate(m.astype(np.uint8) * 255, np.ones((2 * pad + 1, 2 * pad + 1), np.uint8))
        return cv2.resize(m, (rgb.shape[1], rgb.shape[0]), interpolation=cv2.INTER_NEAREST)
