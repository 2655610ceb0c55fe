"""Tiny models for strata.torch's tests: HuggingFace GPT-2 (tied weights)
and Llama at random init (no download), and a plain MLP; each built from a
seed so that two copies start equal."""

import os

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

VOCAB = 256
# Where the models compute: the GPU when there is one (the store's device
# tier is then CUDA memory), else the CPU (the simulated device).
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(seed)
    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=VOCAB,
                        n_positions=64, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, attn_implementation="eager")
    return GPT2LMHeadModel(config).to(DEVICE)


def llama(seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(seed)
    config = LlamaConfig(num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, hidden_size=64,
                         intermediate_size=128, vocab_size=VOCAB,
                         max_position_embeddings=64,
                         attn_implementation="eager")
    return LlamaForCausalLM(config).to(DEVICE)


class MLP(torch.nn.Module):
    """A plain module: the next token's class (mod 64) from the current
    token's one-hot, through four hidden layers."""

    CLASSES = 64

    def __init__(self):
        super().__init__()
        layers = [torch.nn.Linear(self.CLASSES, 128), torch.nn.GELU(),
                  torch.nn.LayerNorm(128)]
        for _ in range(3):
            layers += [torch.nn.Linear(128, 128), torch.nn.ReLU()]
        layers.append(torch.nn.Linear(128, self.CLASSES))
        self.layers = torch.nn.Sequential(*layers)

    def forward(self, input_ids, labels):
        x = torch.nn.functional.one_hot(input_ids[:, :-1] % self.CLASSES,
                                        self.CLASSES).float()
        logits = self.layers(x)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, self.CLASSES),
            (labels[:, 1:] % self.CLASSES).reshape(-1))
        return type("Output", (), {"loss": loss})()


def mlp(seed=0):
    torch.manual_seed(seed)
    return MLP().to(DEVICE)


MODELS = {"gpt2": gpt2, "llama": llama, "mlp": mlp}


def state_bytes(model):
    """Parameters, gradients and Adam's two moments, in bytes."""
    unique = {id(p): p for p in model.parameters()}.values()
    return 4 * sum(p.numel() * p.element_size() for p in unique)


def batches(steps, micro, seed=1, batch=2, length=32):
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randint(0, VOCAB, (batch, length), generator=gen).to(DEVICE)
             for _ in range(micro)] for _ in range(steps)]


def train_steps(model, opt, data, clip=None):
    """Each step of `data`: its micro-batches' backward, clipping at `clip`
    (st.clip_grad_norm_; None: none), step, zero_grad. The losses."""
    import strata.torch as st
    losses = []
    for micro in data:
        for ids in micro:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            losses.append(loss.item())
        if clip is not None:
            st.clip_grad_norm_(model, clip)
        opt.step()
        opt.zero_grad()
    return losses
