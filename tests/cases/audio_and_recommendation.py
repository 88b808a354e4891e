"""Corpus: speech and recommendation models in the styles their projects write them (small
sizes, CPU, written here).

Each model is run in eval mode under ``torch.no_grad()`` (tag ``"no_grad"``) and, where it makes
sense, in training mode (dropout and drop-path draw random numbers: tag ``"rng"`` has the harness
start every call from the case's seed).

- ``DLRM``: facebookresearch/dlrm: ``nn.EmbeddingBag`` per sparse feature with offsets, a bottom and a
  top MLP, the dot interaction with ``torch.bmm`` and index tensors (``torch.tensor`` of a
  comprehension in the original, ``torch.triu_indices`` as torchrec writes it);
- ``Wav2Vec2``: Hugging Face wav2vec2's conv feature encoder and positional conv embedding under
  ``nn.utils.parametrizations.weight_norm`` (a parametrized ``weight``), ``SamePad`` slicing;
- ``TasNet``: Conv-TasNet: ``pad_signal`` with ``.type(input.type())``, reflect ``F.pad``, ``nn.PReLU``,
  causal depthwise convs trimmed by slicing, the cumulative layer norm (``cumsum``, ``expand_as``),
  skip connections summed from ``0.0``.
"""

from __future__ import annotations


import torch
import torch.nn as nn
import torch.nn.functional as F

from pyframe.debug.cases import case

# ------------------------------------------------------------------------------------------------
# DLRM (facebookresearch/dlrm's dlrm_s_pytorch.py)


class DLRM_Net(nn.Module):
    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, ln.size - 1 if hasattr(ln, "size") else len(ln) - 1):
            n = ln[i]
            m = ln[i + 1]
            LL = nn.Linear(int(n), int(m), bias=True)
            layers.append(LL)
            if i == sigmoid_layer:
                layers.append(nn.Sigmoid())
            else:
                layers.append(nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for i in range(0, len(ln)):
            n = ln[i]
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=False)
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa=8, ln_emb=(10, 20, 15), ln_bot=(6, 16, 8), ln_top=(14, 16, 1),
                 arch_interaction_op="dot", arch_interaction_itself=False, sigmoid_bot=-1, sigmoid_top=1,
                 loss_threshold=0.0, use_triu_indices=False):
        super().__init__()
        self.arch_interaction_op = arch_interaction_op
        self.arch_interaction_itself = arch_interaction_itself
        self.loss_threshold = loss_threshold
        self.use_triu_indices = use_triu_indices
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, sigmoid_bot)
        self.top_l = self.create_mlp(ln_top, sigmoid_top)

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch, per_sample_weights=None)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        if self.arch_interaction_op == "dot":
            # concatenate dense and sparse features
            (batch_size, d) = x.shape
            T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
            # perform a dot product
            Z = torch.bmm(T, torch.transpose(T, 1, 2))
            _, ni, nj = Z.shape
            offset = 1 if self.arch_interaction_itself else 0
            if self.use_triu_indices:  # torchrec's way: Z is symmetric, its upper triangle will do
                li, lj = torch.triu_indices(ni, nj, offset=1 - offset, device=Z.device)
            else:
                li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
                lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
            Zflat = Z[:, li, lj]
            # concatenate dense features and interactions
            R = torch.cat([x] + [Zflat], dim=1)
        elif self.arch_interaction_op == "cat":
            R = torch.cat([x] + ly, dim=1)
        else:
            raise ValueError(f"arch_interaction_op={self.arch_interaction_op} is not supported")
        return R

    def forward(self, dense_x, lS_o, lS_i):
        x = self.apply_mlp(dense_x, self.bot_l)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.apply_mlp(z, self.top_l)
        if 0.0 < self.loss_threshold and self.loss_threshold < 1.0:
            z = torch.clamp(p, min=self.loss_threshold, max=(1.0 - self.loss_threshold))
        else:
            z = p
        return z


def _dlrm_batch() -> tuple:
    """4 samples: dense features, and per sparse feature the flat indices and each bag's offset."""
    dense = torch.rand(4, 6)
    offsets, indices = [], []
    for rows, bag_sizes in ((10, [1, 2, 1, 3]), (20, [2, 2, 1, 1]), (15, [1, 1, 1, 1])):
        offsets.append(torch.tensor([0] + list(torch.tensor(bag_sizes).cumsum(0)[:-1].tolist())))
        indices.append(torch.randint(0, rows, (sum(bag_sizes),)))
    return dense, offsets, indices


@case(inputs=_dlrm_batch, tags={"eval", "no_grad"})
class DLRMEval(DLRM_Net):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


