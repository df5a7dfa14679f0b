#!/usr/bin/env python3
"""Trains the demo Qwen3 model on the tokenized corpus (prepare-data.ts) with PyTorch on the CPU.

usage: /usr/bin/python3 tools/demo-model/train.py DATA_DIR [--steps N] [--threads 2] [--bench]

The architecture is llama.cpp's `qwen3`: RMSNorm before attention and feed-forward, grouped-query
attention with RMSNorm on each query and key head (QK-norm), NeoX-style rotary embeddings,
SwiGLU feed-forward, a final RMSNorm, and the output projection tied to the token embedding.
Writes DATA_DIR/weights.bin (float32 tensors in the order of weights.json, GGUF names and
shapes), DATA_DIR/loss.csv (step, tokens, train loss, held-out loss), and DATA_DIR/train-config.json.
Everything random comes from --seed: the same seed, data and thread count give the same model.
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F

CONFIG = dict(
    vocab=4096,
    hidden=256,
    layers=4,
    heads=4,
    kv_heads=2,
    head_dim=64,
    ffn=768,
    context=256,
    rope_theta=10000.0,
    norm_eps=1e-6,
)
TRAIN = dict(batch=16, lr=3e-3, min_lr_ratio=0.1, warmup=100, weight_decay=0.1, clip=1.0, eval_every=50, eval_batches=16)


class RMSNorm(torch.nn.Module):
    def __init__(self, width, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotary_tables(context, head_dim, theta):
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(context, dtype=torch.float32), inv)
    return torch.cos(angles), torch.sin(angles)


def rotate(x, cos, sin):
    # NeoX layout: the first half of each head pairs with the second half.
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Block(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        h, d = c["hidden"], c["head_dim"]
        self.attn_norm = RMSNorm(h, c["norm_eps"])
        self.q = torch.nn.Linear(h, c["heads"] * d, bias=False)
        self.k = torch.nn.Linear(h, c["kv_heads"] * d, bias=False)
        self.v = torch.nn.Linear(h, c["kv_heads"] * d, bias=False)
        self.o = torch.nn.Linear(c["heads"] * d, h, bias=False)
        self.q_norm = RMSNorm(d, c["norm_eps"])
        self.k_norm = RMSNorm(d, c["norm_eps"])
        self.ffn_norm = RMSNorm(h, c["norm_eps"])
        self.gate = torch.nn.Linear(h, c["ffn"], bias=False)
        self.up = torch.nn.Linear(h, c["ffn"], bias=False)
        self.down = torch.nn.Linear(c["ffn"], h, bias=False)

    def forward(self, x, cos, sin, mask):
        c = self.c
        b, t, _ = x.shape
        y = self.attn_norm(x)
        q = self.q_norm(self.q(y).view(b, t, c["heads"], c["head_dim"])).transpose(1, 2)
        k = self.k_norm(self.k(y).view(b, t, c["kv_heads"], c["head_dim"])).transpose(1, 2)
        v = self.v(y).view(b, t, c["kv_heads"], c["head_dim"]).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = c["heads"] // c["kv_heads"]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(c["head_dim"]) + mask
        attn = torch.softmax(scores, dim=-1) @ v
        x = x + self.o(attn.transpose(1, 2).reshape(b, t, -1))
        y = self.ffn_norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Model(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed = torch.nn.Embedding(c["vocab"], c["hidden"])
        self.blocks = torch.nn.ModuleList([Block(c) for _ in range(c["layers"])])
        self.norm = RMSNorm(c["hidden"], c["norm_eps"])
        cos, sin = rotary_tables(c["context"], c["head_dim"], c["rope_theta"])
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        mask = torch.full((c["context"], c["context"]), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 if not name.endswith(("o.weight", "down.weight")) else 0.02 / math.sqrt(2 * c["layers"])
                torch.nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x, self.cos[:t], self.sin[:t], self.mask[:t, :t])
        return self.norm(x) @ self.embed.weight.T


def gguf_tensors(model):
    """(GGUF name, float32 array in GGUF order) for every weight; shapes as ggml's ne reversed."""
    out = [("token_embd.weight", model.embed.weight)]
    for i, b in enumerate(model.blocks):
        p = f"blk.{i}."
        out += [
            (p + "attn_norm.weight", b.attn_norm.weight),
            (p + "attn_q.weight", b.q.weight),
            (p + "attn_k.weight", b.k.weight),
            (p + "attn_v.weight", b.v.weight),
            (p + "attn_output.weight", b.o.weight),
            (p + "attn_q_norm.weight", b.q_norm.weight),
            (p + "attn_k_norm.weight", b.k_norm.weight),
            (p + "ffn_norm.weight", b.ffn_norm.weight),
            (p + "ffn_gate.weight", b.gate.weight),
            (p + "ffn_up.weight", b.up.weight),
            (p + "ffn_down.weight", b.down.weight),
        ]
    out.append(("output_norm.weight", model.norm.weight))
    return [(name, t.detach().float().contiguous().numpy()) for name, t in out]


