"""HED soft-edge maps with ControlNet's Apache-2 HED network.

The network (lllyasviel/Annotators, ControlNetHED.pth) is reimplemented here so no
controlnet_aux is needed.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from vision_dialogue.vfm.models.common import LoadedModel, resolve_file


class _Block(nn.Module):
    def __init__(self, cin: int, cout: int, layers: int):
        super().__init__()
        self.convs = nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1),
                                   *[nn.Conv2d(cout, cout, 3, padding=1)
                                     for _ in range(layers - 1)])
        self.projection = nn.Conv2d(cout, 1, 1)

    def forward(self, x, down: bool = False):
        h = F.max_pool2d(x, 2, 2) if down else x
        for conv in self.convs:
            h = F.relu(conv(h))
        return h, self.projection(h)


class ControlNetHED(nn.Module):
    """ControlNetHED_Apache2; `width` = 64 for the released weights (less only for tests)."""

    def __init__(self, width: int = 64):
        super().__init__()
        w = width
        self.norm = nn.Parameter(torch.zeros(1, 3, 1, 1))
        self.block1 = _Block(3, w, 2)
        self.block2 = _Block(w, 2 * w, 2)
        self.block3 = _Block(2 * w, 4 * w, 3)
        self.block4 = _Block(4 * w, 8 * w, 3)
        self.block5 = _Block(8 * w, 8 * w, 3)

    def forward(self, x):
        h = x - self.norm
        projections = []
        blocks = (self.block1, self.block2, self.block3, self.block4, self.block5)
        for i, block in enumerate(blocks):
            h, p = block(h, down=i > 0)
            projections.append(p)
        return projections


class HedDetector(LoadedModel):
    """Soft HED boundary map (and, with `scribble=True`, a thresholded scribble)."""

    def load(self):
        path = resolve_file(self.checkpoint, "ControlNetHED.pth", self.allow_download)
        state = torch.load(path, map_location="cpu", weights_only=True)
        width = int(state["block1.convs.0.weight"].shape[0])
        net = ControlNetHED(width)
        net.load_state_dict(state)
        self.net = net.to(self.device, self.dtype).eval()

    @torch.inference_mode()
    def edges(self, rgb: np.ndarray) -> np.ndarray:
        """HxWx3 uint8 RGB -> HxW float edge probability in [0, 1]."""
        h, w = rgb.shape[:2]
        x = torch.from_numpy(rgb.copy()).to(self.device, self.dtype).permute(2, 0, 1)[None]
        maps = [torch.sigmoid(F.interpolate(p.float(), size=(h, w), mode="bilinear",
                                            align_corners=False))[0, 0] for p in self.net(x)]
        return torch.stack(maps).mean(0).cpu().numpy()

    def run(self, rgb: np.ndarray, scribble: bool = False) -> np.ndarray:
        e = self.edges(rgb)
        if scribble:
            e = (cv2_nms(e) > 0.5).astype(np.float32)
        out = (e * 255.0).clip(0, 255).astype(np.uint8)
        return np.repeat(out[:, :, None], 3, axis=2)


def cv2_nms(e: np.ndarray) -> np.ndarray:
    """Thin a soft edge map into scribble strokes (blur + keep local maxima, as ControlNet)."""
    import cv2
    e = cv2.GaussianBlur(e.astype(np.float32), (0, 0), 3.0)
    dil = cv2.dilate(e, np.ones((3, 3), np.uint8))
    return np.where(e >= dil - 1e-6, e / max(float(e.max()), 1e-6), 0.0)
