"""Heads on hidden states: candidate scores (actor), state value and trajectory success (critics).

The critics read either a separate small encoder of their own (the default, like DistRL/DigiRL's
separate critic models: the actor's features move as it learns, and a value head on them chases a
moving target), or the actor backbone's hidden states (``PolicyConfig.critic``).
"""

from __future__ import annotations

import torch
from torch import nn

from distrl_core.policy.backbone import hf
from distrl_core.policy.semantic_match import INDICES, NEUTRAL
from distrl_core.policy.tokenizer import FLAG_INSTRUCTION_MATCHED

__all__ = ["PolicyHeads"]


def _mlp(inputs: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.GELU(), nn.Linear(hidden, 1))


def _match_embedding(hidden_size: int) -> nn.Embedding:
    embedding = nn.Embedding(FLAG_INSTRUCTION_MATCHED + 1, hidden_size)
    nn.init.normal_(embedding.weight, std=0.02)
    return embedding


def _context_projection(width: int, hidden_size: int) -> nn.Linear:
    """The map of an encoder's contextual states (E) onto the tiny model's inputs (D), all zero:
    a fresh policy scores exactly as it would without the states, and the warm start learns how
    much of them to use (a random map would add noise of the embeddings' own scale)."""
    projection = nn.Linear(width, hidden_size, bias=False)
    nn.init.zeros_(projection.weight)
    return projection


def _semantic_embedding(hidden_size: int) -> nn.Embedding:
    """One row per semantic-match index; NEUTRAL's (padding_idx) stays zero and untrained."""
    embedding = nn.Embedding(INDICES, hidden_size, padding_idx=NEUTRAL)
    nn.init.normal_(embedding.weight, std=0.02)
    with torch.no_grad():
        embedding.weight[NEUTRAL].zero_()
    return embedding


class PolicyHeads(nn.Module):
    """``match``: embedding of the exact-match flag added to the actor's token embeddings.
    ``score``: MLP on [mean; last] hidden state of a candidate's tokens -> its score.
    ``critic_encoder`` (+ ``critic_match``): the separate critic's encoder, or None.
    ``value``: MLP on the prompt's last hidden state -> V(s).
    ``trajectory``: MLP on the instruction's last hidden state -> logit P(success | instruction).
    ``semantic`` (+ ``critic_semantic``): embedding of the semantic-match index
    (``policy.semantic_match``) added like ``match``, or None without that feature.
    ``semantic_prior``: one learned score per semantic-match index, added to the score of a
    candidate whose span starts on a token of that index (``SubwordSettings.semantic_prior``).
    ``context``: linear map (E -> D, no bias, zero at first) of the encoder's contextual token
    states (``policy.context_states``) added to the actor's inputs, or None without them (a
    separate critic's encoder reads the static inputs only).
    """

    def __init__(
        self,
        hidden_size: int,
        *,
        match_features: bool,
        critic_encoder: nn.Module | None = None,
        semantic_match: bool = False,
        context_width: int | None = None,
        semantic_prior: bool = False,
    ) -> None:
        super().__init__()
        self.match = _match_embedding(hidden_size) if match_features else None
        self.score = _mlp(2 * hidden_size, hidden_size)
        self.critic_encoder = critic_encoder
        critic_size = hidden_size
        self.critic_match = None
        if critic_encoder is not None:
            critic_size = hf(critic_encoder).get_input_embeddings().embedding_dim
            self.critic_match = _match_embedding(critic_size) if match_features else None
        self.value = _mlp(critic_size, critic_size)
        self.trajectory = _mlp(critic_size, critic_size)
        # Built last, so that without the feature every other weight draws what it always drew.
        self.semantic = _semantic_embedding(hidden_size) if semantic_match else None
        self.critic_semantic = None
        if critic_encoder is not None and semantic_match:
            self.critic_semantic = _semantic_embedding(critic_size)
        self.context = None if context_width is None else _context_projection(context_width, hidden_size)
        # One learned score per semantic-match index, added to a candidate's score (zero at first).
        self.semantic_prior = None
        if semantic_prior:
            self.semantic_prior = nn.Embedding(INDICES, 1, padding_idx=NEUTRAL)
            nn.init.zeros_(self.semantic_prior.weight)

    def actor_parameters(self) -> list[nn.Parameter]:
        params = list(self.score.parameters())
        params += list(self.match.parameters()) if self.match is not None else []
        params += list(self.context.parameters()) if self.context is not None else []
        params += list(self.semantic_prior.parameters()) if self.semantic_prior is not None else []
        return params + (list(self.semantic.parameters()) if self.semantic is not None else [])

    def critic_parameters(self) -> list[nn.Parameter]:
        params = list(self.value.parameters()) + list(self.trajectory.parameters())
        for module in (self.critic_encoder, self.critic_match, self.critic_semantic):
            if module is not None:
                params += list(module.parameters())
        return params

    def critic_states(
        self,
        ids: torch.Tensor,  # (N, L) token ids, unperturbed
        flags: torch.Tensor | None,  # (N, L) match flags (None without match features)
        attention: torch.Tensor,  # (N, L)
        actor_hidden: torch.Tensor,  # (N, L, D)
        mode: str,  # PolicyConfig.critic
        semantic: torch.Tensor | None = None,  # (N, L) semantic-match indices (None without them)
    ) -> torch.Tensor:  # (N, L, D_critic)
        if self.critic_encoder is None:
            return actor_hidden if mode == "shared" else actor_hidden.detach()
        inputs = hf(self.critic_encoder).get_input_embeddings()(ids)
        if self.critic_match is not None and flags is not None:
            inputs = inputs + self.critic_match(flags).to(inputs.dtype)
        if self.critic_semantic is not None and semantic is not None:
            inputs = inputs + self.critic_semantic(semantic).to(inputs.dtype)
        hidden: torch.Tensor = self.critic_encoder(
            inputs_embeds=inputs, attention_mask=attention
        ).last_hidden_state
        return hidden.float()

    def candidate_scores(
        self,
        hidden: torch.Tensor,  # (N, L, D)
        starts: torch.Tensor,  # (N, K) first token of each candidate
        ends: torch.Tensor,  # (N, K) one past its last token (>= start + 1 everywhere, padding too)
    ) -> torch.Tensor:  # (N, K)
        n, _, d = hidden.shape
        # Mean over a span from prefix sums: one gather per end instead of a loop over candidates.
        prefix = torch.cat([hidden.new_zeros(n, 1, d), hidden.cumsum(dim=1)], dim=1)  # (N, L+1, D)

        def at(index: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
            return source.gather(1, index.unsqueeze(-1).expand(-1, -1, d))

        lengths = (ends - starts).clamp(min=1).unsqueeze(-1).to(hidden.dtype)
        mean = (at(ends, prefix) - at(starts, prefix)) / lengths
        last = at(ends - 1, hidden)
        scores: torch.Tensor = self.score(torch.cat([mean, last], dim=-1))
        return scores.squeeze(-1)

    def state_value(self, features: torch.Tensor) -> torch.Tensor:  # (N, D) -> (N,)
        values: torch.Tensor = self.value(features)
        return values.squeeze(-1)

    def trajectory_logit(self, features: torch.Tensor) -> torch.Tensor:  # (N, D) -> (N,)
        logits: torch.Tensor = self.trajectory(features)
        return logits.squeeze(-1)
