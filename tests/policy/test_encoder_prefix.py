"""The learner's cheaper top layer for an encoder base: the last trainable layer run at the
instruction's positions alone (`layer_at_prefix`, `EncoderBackbone.top_prefix`) must give what the
full layer gives there, values and gradients, checked to 1e-5 against the layer's own forward."""

from __future__ import annotations

import pytest
import torch

from distrl_core.policy.encoder import layer_at_prefix


def _layer_and_inputs(seed: int = 0, attention: str = "sdpa"):
    from transformers import BertConfig
    from transformers.models.bert.modeling_bert import BertLayer

    torch.manual_seed(seed)
    config = BertConfig(hidden_size=32, num_attention_heads=4, intermediate_size=64)
    config._attn_implementation = attention  # what from_pretrained sets; None would mask nothing
    config.hidden_dropout_prob = config.attention_probs_dropout_prob = 0.0
    layer = BertLayer(config).eval()
    lengths = torch.tensor([7, 5, 3])
    hidden = torch.randn(3, 7, 32)
    mask = (torch.arange(7)[None, :] < lengths[:, None]).long()
    return config, layer, hidden, mask, lengths


def _full(config, layer, hidden, mask) -> torch.Tensor:
    from transformers.masking_utils import create_bidirectional_mask

    return layer(hidden, create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=mask))


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
@pytest.mark.parametrize("width", [1, 3, 7])
def test_the_layer_at_a_prefix_equals_the_full_layer_there(width, attention):
    config, layer, hidden, mask, lengths = _layer_and_inputs(attention=attention)
    full = _full(config, layer, hidden, mask)
    prefix = layer_at_prefix(layer, hidden, mask, width)
    assert prefix.shape == (3, width, 32)
    for row, length in enumerate(lengths.tolist()):
        real = min(width, length)  # past a row's length both are padding, never read
        assert torch.allclose(prefix[row, :real], full[row, :real], atol=1e-5, rtol=0)


def test_gradients_through_the_prefix_equal_the_full_layers():
    config, layer, hidden, mask, _ = _layer_and_inputs(seed=1)
    widths = [2, 4, 3]  # per row, within its length: what the encoder's instruction prefix is
    weights = torch.randn(3, 32)

    def loss(out: torch.Tensor) -> torch.Tensor:
        means = torch.stack([out[row, :w].mean(0) for row, w in enumerate(widths)])
        return (means * weights).sum()

    grads = []
    for forward in (
        lambda: _full(config, layer, hidden, mask),
        lambda: layer_at_prefix(layer, hidden, mask, max(widths)),
    ):
        layer.zero_grad(set_to_none=True)
        loss(forward()).backward()
        grads.append({name: p.grad.clone() for name, p in layer.named_parameters() if p.grad is not None})
    full, prefix = grads
    assert full.keys() == prefix.keys() and len(full) >= 10  # every weight the prefix reaches
    for name in full:
        assert torch.allclose(full[name], prefix[name], atol=1e-5, rtol=0), name
