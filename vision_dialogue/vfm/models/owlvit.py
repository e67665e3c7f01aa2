"""Text-prompted object detection with OWL-ViT (google/owlvit-base-patch32)."""
from __future__ import annotations

import numpy as np
import torch

from vision_dialogue.vfm.models.common import LoadedModel, pixel_box


class Detector(LoadedModel):
    threshold = 0.1

    def load(self):
        self.load_transformers("OwlViTProcessor", "OwlViTForObjectDetection")

    @torch.inference_mode()
    def detect(self, rgb: np.ndarray, names: list[str], threshold: float | None = None):
        """[(name, score, (x1, y1, x2, y2) pixels)] best first."""
        inputs = self.processor(text=[names], images=rgb, return_tensors="pt").to(self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        out = self.model(**inputs)
        out.logits = out.logits.float()
        out.pred_boxes = out.pred_boxes.float()
        thr = self.threshold if threshold is None else threshold
        res = self.processor.image_processor.post_process_object_detection(
            out, threshold=thr, target_sizes=torch.tensor([rgb.shape[:2]]))[0]
        dets = []
        for score, label, box in zip(res["scores"].tolist(), res["labels"].tolist(),
                                     res["boxes"].tolist()):
            dets.append((names[label], float(score), pixel_box(box, rgb)))
        return sorted(dets, key=lambda d: -d[1])

    def run(self, rgb: np.ndarray, text: str) -> str:
        names = [n.strip() for n in text.split(",") if n.strip()]
        if not names:
            from vision_dialogue.vfm.errors import ToolError
            raise ToolError("detect needs the object name(s) to find, comma separated")
        dets = self.detect(rgb, names)
        if not dets:
            return f"Found none of: {', '.join(names)}."
        return "; ".join(f"{n} at [{x1}, {y1}, {x2}, {y2}] (score {s:.2f})"
                         for n, s, (x1, y1, x2, y2) in dets[:20])
