"""PyTorch module factories used as ``package.module:factory`` sources in tests."""

from __future__ import annotations

from typing import Any


def mlp() -> Any:
    """A small MLP: input [batch, 16] -> [batch, 4]."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def pooled() -> Any:
    """Two inputs with a dynamic sequence dim, two outputs in a dict: a toy text encoder."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(1)
            self.embed = torch.nn.Embedding(50, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, input_ids: Any, attention_mask: Any) -> dict[str, Any]:
            tokens = self.embed(input_ids)
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return {"pooled": pooled, "scores": self.head(tokens)}

    return Pooled()


def batch_baked() -> Any:
    """Scales by the batch size read as a Python number: tracing bakes the sample batch in."""
    import torch

    class Baked(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x * float(x.shape[0])

    return Baked()


def not_a_module() -> Any:
    """Returns something that is not a module."""
    return 42


def raises() -> Any:
    """A factory that fails."""
    raise RuntimeError("weights not found")


def strided() -> Any:
    """Five 2x2 pools upsampled 32-fold and concatenated with the image: sides must be multiples of 32."""
    import torch

    class Strided(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pool = torch.nn.Sequential(*(torch.nn.MaxPool2d(2) for _ in range(5)))
            self.up = torch.nn.Upsample(scale_factor=32.0)

        def forward(self, image: Any) -> Any:
            return torch.cat([image, self.up(self.pool(image))], dim=1)

    return Strided()


def running_mean() -> Any:
    """Keeps a running mean of its inputs in a buffer and subtracts it: stateful."""
    import torch

    class RunningMean(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.zeros(4))

        def forward(self, x: Any) -> Any:
            self.mean.mul_(0.9).add_(0.1 * x.mean(0))
            return x - self.mean

    return RunningMean()


def resampled() -> Any:
    """``forward(self, x, rate: int, scale: float = 1.0)``: Python values beside the tensor."""
    import torch

    class Resampled(torch.nn.Module):
        def forward(self, x: Any, rate: int, scale: float = 1.0) -> Any:
            return x * (rate / 16000.0) * scale

    return Resampled()


def pooled_pair() -> Any:
    """:func:`pooled` answering a tuple (pooled, scores): traceable, scriptable and exportable alike."""
    import torch

    class Pair(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(1)
            self.embed = torch.nn.Embedding(50, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor
        ) -> tuple[torch.Tensor, torch.Tensor]:
            tokens = self.embed(input_ids)
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            return pooled, self.head(tokens)

    return Pair()