@case(inputs=_dlrm_batch, tags={"train"})
class DLRMTrainTriu(DLRM_Net):
    """torchrec-style index tensors and a clamped output (``loss_threshold``)."""

    def __init__(self) -> None:
        super().__init__(use_triu_indices=True, loss_threshold=0.01)
        self.train()


# ------------------------------------------------------------------------------------------------
# wav2vec2 (Hugging Face transformers): a conv feature encoder, a weight-normed positional conv
# (torch.nn.utils.parametrizations.weight_norm: a parametrized `weight` property), SamePad


class Wav2Vec2GroupNormConvLayer(nn.Module):
    def __init__(self, in_dim, out_dim, kernel, stride, first=False):
        super().__init__()
        self.conv = nn.Conv1d(in_dim, out_dim, kernel_size=kernel, stride=stride, bias=False)
        self.activation = nn.GELU()
        self.layer_norm = nn.GroupNorm(num_groups=out_dim, num_channels=out_dim, affine=True) if first else None

    def forward(self, hidden_states):
        hidden_states = self.conv(hidden_states)
        if self.layer_norm is not None:
            hidden_states = self.layer_norm(hidden_states)
        hidden_states = self.activation(hidden_states)
        return hidden_states


class Wav2Vec2SamePadLayer(nn.Module):
    def __init__(self, num_conv_pos_embeddings):
        super().__init__()
        self.num_pad_remove = 1 if num_conv_pos_embeddings % 2 == 0 else 0

    def forward(self, hidden_states):
        if self.num_pad_remove > 0:
            hidden_states = hidden_states[:, :, : -self.num_pad_remove]
        return hidden_states


class Wav2Vec2PositionalConvEmbedding(nn.Module):
    def __init__(self, hidden_size=16, num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=4):
        super().__init__()
        self.conv = nn.Conv1d(hidden_size, hidden_size, kernel_size=num_conv_pos_embeddings,
                              padding=num_conv_pos_embeddings // 2, groups=num_conv_pos_embedding_groups)
        weight_norm = nn.utils.weight_norm
        if hasattr(nn.utils.parametrizations, "weight_norm"):
            weight_norm = nn.utils.parametrizations.weight_norm
        self.conv = weight_norm(self.conv, name="weight", dim=2)
        self.padding = Wav2Vec2SamePadLayer(num_conv_pos_embeddings)
        self.activation = nn.GELU()

    def forward(self, hidden_states):
        hidden_states = hidden_states.transpose(1, 2)
        hidden_states = self.conv(hidden_states)
        hidden_states = self.padding(hidden_states)
        hidden_states = self.activation(hidden_states)
        hidden_states = hidden_states.transpose(1, 2)
        return hidden_states


class Wav2Vec2Style(nn.Module):
    def __init__(self, conv_dim=(8, 8, 16), conv_kernel=(10, 3, 3), conv_stride=(5, 2, 2), hidden_size=16):
        super().__init__()
        layers = [Wav2Vec2GroupNormConvLayer(1, conv_dim[0], conv_kernel[0], conv_stride[0], first=True)]
        for i in range(1, len(conv_dim)):
            layers.append(Wav2Vec2GroupNormConvLayer(conv_dim[i - 1], conv_dim[i], conv_kernel[i], conv_stride[i]))
        self.conv_layers = nn.ModuleList(layers)
        self._requires_grad = True
        self.layer_norm = nn.LayerNorm(conv_dim[-1], eps=1e-5)
        self.projection = nn.Linear(conv_dim[-1], hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.pos_conv_embed = Wav2Vec2PositionalConvEmbedding(hidden_size)
        self.encoder_layer_norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, input_values):
        hidden_states = input_values[:, None]
        # make sure hidden_states require grad for gradient_checkpointing
        if self._requires_grad and self.training:
            hidden_states.requires_grad = True
        for conv_layer in self.conv_layers:
            hidden_states = conv_layer(hidden_states)
        extract_features = hidden_states.transpose(1, 2)
        norm_hidden_states = self.layer_norm(extract_features)
        hidden_states = self.projection(norm_hidden_states)
        hidden_states = self.dropout(hidden_states)
        position_embeddings = self.pos_conv_embed(hidden_states)
        hidden_states = hidden_states + position_embeddings
        hidden_states = self.encoder_layer_norm(hidden_states)
        return hidden_states, extract_features


@case(inputs=lambda: torch.randn(2, 160), tags={"eval", "no_grad"})
class Wav2Vec2Eval(Wav2Vec2Style):
    def __init__(self) -> None:
        super().__init__()
        self.eval()


# ------------------------------------------------------------------------------------------------
# Conv-TasNet's separator pieces: reflect padding, PReLU, cumulative layer norm with cumsum


class cLN(nn.Module):
    """Cumulative layer norm (Conv-TasNet): statistics over time steps seen so far."""

    def __init__(self, dimension, eps=1e-8):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.ones(1, dimension, 1))
        self.bias = nn.Parameter(torch.zeros(1, dimension, 1))

    def forward(self, input):
        batch_size = input.size(0)
        channel = input.size(1)
        time_step = input.size(2)
        step_sum = input.sum(1)  # B, T
        step_pow_sum = input.pow(2).sum(1)  # B, T
        cum_sum = torch.cumsum(step_sum, dim=1)  # B, T
        cum_pow_sum = torch.cumsum(step_pow_sum, dim=1)  # B, T
        entry_cnt = torch.arange(channel, channel * (time_step + 1), channel, dtype=input.dtype,
                                 device=input.device)
        entry_cnt = entry_cnt.view(1, -1).expand_as(cum_sum)
        cum_mean = cum_sum / entry_cnt  # B, T
        cum_var = (cum_pow_sum - 2 * cum_mean * cum_sum) / entry_cnt + cum_mean.pow(2)  # B, T
        cum_std = (cum_var + self.eps).sqrt()  # B, T
        cum_mean = cum_mean.unsqueeze(1)
        cum_std = cum_std.unsqueeze(1)
        x = (input - cum_mean.expand_as(input)) / cum_std.expand_as(input)
        return x * self.gain.expand_as(x).type(x.type()) + self.bias.expand_as(x).type(x.type())


