"""BLIP captioning and visual question answering (Salesforce/blip-*-base by default)."""
from __future__ import annotations

import numpy as np
import torch

from vision_dialogue.vfm.models.common import LoadedModel


class _Blip(LoadedModel):
    model_cls = "BlipForConditionalGeneration"

    def load(self):
        self.load_transformers("BlipProcessor", self.model_cls)

    @torch.inference_mode()
    def _generate(self, rgb: np.ndarray, text: str | None) -> str:
        inputs = self.processor(images=rgb, text=text, return_tensors="pt").to(self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.dtype)
        out = self.model.generate(**inputs)
        return self.processor.decode(out[0], skip_special_tokens=True).strip()


class Captioner(_Blip):
    """Image -> one-sentence caption."""

    def run(self, rgb: np.ndarray) -> str:
        return self._generate(rgb, None)


class QuestionAnswerer(_Blip):
    """Image + question -> short answer."""

    model_cls = "BlipForQuestionAnswering"

    def run(self, rgb: np.ndarray, question: str) -> str:
        return self._generate(rgb, question)
