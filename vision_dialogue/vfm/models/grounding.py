"""Text-prompted boxes with GroundingDINO (IDEA-Research/grounding-dino-tiny) in transformers.

TaskMatrix's Text2Box (GroundingDINO Swin-T OGC, box threshold 0.3, text threshold 0.25)
finds the boxes that its "Segment the given object" gives to Segment Anything; here it does the
same for `segmentobject`. transformers runs it in plain PyTorch: no compiled extension.
"""
from __future__ import annotations

import numpy as np
import torch

from vision_dialogue.vfm.models.common import LoadedModel, pixel_box


def prompt(names: list[str]) -> str:
    """GroundingDINO's caption form: lower case, phrases ending in "."."""
    return " ".join(f"{n.strip().lower().rstrip('.')}." for n in names)


def name_of(label: str, names: list[str]) -> str | None:
    """The asked name a predicted phrase stands for (the phrase holds the name, or the name it)."""
    label = label.replace("[SEP]", "").strip().lower()
    for n in names:
        if n.lower() in label or (label and label in n.lower()):
            return n
    return None


class GroundingDetector(LoadedModel):
    """detect(rgb, names) → [(name, score, (x1, y1, x2, y2))], like owlvit.Detector."""

    box_threshold = 0.3
    text_threshold = 0.25

    def load(self):
        self.load_transformers("AutoProcessor", "AutoModelForZeroShotObjectDetection")

    @torch.inference_mode()
    def detect(self, rgb: np.ndarray, names: list[str], threshold: float | None = None):
        inputs = self.processor(images=rgb, text=prompt(names), return_tensors="pt").to(
            self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        out = self.model(**inputs)
        out.logits = out.logits.float()
        out.pred_boxes = out.pred_boxes.float()
        res = self.processor.post_process_grounded_object_detection(
            out, inputs["input_ids"],
            threshold=self.box_threshold if threshold is None else threshold,
            text_threshold=self.text_threshold, target_sizes=[rgb.shape[:2]])[0]
        dets = []
        for score, label, box in zip(res["scores"].tolist(), res["text_labels"],
                                     res["boxes"].tolist()):
            name = name_of(label, names)
            if name is None:
                continue
            dets.append((name, float(score), pixel_box(box, rgb)))
        return sorted(dets, key=lambda d: -d[1])
