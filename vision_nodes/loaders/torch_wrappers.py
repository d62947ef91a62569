"""Small torch.nn wrappers; imported only on PyTorch code paths (torch is optional)."""

from __future__ import annotations

import torch


class FirstOutput(torch.nn.Module):
    """Wrap a module whose eval forward returns (prediction, extras): keep the prediction.

    The prediction is a tensor (detect, pose) or a tuple of tensors (segment: predictions
    and mask prototypes, the outputs an export gives); the extras (raw head outputs, for the
    loss) are dropped.
    """

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        out = self.inner(x)
        while isinstance(out, (tuple, list)) and \
                not all(isinstance(item, torch.Tensor) for item in out):
            out = out[0]
        return tuple(out) if isinstance(out, (tuple, list)) else out


class PredictedDepth(torch.nn.Module):
    """Wrap a transformers depth model: pixel values in, (N, 1, H, W) depth tensor out."""

    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        depth = self.inner(pixel_values=x, return_dict=True).predicted_depth
        return depth.unsqueeze(1) if depth.dim() == 3 else depth
