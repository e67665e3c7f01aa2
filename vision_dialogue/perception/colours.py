"""Colours in words: a frame's pixels (OpenCV HSV) named and counted, vectorised.

What the observer says of clothes, the background and things nobody is holding when no
detector names them. ROS-free.
"""
from __future__ import annotations

import numpy as np


def colour_names(hsv: np.ndarray) -> np.ndarray:
    """Vectorised colour words for an (N, 3) array of OpenCV HSV pixels."""
    hue, sat, val = (hsv[:, i].astype(np.int16) for i in range(3))
    names = np.empty(len(hsv), dtype=object)
    hue_names = np.select(
        [(hue < 5) | (hue >= 170), hue < 20, hue < 33, hue < 85, hue < 100, hue < 130, hue < 150],
        ["red", "orange", "yellow", "green", "teal", "blue", "purple"], default="pink")
    names[:] = hue_names
    dark = val < 100
    light = (val > 200) & (sat < 110)
    names[dark] = np.char.add("dark ", hue_names[dark].astype(str)).astype(object)
    names[light] = np.char.add("light ", hue_names[light].astype(str)).astype(object)
    brown = (np.isin(hue_names, ["red", "orange", "yellow"]) & (val < 150) & (val >= 50)
             & (sat > 90))
    names[brown] = "brown"
    grey = sat < 45
    names[grey & (val > 200)] = "white"
    names[grey & (val > 130) & (val <= 200)] = "light grey"
    names[grey & (val > 80) & (val <= 130)] = "grey"
    names[grey & (val <= 80)] = "dark grey"
    names[val < 50] = "black"
    return names


def colour_counts(hsv: np.ndarray, max_pixels: int = 4000) -> list[tuple[str, float]]:
    if len(hsv) == 0:
        return []
    step = max(1, len(hsv) // max_pixels)
    names, counts = np.unique(colour_names(hsv[::step]).astype(str), return_counts=True)
    order = np.argsort(-counts, kind="stable")
    total = counts.sum()
    return [(str(names[i]), float(counts[i] / total)) for i in order]


def dominant_colour(hsv: np.ndarray) -> str | None:
    """'mostly X' when X covers half the pixels, else 'X and Y'."""
    counts = colour_counts(hsv)
    if not counts:
        return None
    if counts[0][1] >= 0.5 or len(counts) == 1:
        return f"mostly {counts[0][0]}"
    return f"{counts[0][0]} and {counts[1][0]}"


def top_colours(hsv: np.ndarray, n: int) -> list[str]:
    return [name for name, share in colour_counts(hsv)[:n] if share >= 0.15]
