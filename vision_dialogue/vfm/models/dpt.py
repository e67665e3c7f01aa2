"""Monocular depth with DPT (Intel/dpt-hybrid-midas) and the normal map derived from it.

As Visual ChatGPT's Image2Depth / Image2Normal.
"""
from __future__ import annotations

import cv2
import numpy as np
import torch

from vision_dialogue.vfm.models.common import LoadedModel


class DepthEstimator(LoadedModel):
    bg_threshold = 0.4

    def load(self):
        self.load_transformers("AutoImageProcessor", "DPTForDepthEstimation")

    @torch.inference_mode()
    def predicted_depth(self, rgb: np.ndarray) -> np.ndarray:
        """Raw relative inverse depth at the model's resolution (float32 HxW)."""
        inputs = self.processor(images=rgb, return_tensors="pt")
        pv = inputs["pixel_values"].to(self.device, self.dtype)
        return self.model(pixel_values=pv).predicted_depth[0].float().cpu().numpy()

    def depth(self, rgb: np.ndarray) -> np.ndarray:
        """Depth map as a 3-channel uint8 image at the input's size (near = bright)."""
        d = cv2.resize(self.predicted_depth(rgb), (rgb.shape[1], rgb.shape[0]),
                       interpolation=cv2.INTER_CUBIC)
        d = d - d.min()
        d = (d / (float(d.max()) or 1.0) * 255.0).astype(np.uint8)
        return np.repeat(d[:, :, None], 3, axis=2)

    def normal(self, rgb: np.ndarray) -> np.ndarray:
        """Normal map from depth gradients (Sobel), background below 0.4 flattened."""
        d = self.predicted_depth(rgb).astype(np.float32)
        dn = d - d.min()
        dn /= float(dn.max()) or 1.0
        x = cv2.Sobel(d, cv2.CV_32F, 1, 0, ksize=3)
        y = cv2.Sobel(d, cv2.CV_32F, 0, 1, ksize=3)
        x[dn < self.bg_threshold] = 0
        y[dn < self.bg_threshold] = 0
        z = np.ones_like(x) * np.pi * 2.0
        n = np.stack([x, y, z], axis=2)
        n /= np.sum(n ** 2.0, axis=2, keepdims=True) ** 0.5
        n = (n * 127.5 + 127.5).clip(0, 255).astype(np.uint8)
        return cv2.resize(n, (rgb.shape[1], rgb.shape[0]), interpolation=cv2.INTER_LINEAR)
