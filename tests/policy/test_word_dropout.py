"""Word dropout never feeds end-of-text markers: a tokenizer whose [UNK] is its end-of-text token
(as SmolLM2's <|endoftext|>) gets dropped words removed from the input instead."""

from __future__ import annotations

import copy

import torch

from distrl_core.learner.batch import StepBatch
from distrl_core.policy import Policy, PolicyConfig
from distrl_core.policy.scoring import dropout_token_id


def _inputs_seen(policy: Policy, rows) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """The token ids and the embeddings the backbone received in one training pass with dropout."""
    ids, embeddings = [], []
    embed = policy.model.get_input_embeddings()

    def record_ids(_module, args, _out) -> None:
        ids.append(args[0])

    def record_embeddings(_module, _args, kwargs) -> None:
        embeddings.append(kwargs["inputs_embeds"])

    handles = [
        embed.register_forward_hook(record_ids),
        policy.model.register_forward_pre_hook(record_embeddings, with_kwargs=True),
    ]
    policy.train()
    torch.manual_seed(0)
    try:
        with policy.with_word_dropout(1.0, 1.0), torch.no_grad():
            policy.evaluate(StepBatch.from_rows(rows))
    finally:
        for handle in handles:
            handle.remove()
    return ids, embeddings


def test_unk_that_is_the_eos_token_is_never_fed(tokenizer, sim_rows):
    odd = copy.deepcopy(tokenizer)
    odd.unk_token = odd.eos_token  # what byte-level BPE tokenizers often declare
    assert odd.unk_token_id == odd.eos_token_id
    assert dropout_token_id(odd) is None
    # without the match embedding, what the backbone reads is the words' embeddings alone
    policy = Policy.create(PolicyConfig(device="cpu", match_features=False), tokenizer=odd)
    ids, embeddings = _inputs_seen(policy, sim_rows)
    assert ids
    for batch_ids, batch_embeddings in zip(ids, embeddings, strict=True):
        assert not bool((batch_ids == odd.eos_token_id).any()), "dropped words became end-of-text tokens"
        # every word was dropped (p = 1): nothing of them reaches the backbone
        assert float(batch_embeddings.abs().max()) == 0.0


def test_the_tiny_default_still_drops_to_its_unk(tokenizer, sim_rows):
    assert dropout_token_id(tokenizer) == tokenizer.unk_token_id != tokenizer.eos_token_id
    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer)
    ids, _ = _inputs_seen(policy, sim_rows)
    seen = torch.cat([i.flatten() for i in ids])
    assert bool((seen == tokenizer.unk_token_id).any())


def test_phrasing_dropout_drops_only_the_instructions_own_words(tokenizer):
    """The phrasing probability applies to instruction words that are not on the screen (what an
    unseen phrasing changes), the entity one to words shared with the screen, the other one to
    the rest; without a phrasing probability the instruction's words follow the other one."""
    from distrl_core.policy import scoring
    from distrl_core.policy.tokenizer import FLAG_INSTRUCTION, FLAG_INSTRUCTION_MATCHED, FLAG_MATCH

    policy = Policy.create(PolicyConfig(device="cpu"), tokenizer=tokenizer)
    screen = '[0] TextView "Wi-Fi" (0,0,10,10)\n[1] Switch "Bluetooth" (0,10,10,20)'
    step = policy.encode("Please switch Wi-Fi off now", screen)
    ids, flags = torch.tensor([step.input_ids]), torch.tensor([step.flags])
    policy.train()
    phrasing = flags == FLAG_INSTRUCTION
    shared = (flags == FLAG_MATCH) | (flags == FLAG_INSTRUCTION_MATCHED)
    assert bool(phrasing.any()) and bool(shared.any()) and bool((~phrasing & ~shared).any())
    with policy.with_word_dropout(0.0, 0.0, 1.0):
        assert torch.equal(scoring._drop_mask(policy.parts(), ids, flags), phrasing)
    with policy.with_word_dropout(1.0, 0.0, 0.0):
        assert torch.equal(scoring._drop_mask(policy.parts(), ids, flags), shared)
    with policy.with_word_dropout(0.0, 1.0):  # phrasing follows `other` when not given
        assert bool(scoring._drop_mask(policy.parts(), ids, flags)[~shared].all())
    with policy.with_word_dropout(0.0, 1.0, 0.0):
        assert torch.equal(scoring._drop_mask(policy.parts(), ids, flags), ~phrasing & ~shared)