def batches(data, batch, context, generator):
    starts = torch.randint(0, len(data) - context - 1, (batch,), generator=generator)
    x = torch.stack([torch.from_numpy(data[s : s + context + 1].astype(np.int64)) for s in starts.tolist()])
    return x[:, :-1], x[:, 1:]


@torch.no_grad()
def evaluate(model, data, context, count):
    # Fixed, evenly spaced windows: the same held-out tokens at every evaluation.
    model.eval()
    span = (len(data) - context - 1) // count
    losses = []
    for i in range(count):
        chunk = torch.from_numpy(data[i * span : i * span + context + 1].astype(np.int64))[None]
        logits = model(chunk[:, :-1])
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1)).item())
    model.train()
    return sum(losses) / len(losses)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("data")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--bench", action="store_true", help="time 10 steps and exit")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    c = CONFIG
    train = np.fromfile(os.path.join(args.data, "train.bin"), dtype=np.uint16)
    heldout = np.fromfile(os.path.join(args.data, "heldout.bin"), dtype=np.uint16)
    assert train.max() < c["vocab"] and heldout.max() < c["vocab"]
    model = Model(c)
    params = sum(p.numel() for p in model.parameters())
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": TRAIN["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}],
        lr=TRAIN["lr"], betas=(0.9, 0.95),
    )
    tokens_per_step = TRAIN["batch"] * c["context"]
    print(f"parameters {params}, train tokens {len(train)}, held-out tokens {len(heldout)}, {tokens_per_step} tokens/step", flush=True)

    def lr_at(step):
        if step < TRAIN["warmup"]:
            return TRAIN["lr"] * (step + 1) / TRAIN["warmup"]
        progress = (step - TRAIN["warmup"]) / max(1, args.steps - TRAIN["warmup"])
        return TRAIN["lr"] * (TRAIN["min_lr_ratio"] + (1 - TRAIN["min_lr_ratio"]) * 0.5 * (1 + math.cos(math.pi * progress)))

    log = None if args.bench else open(os.path.join(args.data, "loss.csv"), "w")
    if log:
        log.write("step,tokens,train_loss,heldout_loss,seconds\n")
    started = time.time()
    running = None
    steps = 10 if args.bench else args.steps
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        x, y = batches(train, TRAIN["batch"], c["context"], generator)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, c["vocab"]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), TRAIN["clip"])
        optimizer.step()
        running = loss.item() if running is None else 0.98 * running + 0.02 * loss.item()
        last = step == steps - 1
        if log and (step % TRAIN["eval_every"] == 0 or last):
            held = evaluate(model, heldout, c["context"], TRAIN["eval_batches"])
            elapsed = time.time() - started
            log.write(f"{step + 1},{(step + 1) * tokens_per_step},{running:.4f},{held:.4f},{elapsed:.0f}\n")
            log.flush()
            print(f"step {step + 1}/{steps} train {running:.3f} held-out {held:.3f} ({(step + 1) * tokens_per_step / elapsed:.0f} tokens/s)", flush=True)
    elapsed = time.time() - started
    if args.bench:
        print(f"{steps * tokens_per_step / elapsed:.0f} tokens/s, {elapsed / steps:.2f} s/step", flush=True)
        return
    tensors = gguf_tensors(model)
    with open(os.path.join(args.data, "weights.bin"), "wb") as f:
        for _, array in tensors:
            f.write(array.astype("<f4").tobytes())
    json.dump([{"name": n, "shape": list(a.shape)} for n, a in tensors], open(os.path.join(args.data, "weights.json"), "w"))
    json.dump({"model": c, "train": TRAIN, "steps": args.steps, "seed": args.seed, "threads": args.threads, "parameters": params,
               "seconds": round(elapsed)}, open(os.path.join(args.data, "train-config.json"), "w"), indent=2)


if __name__ == "__main__":
    main()
