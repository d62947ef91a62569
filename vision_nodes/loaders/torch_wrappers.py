"""Small torch.nn wrappers; imported only on PyTorch code paths (torch is optional)."""

from __future__ import annotations

import torch


class FirstOutput(torch.nn.Module):
    """Wrap a module whose eval forward returns (prediction, extras): keep the prediction."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.inner(x)
        while isinstance(out, (tuple, list)):
            out = out[0]
        return out


class PredictedDepth(torch.nn.Module):
    """Wrap a transformers depth model: pixel values in, (N, 1, H, W) depth tensor out."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        depth = self.inner(pixel_values=x, return_dict=True).predicted_depth
        return depth.unsqueeze(1) if depth.dim() == 3 else depth
