"""Image kernels on host pixels, shared by the image ops and the data readers."""
from __future__ import annotations

import numpy as np

__all__ = ["resize"]


def resize(pixels: np.ndarray, width: int, height: int) -> np.ndarray:
    """``pixels`` (H, W, C) uint8 resized bilinearly to (height, width, C) by Pillow."""
    from PIL import Image
    if pixels.shape[:2] == (height, width):
        return pixels
    channels = pixels.shape[2]
    image = Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels)
    resized = np.asarray(image.resize((width, height), Image.BILINEAR))
    return resized[:, :, None] if channels == 1 else resized