class DepthConv1d(nn.Module):
    def __init__(self, input_channel, hidden_channel, kernel, padding, dilation=1, skip=True, causal=False):
        super().__init__()
        self.causal = causal
        self.skip = skip
        self.conv1d = nn.Conv1d(input_channel, hidden_channel, 1)
        self.padding = (kernel - 1) * dilation if self.causal else padding
        self.dconv1d = nn.Conv1d(hidden_channel, hidden_channel, kernel, dilation=dilation,
                                 groups=hidden_channel, padding=self.padding)
        self.res_out = nn.Conv1d(hidden_channel, input_channel, 1)
        self.nonlinearity1 = nn.PReLU()
        self.nonlinearity2 = nn.PReLU()
        if self.causal:
            self.reg1 = cLN(hidden_channel, eps=1e-08)
            self.reg2 = cLN(hidden_channel, eps=1e-08)
        else:
            self.reg1 = nn.GroupNorm(1, hidden_channel, eps=1e-08)
            self.reg2 = nn.GroupNorm(1, hidden_channel, eps=1e-08)
        if self.skip:
            self.skip_out = nn.Conv1d(hidden_channel, input_channel, 1)

    def forward(self, input):
        output = self.reg1(self.nonlinearity1(self.conv1d(input)))
        if self.causal:
            output = self.reg2(self.nonlinearity2(self.dconv1d(output)[:, :, :-self.padding]))
        else:
            output = self.reg2(self.nonlinearity2(self.dconv1d(output)))
        residual = self.res_out(output)
        if self.skip:
            skip = self.skip_out(output)
            return residual, skip
        else:
            return residual


class TasNetStyle(nn.Module):
    def __init__(self, causal=True):
        super().__init__()
        self.encoder = nn.Conv1d(1, 8, 4, stride=2, bias=False)
        self.blocks = nn.ModuleList([DepthConv1d(8, 16, 3, padding=2 ** i, dilation=2 ** i, causal=causal)
                                     for i in range(3)])
        self.output = nn.Sequential(nn.PReLU(), nn.Conv1d(8, 8, 1))

    def pad_signal(self, input):
        if input.dim() not in [2, 3]:
            raise RuntimeError("Input can only be 2 or 3 dimensional.")
        if input.dim() == 2:
            input = input.unsqueeze(1)
        batch_size = input.size(0)
        nsample = input.size(2)
        rest = 4 - (2 + nsample % 4) % 4
        if rest > 0:
            pad = torch.zeros(batch_size, 1, rest).type(input.type())
            input = torch.cat([input, pad], 2)
        pad_aux = torch.zeros(batch_size, 1, 2).type(input.type())
        input = torch.cat([pad_aux, input, pad_aux], 2)
        return input, rest

    def forward(self, input):
        output, rest = self.pad_signal(input)
        output = F.pad(self.encoder(output), (1, 1), mode="reflect")
        skip_connection = 0.0
        for block in self.blocks:
            residual, skip = block(output)
            output = output + residual
            skip_connection = skip_connection + skip
        return torch.sigmoid(self.output(skip_connection)), rest


@case(inputs=lambda: torch.randn(2, 37), tags={"train"})
class TasNetTrain(TasNetStyle):
    def __init__(self) -> None:
        super().__init__()
        self.train()
