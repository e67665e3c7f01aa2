"""Semantic segmentation with UperNet (openmmlab/upernet-convnext-small, ADE20K).

Coloured with the ADE20K palette that ControlNet's seg model was trained on.
"""
from __future__ import annotations

import numpy as np
import torch

from vision_dialogue.vfm.models.common import LoadedModel

# ADE20K palette (150 classes), as used by ControlNet / Visual ChatGPT.
_ADE = """
787878 b47878 06e6e6 503232 04c803 787850 8c8c8c cc05ff e6e6e6 04fa07 e005ff ebff07 96053d
787846 08ff33 ff0652 8fff8c ccff04 ff3307 cc4603 0066c8 3de6fa ff0633 0b66ff ff0747 ff09e0
0907e6 dcdcdc ff095c 7009ff 08ffd6 07ffe0 ffb806 0aff47 ff290a 07ffff e0ff08 6608ff ff3d06
ffc207 ff7a08 00ff14 ff0829 ff0599 0633ff eb0cff a09614 00a3ff 8c8c8c fa0a0f 14ff00 1fff00
ff1f00 ffe000 99ff00 0000ff ff4700 00ebff 00adff 1f00ff 0bc8c8 ff5200 00fff5 003dff 00ff70
00ff85 ff0000 ffa300 ff6600 c2ff00 008fff 33ff00 0052ff 00ff29 00ffad 0a00ff adff00 00ff99
ff5c00 ff00ff ff00f5 ff0066 ffad00 ff0014 ffb8b8 001fff 00ff3d 0047ff ff00cc 00ffc2 00ff52
000aff 0070ff 3300ff 00c2ff 007aff 00ffa3 ff9900 00ff0a ff7000 8fff00 5200ff a3ff00 ffeb00
08b8aa 8500ff 00ff5c b800ff ff001f 00b8ff 00d6ff ff0070 5cff00 00e0ff 70e0ff 46b8a0 a300ff
9900ff 47ff00 ff00a3 ffcc00 ff008f 00ffeb 85ff00 ff00eb f500ff ff007a fff500 0abed4 d6ff00
00ccff 1400ff ffff00 0099ff 0029ff 00ffcc 2900ff 29ff00 ad00ff 00f5ff 4700ff 7a00ff 00ffb8
005cff b8ff00 0085ff ffd600 19c2c2 66ff00 5c00ff"""
ADE_PALETTE = np.array([[int(h[i:i + 2], 16) for i in (0, 2, 4)] for h in _ADE.split()],
                       np.uint8)


class Segmenter(LoadedModel):
    def load(self):
        self.load_transformers("AutoImageProcessor", "UperNetForSemanticSegmentation")

    @torch.inference_mode()
    def labels(self, rgb: np.ndarray) -> np.ndarray:
        pv = self.processor(images=rgb, return_tensors="pt")["pixel_values"]
        out = self.model(pixel_values=pv.to(self.device, self.dtype))
        out.logits = out.logits.float()
        seg = self.processor.post_process_semantic_segmentation(
            out, target_sizes=[rgb.shape[:2]])[0]
        return seg.cpu().numpy()

    def run(self, rgb: np.ndarray) -> np.ndarray:
        """HxWx3 uint8 colour segmentation (ADE20K palette)."""
        return ADE_PALETTE[np.clip(self.labels(rgb), 0, len(ADE_PALETTE) - 1)]
