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
